"""The heartbeat channel admits only the workload's own slice hosts.

A datagram that is not theirs (forged without the workload's key, sent by another user, or a
captured one sent again) is dropped and counted, never taken as a heartbeat or a loss; and the
channel is never an abstract socket, always a socket file in a 0700 directory. Real receivers,
real slice-host processes, real sockets; another user is ``nobody`` (only as root).
"""

from __future__ import annotations

import os
import pwd
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest
from local_helpers import STANDIN, wait_until

from elastix.backends.base import LogOptions
from elastix.errors import UsageError
from elastix.protocol.heartbeat import encode, key_bytes, new_key, parse_address
from elastix_trainer.elastic.health import SliceWaitTimeout
from elastix_trainer.elastic.local.health import LocalHeartbeatHealth

KEY = new_key()


def _host(addr: str, s: int, h: int = 0) -> subprocess.Popen:
    env = dict(os.environ, ELASTIX_LOCAL_HEALTH=addr, ELASTIX_SLICE=str(s), ELASTIX_HOST=str(h),
               ELASTIX_HEARTBEAT_INTERVAL="0.05", ELASTIX_HEARTBEAT_KEY=KEY)
    return subprocess.Popen([sys.executable, "-m", "elastix.backends.local.host"], env=env,
                            stdout=subprocess.DEVNULL)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _send(addr: str, data: bytes) -> None:
    family, sockaddr = parse_address(addr)
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.sendto(data, sockaddr)


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


def test_a_forged_heartbeat_from_a_new_pid_is_dropped_and_counted(tmp_path):
    """One datagram claiming a new pid for slice 1's host used to latch slice 1 down (the hunt:
    2 recoveries, 3 steps lost). Unsealed, sealed with another workload's key, or garbage: each
    is dropped and counted, and nothing changes: no loss, every host still answers."""
    addr = f"unix:{tmp_path}/h.sock"
    procs: list[subprocess.Popen] = []
    try:
        with LocalHeartbeatHealth(addr, num_slices=2, timeout=60, key=KEY) as health:
            procs = [_host(addr, s) for s in range(2)]
            assert health.wait_for(2, timeout=30) == frozenset({0, 1})
            roll = health.roll({0, 1})
            pids = health.host_pids()
            stranger = 4_000_000 + os.getpid() % 1000
            _send(addr, f"hb 1 0 {stranger} {time.monotonic():.6f}".encode())
            _send(addr, encode(key_bytes(new_key()), 1, 0, stranger, time.monotonic()))
            _send(addr, b"hello")
            wait_until(lambda: health.dropped().get("forged") == 3, 10, "3 forged datagrams")
            assert health.host_pids() == pids
            assert health.live_slices() == frozenset({0, 1})
            assert health.answer({0, 1}, roll) == {}
            assert health.losses({0, 1}) == {}
            assert health.dropped() == {"forged": 3}
    finally:
        _stop(procs)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="exits are seen through a pidfd (Linux)")
def test_a_replayed_datagram_does_not_revive_a_killed_host(tmp_path):
    """Every datagram a host sent, captured on the way (a tap forwards them) and sent again
    after it was SIGKILLed: each is sealed, and each is dropped as stale; the slice stays down.
    It used to be live again at the replay of the host's newest heartbeat."""
    addr = f"unix:{tmp_path}/h.sock"
    tap_path = str(tmp_path / "tap.sock")
    procs: list[subprocess.Popen] = []
    with (socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as tap,
          socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as out,
          LocalHeartbeatHealth(addr, num_slices=1, timeout=60, key=KEY) as health):
        tap.bind(tap_path)
        tap.settimeout(10)
        try:
            procs = [_host(f"unix:{tap_path}", 0)]
            captured: list[bytes] = []
            while len(captured) < 3 or health.host_pids().get((0, 0)) != procs[0].pid:
                captured.append(tap.recv(256))
                out.sendto(captured[-1], addr[len("unix:"):])
            assert health.wait_for(1, timeout=10) == frozenset({0})
            os.kill(procs[0].pid, signal.SIGKILL)
            procs[0].wait(10)
            wait_until(lambda: health.live_slices() == frozenset(), 10, "the exit seen")
            tap.setblocking(False)
            while True:  # what it sent before it died, to the last datagram
                try:
                    captured.append(tap.recv(256))
                except BlockingIOError:
                    break
            for data in captured:
                out.sendto(data, addr[len("unix:"):])
            wait_until(lambda: health.dropped().get("stale") == len(captured), 10,
                       "every replay dropped")
            assert health.live_slices() == frozenset()
            with pytest.raises(SliceWaitTimeout, match="exited, no replacement heard"):
                health.wait_for(1, timeout=0.3)
        finally:
            _stop(procs)


