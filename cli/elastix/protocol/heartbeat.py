"""The local backend's heartbeat: the datagram a slice host sends and the address it goes to.

A slice-host process (``elastix.backends.local.host``) sends one datagram every
``ELASTIX_HEARTBEAT_INTERVAL`` seconds to the address in ``ELASTIX_LOCAL_HEALTH``; the trainer's
``elastix_trainer.elastic.local.health`` receives them.

Addresses:

- ``unix:/path/to/health.sock``: a UNIX datagram socket file;
- ``unix:@name``: a Linux abstract UNIX socket (for state dirs whose path is too long);
- ``udp:127.0.0.1:PORT``: loopback UDP.

The datagram is the text ``hb <slice> <host> <pid> <monotonic-seconds>``. The time is the
sender's ``time.monotonic()`` (system-wide on Linux and macOS), so a receiver busy compiling does
not mistake queued heartbeats for late ones.

The channel also carries the answer a step needs from every host of its mesh (the local
stand-in's contract, ``elastix_trainer.elastic.local.standin``): the controller sends
``ping <token>`` to the address a host's heartbeats come from, and the host answers at once with
``pong <slice> <host> <pid> <token>`` from that same socket. A dead host cannot answer; a hung one
(SIGSTOP) answers only once it runs again, as a TPU host in a collective. A host's socket has its
own address for that (UDP: the port its first send bound; UNIX: a Linux autobind name).
"""

from __future__ import annotations

import socket

from elastix.protocol import envvars

DEFAULT_TIMEOUT = 2.0
"""Seconds without a heartbeat after which a host (and so its slice) counts as lost."""
DEFAULT_INTERVAL = 0.2
"""Seconds between heartbeats of a slice host."""


def parse_address(address: str) -> tuple[int, str | tuple[str, int]]:
    """Split ``unix:...`` / ``udp:host:port`` into a socket family and a socket address.

    Raises:
        ValueError: the address has no known scheme.
    """
    scheme, _, rest = address.partition(":")
    if scheme == "unix" and rest:
        # A leading "@" names a Linux abstract socket (a NUL byte on the wire).
        return socket.AF_UNIX, ("\0" + rest[1:]) if rest.startswith("@") else rest
    if scheme == "udp" and rest:
        host, _, port = rest.rpartition(":")
        return socket.AF_INET, (host or "127.0.0.1", int(port))
    raise ValueError(f"bad {envvars.LOCAL_HEALTH} address {address!r}: use unix:PATH or udp:HOST:PORT")


def encode(slice_id: int, host: int, pid: int, ts: float) -> bytes:
    """The datagram a slice host sends."""
    return f"hb {slice_id} {host} {pid} {ts:.6f}".encode()


def decode(data: bytes) -> tuple[int, int, int, float] | None:
    """``(slice, host, pid, ts)`` from a datagram, or None when it is not a heartbeat."""
    parts = data.decode("ascii", "replace").split()
    if len(parts) != 5 or parts[0] != "hb":
        return None
    try:
        return int(parts[1]), int(parts[2]), int(parts[3]), float(parts[4])
    except ValueError:
        return None


def encode_ping(token: int) -> bytes:
    """What the controller sends a host to have it answer now."""
    return f"ping {token}".encode()


def decode_ping(data: bytes) -> int | None:
    """The token of a ``ping`` datagram, or None when it is not one."""
    parts = data.decode("ascii", "replace").split()
    if len(parts) != 2 or parts[0] != "ping" or not parts[1].isdigit():
        return None
    return int(parts[1])


def encode_pong(slice_id: int, host: int, pid: int, token: int) -> bytes:
    """A host's answer to ``ping <token>``."""
    return f"pong {slice_id} {host} {pid} {token}".encode()


def decode_pong(data: bytes) -> tuple[int, int, int, int] | None:
    """``(slice, host, pid, token)`` from a ``pong`` datagram, or None when it is not one."""
    parts = data.decode("ascii", "replace").split()
    if len(parts) != 5 or parts[0] != "pong":
        return None
    try:
        return int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4])
    except ValueError:
        return None
