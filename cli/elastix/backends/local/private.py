"""The local state root and the two directories its workloads share are the user's alone.

The state root (``--state-dir``, ``ELASTIX_STATE_DIR``, default ``<user data dir>/elastix/
workloads``) holds every workload's directory and two shared ones beside them:
``.cache/jax`` (JAX's compilation cache: machine code JAX loads without a check, so an entry
another user swapped changes what a run computes) and ``.data`` (each workload's kept
checkpoints). A directory another user owns, or one its group or others may write to, lets
them plant or swap those. So before ``workload create`` (or ``clone``) starts anything, each of
them that exists must be a directory of this user's that no one else may write to (as the
heartbeat socket's directory must be, :mod:`elastix.backends.local.channel`); else exit 2 with
the fix in the hint. Those missing are made, 0700, so the trainer's own ``makedirs`` never makes
them through a looser umask.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from elastix.errors import UsageError

SHARED = (".cache", ".cache/jax", ".data")
"""The state root's shared directories, relative to it (``plan.compilation_cache_dir``,
``plan.data_dir``)."""


def problem(root: Path) -> tuple[str, str] | None:
    """Why ``root`` or one of its :data:`SHARED` directories may not be used, and the fix; None
    when each one that exists is a directory of this user's closed to writes by others."""
    for rel in ("", *SHARED):
        path = root / rel if rel else root
        try:
            st = os.stat(path)
        except FileNotFoundError:
            continue
        except OSError as e:
            return (f"{path} cannot be read ({e.strerror or e})",
                    "pass --state-dir DIR (or ELASTIX_STATE_DIR) with a directory of your own")
        what = "the state directory" if not rel else f"the state directory's {rel}"
        if not stat.S_ISDIR(st.st_mode):
            return (f"{what} {path} is not a directory",
                    "remove it, or pass --state-dir DIR (or ELASTIX_STATE_DIR) elsewhere")
        if st.st_uid != os.geteuid():
            return (f"{what} {path} belongs to another user (uid {st.st_uid}): the workloads' "
                    "checkpoints and the compilation cache they share (code JAX runs) must be "
                    "yours alone",
                    "pass --state-dir DIR (or ELASTIX_STATE_DIR) with a directory of your own "
                    "(made 0700 if missing), or have its owner remove it")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            who = " and ".join(w for w, bit in (("its group", stat.S_IWGRP),
                                                ("others", stat.S_IWOTH)) if st.st_mode & bit)
            return (f"{what} {path} may be written by {who} (mode "
                    f"{stat.S_IMODE(st.st_mode):04o}): they could plant checkpoints or "
                    "compiled code in it",
                    f"chmod go-w {path}   (or pass --state-dir DIR with a directory of your own)")
    return None


def check(root: Path) -> None:
    """Refuse a state root others control (:func:`problem`).

    Raises:
        UsageError: one of them is another user's, writable by others, or not a directory.
    """
    found = problem(root)
    if found is not None:
        raise UsageError(f"{found[0]}: nothing was started", hint=found[1])


def prepare(root: Path) -> None:
    """Make the state root and its :data:`SHARED` directories that are missing, 0700 whatever
    the umask (then :func:`check` them again: one made by someone else in between is refused).

    Raises:
        UsageError: as :func:`check`.
        OSError: a directory cannot be made.
    """
    for rel in ("", *SHARED):
        path = root / rel if rel else root
        try:
            os.makedirs(path, mode=0o700)
        except FileExistsError:
            continue
        os.chmod(path, 0o700)
    check(root)
