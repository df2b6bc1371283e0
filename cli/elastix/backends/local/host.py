"""A local slice host: the stand-in for one Pathways worker pod of one TPU slice.

Run by the local supervisor as ``python -m elastix.backends.local.host``. It sends a heartbeat datagram to
the controller (``ELASTIX_LOCAL_HEALTH``) every ``ELASTIX_HEARTBEAT_INTERVAL`` seconds until it is
killed; the controller's health source counts its slice as live only while every host of it
heartbeats. Between heartbeats it answers the controller's ``ping`` at once (``heartbeat``): a
step on the stand-in devices completes only once every host of its mesh has answered after the
step's result exists, as a TPU step needs every host. It imports only stdlib-only modules (the
protocol, the local state helpers) so that a dozen of them start fast on 2 cores.

Every datagram it sends is sealed with the workload's key, and it answers only pings sealed with
it (``elastix.protocol.heartbeat``).

Environment: ``ELASTIX_LOCAL_HEALTH``, ``ELASTIX_HEARTBEAT_KEY``, ``ELASTIX_SLICE``,
``ELASTIX_HOST``, ``ELASTIX_HEARTBEAT_INTERVAL`` (default 0.2), ``ELASTIX_SUPERVISOR_PID`` (exit
if it goes away).
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import time

from elastix.backends.local.state import die_with_parent
from elastix.protocol import envvars, heartbeat


def run(env: dict[str, str]) -> int:
    """Heartbeat until killed. Returns an exit code."""
    slice_id, host = int(env[envvars.SLICE]), int(env[envvars.HOST])
    interval = float(env.get(envvars.HEARTBEAT_INTERVAL, heartbeat.DEFAULT_INTERVAL))
    family, addr = heartbeat.parse_address(env[envvars.LOCAL_HEALTH])
    try:
        key = heartbeat.key_bytes(env.get(envvars.HEARTBEAT_KEY, ""))
    except ValueError as err:
        print(f"slice host {slice_id}/{host}: {err}", file=sys.stderr, flush=True)
        return 2
    supervisor = int(env[envvars.SUPERVISOR_PID]) if env.get(envvars.SUPERVISOR_PID) else None
    if not die_with_parent(supervisor):
        return 1
    # SIGTERM is how the supervisor stops a pod: exit at once, like a worker with no grace work.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sock = socket.socket(family, socket.SOCK_DGRAM)
    if family == socket.AF_UNIX:
        sock.bind("")  # Linux autobind: an address of its own, so the controller can ping it
    sock.setblocking(False)  # a full or absent receiver must never stall the heartbeat loop
    pid = os.getpid()
    _say(f"slice host {slice_id}/{host} (pid {pid}) heartbeating to {env[envvars.LOCAL_HEALTH]}")
    due = time.monotonic()
    while True:
        now = time.monotonic()
        if now >= due:
            _send(sock, heartbeat.encode(key, slice_id, host, pid, now), addr)
            due = now + interval
        ready, _, _ = select.select([sock], [], [], max(0.0, due - time.monotonic()))
        if ready:
            _answer(sock, key, slice_id, host, pid)


def _say(line: str) -> None:
    """Write ``line`` to the host's log, unbuffered; a log that cannot be written (its disk is
    full) loses the line, never the host: a pod's stdout is the container runtime's pipe, which
    a full disk does not make fail (and a buffered print would fail again at exit)."""
    try:
        os.write(sys.stdout.fileno(), (line + "\n").encode())
    except OSError:
        pass


def _send(sock: socket.socket, data: bytes, addr) -> None:
    try:
        sock.sendto(data, addr)
    except OSError:
        pass  # controller not listening yet (starting or restarting): keep trying


def _answer(sock: socket.socket, key: bytes, slice_id: int, host: int, pid: int) -> None:
    """Answer every ``ping`` sealed with ``key`` queued on ``sock``, each to the socket it came
    from (a stranger's is not answered: its answer would be a sealed pong for any token)."""
    while True:
        try:
            data, sender = sock.recvfrom(heartbeat.MAX_DATAGRAM)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return
        text = heartbeat.unseal(key, data)
        token = heartbeat.decode_ping(text) if text is not None else None
        if token is not None and sender:
            _send(sock, heartbeat.encode_pong(key, slice_id, host, pid, token), sender)


def main() -> int:
    return run(dict(os.environ))


if __name__ == "__main__":
    sys.exit(main())