def _as_nobody(send) -> int:
    """Run ``send()`` in a forked child as user ``nobody``; its exit code (0: sent)."""
    nobody = pwd.getpwnam("nobody")
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        code = 1
        try:
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            send()
            code = 0
        except PermissionError:
            code = 13
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.skipif(os.geteuid() != 0, reason="sending as another user (nobody) needs root")
@pytest.mark.parametrize("scheme", ["unix", "udp"])
def test_a_datagram_from_another_user_is_refused_or_dropped(tmp_path, scheme):
    """The hunt's ``nobody`` took slice 1 out of the live set with one datagram to the abstract
    socket. To the socket file (0700 directory) it cannot send at all; to loopback UDP it can,
    and its datagram, unsealed, is dropped and counted."""
    addr = f"unix:{tmp_path}/h.sock" if scheme == "unix" else f"udp:127.0.0.1:{_free_port()}"
    family, sockaddr = parse_address(addr)
    data = f"hb 1 0 777 {time.monotonic() + 1:.6f}".encode()

    def send() -> None:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.sendto(data, sockaddr)

    procs: list[subprocess.Popen] = []
    try:
        with LocalHeartbeatHealth(addr, num_slices=2, timeout=60, key=KEY) as health:
            procs = [_host(addr, s) for s in range(2)]
            assert health.wait_for(2, timeout=30) == frozenset({0, 1})
            pids = health.host_pids()
            code = _as_nobody(send)
            if scheme == "unix":
                assert code == 13  # EACCES: the directory keeps it out
            else:
                assert code == 0
                wait_until(lambda: health.dropped().get("forged") == 1, 10, "dropped")
            assert health.host_pids() == pids and health.live_slices() == frozenset({0, 1})
    finally:
        _stop(procs)


def test_without_the_key_nothing_runs(tmp_path):
    """A host without the workload's key does not start; a receiver is not built without one."""
    env = dict(os.environ, ELASTIX_LOCAL_HEALTH=f"unix:{tmp_path}/h.sock", ELASTIX_SLICE="0",
               ELASTIX_HOST="0")
    env.pop("ELASTIX_HEARTBEAT_KEY", None)
    proc = subprocess.run([sys.executable, "-m", "elastix.backends.local.host"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "ELASTIX_HEARTBEAT_KEY must be 32 to 64 bytes" in proc.stderr
    with pytest.raises(UsageError, match="ELASTIX_HEARTBEAT_KEY is not"):
        LocalHeartbeatHealth.from_env(1, {"ELASTIX_LOCAL_HEALTH": f"unix:{tmp_path}/h.sock"})


# -- the channel the local backend makes ---------------------------------------------------------
@pytest.fixture
def state_dir(tmp_path):
    """A state dir too long for ``sun_path`` (the hunt's 100 bytes or more)."""
    d = tmp_path / ("long-state-dir-" + "x" * 90)
    d.mkdir()
    return d


def test_a_long_state_dir_gets_a_private_socket_that_goes_with_the_workload(cli, backend):
    """Never an abstract socket: a socket file (0600) in a 0700 directory under a 0700 per-user
    root; the key is in the pods' environment and in no file; ``delete`` removes the directory."""
    cli("workload", "create", "priv", "--tpu-type", "v5litepod-8", "--num-slices", "2",
        "--elastic-slices", "2", "--command",
        f"{sys.executable} {STANDIN} --steps 100000 --step-delay 0.05")
    wait_until(lambda: "completed step: 3," in "\n".join(
        ev.text for ev in backend.logs("priv", LogOptions())), 60, "steps")
    st = backend.status("priv")
    env = psutil.Process(st.head.pid).environ()
    address = env["ELASTIX_LOCAL_HEALTH"]
    assert len(str(backend.root / "priv")) >= 100 and not address.startswith("unix:@")
    sock = address[len("unix:"):]
    assert sock.startswith(f"/tmp/elastix-{os.geteuid()}/")
    for path, mode in ((os.path.dirname(os.path.dirname(sock)), 0o700),
                       (os.path.dirname(sock), 0o700), (sock, 0o600)):
        assert os.stat(path).st_mode & 0o777 == mode, path
    key = env["ELASTIX_HEARTBEAT_KEY"]
    assert len(key_bytes(key)) == 32
    assert psutil.Process(st.slices[1].pods[0].pid).environ()["ELASTIX_HEARTBEAT_KEY"] == key
    for root, _, files in os.walk(backend.root):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                assert key.encode() not in f.read(), name
    backend.delete("priv")
    assert not os.path.exists(os.path.dirname(sock))
