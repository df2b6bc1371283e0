"""The local backend's heartbeat: the datagram a slice host sends and the address it goes to.

A slice-host process (``elastix.backends.local.host``) sends one datagram every
``ELASTIX_HEARTBEAT_INTERVAL`` seconds to the address in ``ELASTIX_LOCAL_HEALTH``; the trainer's
``elastix_trainer.elastic.local.health`` receives them.

Addresses:

- ``unix:/path/to/health.sock``: a UNIX datagram socket file, in a directory only its owner can
  enter (0700; the receiver refuses any other);
- ``udp:127.0.0.1:PORT``: loopback UDP (any local user can send to it: the seal below is what
  keeps strangers out).

Never a Linux abstract socket (``unix:@name``): it has no permissions, so any local user could
send to it; it is refused. A state dir whose path is too long for ``sun_path`` gets a short
private directory instead (``elastix.backends.local.channel``).

The datagram is the text ``hb <slice> <host> <pid> <monotonic-seconds>``. The time is the
sender's ``time.monotonic()`` (system-wide on Linux and macOS), so a receiver busy compiling does
not mistake queued heartbeats for late ones; it also orders one sender's heartbeats, so a
captured one sent again is older than the last one heard and is dropped.

The channel also carries the answer a step needs from every host of its mesh (the local
stand-in's contract, ``elastix_trainer.elastic.local.standin``): the controller sends
``ping <token>`` to the address a host's heartbeats come from, and the host answers at once with
``pong <slice> <host> <pid> <token>`` from that same socket. A dead host cannot answer; a hung one
(SIGSTOP) answers only once it runs again, as a TPU host in a collective. A host's socket has its
own address for that (UDP: the port its first send bound; UNIX: a Linux autobind name).

Every datagram is sealed: its text, a space, and its 16-byte MAC (hex), keyed BLAKE2b (a MAC by
design, RFC 7693; a quarter of HMAC-SHA256's cost, which is on the step path) under the workload's
key (``ELASTIX_HEARTBEAT_KEY``, 32 random bytes the supervisor makes and
gives only to the processes it starts, in their environment). A datagram whose seal does not
match is not the workload's: the receiver drops and counts it, and a host does not answer it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
from collections.abc import Callable
from typing import Any

from elastix.protocol import envvars

DEFAULT_TIMEOUT = 2.0
"""Seconds without a heartbeat after which a host (and so its slice) counts as lost."""
DEFAULT_INTERVAL = 0.2
"""Seconds between heartbeats of a slice host."""
KEY_BYTES = 32
"""Random bytes of a workload's key."""
MAC_BYTES = 16
"""Bytes of the MAC a datagram carries (hex: twice as many characters)."""
MAX_DATAGRAM = 256
"""Longer than any datagram of this protocol: a receive buffer of this size never truncates one."""


def parse_address(address: str) -> tuple[int, str | tuple[str, int]]:
    """Split ``unix:PATH`` / ``udp:host:port`` into a socket family and a socket address.

    Raises:
        ValueError: the address has no known scheme, or names an abstract socket.
    """
    scheme, _, rest = address.partition(":")
    if scheme == "unix" and rest.startswith("@"):
        raise ValueError(f"bad {envvars.LOCAL_HEALTH} address {address!r}: an abstract UNIX "
                         "socket has no permissions (any local user could send to it); use "
                         "unix:PATH in a 0700 directory")
    if scheme == "unix" and rest:
        return socket.AF_UNIX, rest
    if scheme == "udp" and rest:
        host, _, port = rest.rpartition(":")
        return socket.AF_INET, (host or "127.0.0.1", int(port))
    raise ValueError(f"bad {envvars.LOCAL_HEALTH} address {address!r}: use unix:PATH or udp:HOST:PORT")


def new_key() -> str:
    """A fresh workload key, as ``ELASTIX_HEARTBEAT_KEY`` carries it (hex)."""
    return secrets.token_hex(KEY_BYTES)


def key_bytes(key: str) -> bytes:
    """The bytes of a hex key.

    Raises:
        ValueError: not hex, or shorter than ``KEY_BYTES``.
    """
    try:
        raw = bytes.fromhex(key)
    except ValueError:
        raw = b""
    if not KEY_BYTES <= len(raw) <= hashlib.blake2b.MAX_KEY_SIZE:
        raise ValueError(f"{envvars.HEARTBEAT_KEY} must be {KEY_BYTES} to "
                         f"{hashlib.blake2b.MAX_KEY_SIZE} bytes in hex")
    return raw


def _mac(key: bytes, body: bytes) -> bytes:
    return hashlib.blake2b(body, key=key, digest_size=MAC_BYTES).hexdigest().encode()


def seal(key: bytes, body: str) -> bytes:
    """``body`` as a datagram: its text and its seal under ``key``."""
    raw = body.encode()
    return raw + b" " + _mac(key, raw)


def unseal(key: bytes, data: bytes) -> str | None:
    """The text of a datagram sealed under ``key``, or None when its seal does not match."""
    raw, _, mac = data.rpartition(b" ")
    if not raw or not hmac.compare_digest(mac, _mac(key, raw)):
        return None
    return raw.decode("ascii", "replace")


def encode(key: bytes, slice_id: int, host: int, pid: int, ts: float) -> bytes:
    """The datagram a slice host sends, sealed under ``key``."""
    return seal(key, f"hb {slice_id} {host} {pid} {ts:.6f}")


def decode(text: str) -> tuple[int, int, int, float] | None:
    """``(slice, host, pid, ts)`` from an unsealed datagram, or None when it is not a heartbeat."""
    return _fields(text, "hb", int, int, int, float)


def encode_ping(key: bytes, token: int) -> bytes:
    """What the controller sends a host to have it answer now, sealed under ``key``."""
    return seal(key, f"ping {token}")


def decode_ping(text: str) -> int | None:
    """The token of an unsealed ``ping``, or None when it is not one."""
    parts = text.split()
    if len(parts) != 2 or parts[0] != "ping" or not parts[1].isdigit():
        return None
    return int(parts[1])


def encode_pong(key: bytes, slice_id: int, host: int, pid: int, token: int) -> bytes:
    """A host's answer to ``ping <token>``, sealed under ``key``."""
    return seal(key, f"pong {slice_id} {host} {pid} {token}")


def decode_pong(text: str) -> tuple[int, int, int, int] | None:
    """``(slice, host, pid, token)`` from an unsealed ``pong``, or None when it is not one."""
    return _fields(text, "pong", int, int, int, int)


def _fields(text: str, word: str, *kinds: Callable[[str], Any]) -> tuple | None:
    """The fields after ``word`` of an unsealed datagram, each read by its kind; None when the
    datagram is not ``word`` and that many fields, or a field does not read."""
    parts = text.split()
    if len(parts) != len(kinds) + 1 or parts[0] != word:
        return None
    try:
        return tuple(kind(p) for kind, p in zip(kinds, parts[1:], strict=True))
    except ValueError:
        return None
