"""Where a local workload's heartbeat socket lives: a file in a directory only its user can enter.

Anyone who can reach a UNIX socket file (search permission on its directories, write on the
file) can send to it, so the socket sits alone in a 0700 directory: ``<workload dir>/hb/``. A
state dir whose path is too long for ``sun_path`` (about 104 bytes; pytest's tmp dirs easily
exceed it) gets a short one instead, ``/tmp/elastix-<uid>/<digest of the workload dir>/``,
under a per-user root that must be the user's own and closed to others. It used to be a Linux
abstract socket, which has no permissions at all: any local user could send to it. The seal on
every datagram (``elastix.protocol.heartbeat``) keeps out the rest (same user, other
workloads, loopback UDP).

The plan names the address (:func:`address`, pure); the supervisor makes the directory before
it starts a process (:func:`prepare`); the supervisor's end and ``delete`` remove it
(:func:`remove`).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

SOCKET = "health.sock"
DIR = "hb"
"""The socket's directory inside the workload dir."""
SUN_PATH_FIT = 100
"""Bytes a socket path may take (``sun_path`` holds 108 on Linux, 104 on macOS)."""


def address(workload_dir: Path) -> str:
    """``unix:<workload dir>/hb/health.sock``, or a short private stand-in when that is too long."""
    path = str(workload_dir / DIR / SOCKET)
    if len(path.encode()) < SUN_PATH_FIT:
        return f"unix:{path}"
    digest = hashlib.sha256(str(workload_dir).encode()).hexdigest()[:16]
    return f"unix:{_short_root()}/{digest}/{SOCKET}"


def _short_root() -> str:
    return f"/tmp/elastix-{os.geteuid()}"


def problem(address: str) -> str | None:
    """Why the socket of ``address`` cannot be kept private, told before anything is made: its
    short stand-in's per-user root (``/tmp/elastix-<uid>``) exists and is not a directory of
    this user's (another user made it, or it is a link). None when it can be used."""
    path = _socket_path(address)
    if path is None or os.path.dirname(os.path.dirname(path)) != _short_root():
        return None
    try:
        st = os.lstat(_short_root())
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
        return None
    what = "is not a directory" if not stat.S_ISDIR(st.st_mode) else \
        f"belongs to another user (uid {st.st_uid})"
    return (f"{_short_root()}, where a long state directory's heartbeat socket goes, {what}: "
            "the socket cannot be kept private there")


def prepare(address: str) -> None:
    """Make the socket's directory (0700, whatever the umask), and its per-user root for a
    short stand-in; both must be this user's and closed to others.

    Raises:
        OSError: a directory cannot be made, or one that exists is another user's or open to
            others (its ``strerror`` says which).
    """
    path = _socket_path(address)
    if path is None:
        return
    d = os.path.dirname(path)
    if os.path.dirname(d) == _short_root():
        _private_dir(_short_root())
    _private_dir(d)


def _private_dir(d: str) -> None:
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise OSError(f"{d} is not a directory of this user's: the heartbeat socket cannot be "
                      "kept private there")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(d, 0o700)  # mkdir's mode went through the umask; or an older elastix made it


def remove(address: str, workload_dir: Path) -> None:
    """Remove a short stand-in's socket and directory (one in the workload dir goes with it)."""
    path = _socket_path(address)
    if path is None or path.startswith(f"{workload_dir}{os.sep}"):
        return
    undo = [lambda: os.unlink(path)]  # an older elastix's /tmp/elastix-<digest>.sock too
    if os.path.dirname(os.path.dirname(path)) == _short_root():
        undo.append(lambda: os.rmdir(os.path.dirname(path)))
    for step in undo:
        try:
            step()
        except OSError:
            pass  # gone already, or something else is in it: rmdir never removes that


def _socket_path(address: str) -> str | None:
    return address[len("unix:"):] if address.startswith("unix:/") else None
