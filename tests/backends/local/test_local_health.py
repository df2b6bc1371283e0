"""The local health source against real datagrams and real slice-host processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest
from local_helpers import wait_until

from elastix.errors import UsageError
from elastix.protocol.heartbeat import decode as decode_heartbeat
from elastix.protocol.heartbeat import encode as encode_heartbeat
from elastix.protocol.heartbeat import encode_pong, key_bytes, new_key, parse_address, unseal
from elastix_trainer.elastic.health import SliceWaitTimeout
from elastix_trainer.elastic.local.health import LocalHeartbeatHealth

KEY = new_key()
"""The workload key of this module's receivers and senders."""


class Clock:
    """A hand-driven monotonic clock: staleness without sleeping."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _send(address: str, slice_id: int, host: int, pid: int, ts: float) -> None:
    family, addr = parse_address(address)
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.sendto(encode_heartbeat(key_bytes(KEY), slice_id, host, pid, ts), addr)


@pytest.fixture
def procs():
    """The slice-host processes a test starts (:func:`_host`), killed after it."""
    procs: list[subprocess.Popen] = []
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def _received(health: LocalHeartbeatHealth, key: tuple[int, int], pid: int) -> bool:
    return health.host_pids().get(key) == pid


def test_slice_is_live_only_while_every_host_is_fresh(tmp_path):
    clock = Clock()
    addr = f"unix:{tmp_path}/h.sock"
    with LocalHeartbeatHealth(addr, key=KEY, num_slices=2, hosts_per_slice=2, timeout=2.0,
                              clock=clock, deaf_after=None) as health:
        assert health.live_slices() == frozenset()
        for s, h in [(0, 0), (0, 1), (1, 0)]:
            _send(addr, s, h, 100 + 10 * s + h, clock.t)
            wait_until(lambda s=s, h=h: _received(health, (s, h), 100 + 10 * s + h), 5, "hb")
        # Slice 1 misses host 1: down, however fresh host 0 is.
        assert health.live_slices() == frozenset({0})
        _send(addr, 1, 1, 111, clock.t)
        wait_until(lambda: _received(health, (1, 1), 111), 5, "hb 1/1")
        assert health.live_slices() == frozenset({0, 1})
        # Host 0/1 goes quiet: 2.5 s later slice 0 is down, slice 1 (refreshed) is up.
        clock.t += 2.5
        for s, h in [(0, 0), (1, 0), (1, 1)]:
            _send(addr, s, h, 100 + 10 * s + h, clock.t)
        wait_until(lambda: health.live_slices() == frozenset({1}), 5, "slice 0 down")
        # A replacement host (new pid) counts as soon as someone waits for it.
        _send(addr, 0, 1, 999, clock.t)
        wait_until(lambda: _received(health, (0, 1), 999), 5, "hb from the replacement")
        assert health.wait_for(2, timeout=1) == frozenset({0, 1})
        assert health.live_slices() == frozenset({0, 1})
        # An old datagram of the dead host cannot make the slice look fresher or staler.
        _send(addr, 0, 1, 101, clock.t - 10)
        _send(addr, 0, 0, 100, clock.t)
        wait_until(lambda: _received(health, (0, 0), 100), 5, "hb")
        assert health.host_pids()[(0, 1)] == 999
        assert health.wait_for(2, timeout=0.1) == frozenset({0, 1})
        # Garbage and out-of-range ids are ignored.
        _send(addr, 7, 0, 1, clock.t)
        family, a = parse_address(addr)
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.sendto(b"hello", a)
    assert not os.path.exists(tmp_path / "h.sock")


def test_wait_for_times_out_with_a_clear_error(tmp_path):
    with LocalHeartbeatHealth(f"unix:{tmp_path}/h.sock", key=KEY, num_slices=3) as health:
        with pytest.raises(SliceWaitTimeout, match="only 0 of 2 required slices"):
            health.wait_for(2, timeout=0.2)


def test_close_ends_the_receiver_at_once_not_at_its_next_wake(tmp_path, monkeypatch):
    # A stopped head closes its health source before it exits (delete, --replace, restart);
    # a receiver asleep in select() until RECV_WAKE held that exit. With the wake an hour
    # away, close() must still end the receiver within its 1 s join.
    import elastix_trainer.elastic.local.health as health_mod

    monkeypatch.setattr(health_mod, "RECV_WAKE", 3600.0)
    addr = f"unix:{tmp_path}/h.sock"
    health = LocalHeartbeatHealth(addr, key=KEY, num_slices=1, deaf_after=None)
    # a heartbeat received: the receiver ran, and is back asleep in select() (a close()
    # before its first select() would end it without the wake)
    _send(addr, 0, 0, 7, __import__("time").monotonic())
    wait_until(lambda: _received(health, (0, 0), 7), 30, "the heartbeat")
    thread = health._thread
    health.close()
    assert not thread.is_alive()
    assert not (tmp_path / "h.sock").exists()
    health.close()  # idempotent


def test_loopback_udp():
    addr = f"udp:127.0.0.1:{_free_port()}"
    with LocalHeartbeatHealth(addr, key=KEY, num_slices=1, timeout=60) as health:
        _send(addr, 0, 0, 5, __import__("time").monotonic())
        assert health.wait_for(1, timeout=10) == frozenset({0})


def test_no_socket_others_can_reach(tmp_path):
    """Never an abstract socket (no permissions: any local user could send to it), never a
    socket file in a directory others can enter; the socket file itself is 0600."""
    with pytest.raises(UsageError, match="abstract UNIX socket has no permissions"):
        LocalHeartbeatHealth(f"unix:@elastix-test-{os.getpid()}", key=KEY, num_slices=1)
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o755)
    with pytest.raises(UsageError, match="is open to other users"):
        LocalHeartbeatHealth(f"unix:{open_dir}/h.sock", key=KEY, num_slices=1)
    assert not (open_dir / "h.sock").exists()
    with LocalHeartbeatHealth(f"unix:{tmp_path}/h.sock", key=KEY, num_slices=1):
        assert (tmp_path / "h.sock").stat().st_mode & 0o777 == 0o600


def test_address_and_datagram_parsing():
    assert parse_address("unix:/a/b")[1] == "/a/b"
    assert parse_address("udp:127.0.0.1:9")[1] == ("127.0.0.1", 9)
    with pytest.raises(ValueError, match="unix:PATH or udp:HOST:PORT"):
        parse_address("tcp:1")
    with pytest.raises(ValueError, match="abstract"):
        parse_address("unix:@x")
    key = key_bytes(KEY)
    sealed = encode_heartbeat(key, 1, 2, 3, 4.5)
    assert decode_heartbeat(unseal(key, sealed)) == (1, 2, 3, 4.5)
    assert unseal(key_bytes(new_key()), sealed) is None  # another workload's key
    assert unseal(key, sealed.replace(b"hb 1", b"hb 0")) is None  # altered on the way
    assert unseal(key, b"hb 1 2 3 4.5") is None  # never sealed
    assert decode_heartbeat("hb 1 x 3 4") is None
    with pytest.raises(ValueError, match="must be 32 to 64 bytes"):
        key_bytes("abcd")


def _host(addr: str, s: int, h: int) -> subprocess.Popen:
    env = dict(os.environ, ELASTIX_LOCAL_HEALTH=addr, ELASTIX_SLICE=str(s), ELASTIX_HOST=str(h),
               ELASTIX_HEARTBEAT_INTERVAL="0.05", ELASTIX_HEARTBEAT_KEY=KEY)
    return subprocess.Popen([sys.executable, "-m", "elastix.backends.local.host"], env=env,
                            stdout=subprocess.DEVNULL)


def test_real_slice_hosts_killed_and_replaced(tmp_path, procs):
    """SIGKILL one host of a 2-host slice: that slice goes down, the other stays; a replacement
    process brings it back."""
    addr = f"unix:{tmp_path}/h.sock"
    with LocalHeartbeatHealth(addr, key=KEY, num_slices=2, hosts_per_slice=2, timeout=0.5) as health:
        procs += [_host(addr, s, h) for s in range(2) for h in range(2)]
        assert health.wait_for(2, timeout=30) == frozenset({0, 1})
        victim = procs[1]  # slice 0, host 1
        os.kill(victim.pid, signal.SIGKILL)
        assert victim.wait(10) == -signal.SIGKILL
        wait_until(lambda: health.live_slices() == frozenset({1}), 10, "slice 0 down")
        procs.append(_host(addr, 0, 1))
        assert health.wait_for(2, timeout=30) == frozenset({0, 1})
        assert health.host_pids()[(0, 1)] == procs[-1].pid


def test_a_host_replaced_before_the_timeout_is_reported_lost_until_handled(tmp_path):
    clock = Clock()
    addr = f"unix:{tmp_path}/h.sock"
    with LocalHeartbeatHealth(addr, key=KEY, num_slices=2, timeout=2.0, clock=clock,
                              deaf_after=None) as health:
        for s in range(2):
            _send(addr, s, 0, 10 + s, clock.t)
        health.wait_for(2, timeout=5)
        _send(addr, 1, 0, 77, clock.t + 0.1)  # new pid for slice 1, heartbeats never stale
        wait_until(lambda: _received(health, (1, 0), 77), 5, "hb from the replacement")
        assert health.live_slices() == frozenset({0})  # the loss...
        assert health.live_slices() == frozenset({0})  # ...the same for every caller
        clock.t += 2.1  # a long step later (fresh heartbeats keep 1 up) the loss still shows:
        for s, pid in ((1, 77), (0, 10)):  # it used to expire after one timeout, unseen
            _send(addr, s, 0, pid, clock.t)
        # One socket, read in order: once slice 0 is fresh, slice 1's heartbeat was read too.
        wait_until(lambda: 0 in health.live_slices(), 5, "fresh heartbeats")
        assert health.live_slices() == frozenset({0})
        assert health.wait_for(2, timeout=1) == frozenset({0, 1})  # the recovery takes it back
        _send(addr, 1, 0, 78, clock.t)  # replaced again; a waiter takes it back at once
        wait_until(lambda: _received(health, (1, 0), 78), 5, "hb from the second replacement")
        assert health.live_slices() == frozenset({0})
        assert health.wait_for(2, timeout=1) == frozenset({0, 1})


_WATCHER = """
import json, sys, time
from elastix_trainer.elastic.local.health import LocalHeartbeatHealth
h = LocalHeartbeatHealth(sys.argv[1], num_slices=4, hosts_per_slice=2, timeout=1.0,
                         key=sys.argv[2])
h.wait_for(4, timeout=30)
print("ready", flush=True)
while True:
    print(json.dumps([time.monotonic(), sorted(h.live_slices())]), flush=True)
    time.sleep(0.02)
"""


def test_a_frozen_controller_does_not_see_slices_lost(tmp_path):
    """SIGSTOP the controller for 4 s while 8 hosts heartbeat: its socket queue (10 datagrams)
    fills in a quarter second and later heartbeats are dropped. After SIGCONT no slice may look
    lost (it used to report every slice lost, and spend the slice-loss budget on nothing)."""
    addr = f"unix:{tmp_path}/h.sock"
    watcher = subprocess.Popen([sys.executable, "-c", _WATCHER, addr, KEY], stdout=subprocess.PIPE,
                               text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    procs = []
    try:
        procs = [_host(addr, s, h) for s in range(4) for h in range(2)]
        assert watcher.stdout.readline().strip() == "ready"
        os.kill(watcher.pid, signal.SIGSTOP)
        import time

        time.sleep(4.0)
        resumed = time.monotonic()
        os.kill(watcher.pid, signal.SIGCONT)
        seen = []
        while True:
            t, live = __import__("json").loads(watcher.stdout.readline())
            if t >= resumed:
                seen.append(live)
            if t >= resumed + 2.0:
                break
        assert seen and all(live == [0, 1, 2, 3] for live in seen), seen[:5]
        # A host that really dies is still found, one timeout later.
        os.kill(procs[3].pid, signal.SIGKILL)  # slice 1, host 1
        killed = time.monotonic()
        while True:
            t, live = __import__("json").loads(watcher.stdout.readline())
            if t > killed and live == [0, 2, 3]:
                break
            assert t < killed + 10, "the dead host was never noticed"
    finally:
        watcher.kill()
        watcher.wait()
        for p in procs:
            p.kill()
            p.wait()


def _answer_in_thread(health: LocalHeartbeatHealth, slices, roll):
    """``health.answer`` run in a thread: (thread, box) where box gets the verdict."""
    import threading

    box: list = []
    t = threading.Thread(target=lambda: box.append(health.answer(slices, roll)), daemon=True)
    t.start()
    return t, box


@pytest.mark.parametrize("scheme", ["unix", "udp"])
def test_every_host_answers_and_a_killed_one_fails_the_answer_at_once(tmp_path, scheme, procs):
    """``answer``: real host processes answer a ping at once; a SIGKILLed host's exit fails
    the answer without waiting out the heartbeat timeout (60 s here), naming the host."""
    addr = f"unix:{tmp_path}/h.sock" if scheme == "unix" else f"udp:127.0.0.1:{_free_port()}"
    with LocalHeartbeatHealth(addr, key=KEY, num_slices=2, hosts_per_slice=2, timeout=60) as health:
        procs += [_host(addr, s, h) for s in range(2) for h in range(2)]
        assert health.wait_for(2, timeout=30) == frozenset({0, 1})
        roll = health.roll({0, 1})
        keys = [(s, h) for s in range(2) for h in range(2)]
        assert roll == {key: p.pid for key, p in zip(keys, procs, strict=True)}
        for _ in range(20):  # every round is a fresh question, answered by every host
            assert health.answer({0, 1}, roll) == {}
        os.kill(procs[3].pid, signal.SIGKILL)  # slice 1, host 1
        procs[3].wait(10)
        gone = health.answer({0, 1}, roll)
        assert list(gone) == [1] and f"host 1 (pid {procs[3].pid}) exited" in gone[1]
        assert health.answer({0}, roll) == {}  # the other slice still answers


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_hung_host_holds_the_answer_until_its_heartbeats_are_stale(tmp_path):
    """A stopped host (SIGSTOP) cannot answer: the answer waits, as a collective waits for a
    hung TPU host. Resumed within the heartbeat timeout it answers and nothing is lost; left
    stopped, the answer names it once its heartbeats are a timeout old. A pong forged from
    another socket with the right pid and token never counts for it."""
    addr = f"unix:{tmp_path}/h.sock"
    procs = []
    try:
        with LocalHeartbeatHealth(addr, key=KEY, num_slices=1, timeout=60) as health:
            procs = [_host(addr, 0, 0)]
            health.wait_for(1, timeout=30)
            roll = health.roll({0})
            os.kill(procs[0].pid, signal.SIGSTOP)
            waiter, box = _answer_in_thread(health, {0}, roll)
            waiter.join(0.5)
            assert waiter.is_alive() and box == []  # held: no answer, nothing decided
            family, sockaddr = parse_address(addr)
            with socket.socket(family, socket.SOCK_DGRAM) as stranger:
                stranger.bind("")
                for token in range(1, 50):
                    # Sealed even (the key leaked): still not from the host's socket.
                    stranger.sendto(encode_pong(key_bytes(KEY), 0, 0, procs[0].pid, token),
                                    sockaddr)
            waiter.join(0.5)
            assert waiter.is_alive() and box == []  # the forgery counted for nothing
            os.kill(procs[0].pid, signal.SIGCONT)
            waiter.join(30)
            assert box == [{}]  # it ran again within the timeout: the step goes on
        with LocalHeartbeatHealth(addr, key=KEY, num_slices=1, timeout=0.5) as health:
            health.wait_for(1, timeout=30)
            roll = health.roll({0})
            os.kill(procs[0].pid, signal.SIGSTOP)
            gone = health.answer({0}, roll)
            assert list(gone) == [0] and "stopped answering" in gone[0]
            assert 0 in health.losses({0})  # dated from its last heartbeat, for the measurement
    finally:
        for p in procs:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
            p.wait()


def test_a_replaced_host_fails_the_answer_of_the_roll_it_was_not_on(tmp_path):
    """A host replaced under a session (a new pid heartbeats for it) lost that session's
    state: the old roll's answer names it; a new roll (a new session) takes the newcomer."""
    clock = Clock()
    addr = f"unix:{tmp_path}/h.sock"
    with LocalHeartbeatHealth(addr, key=KEY, num_slices=1, timeout=2.0, clock=clock,
                              deaf_after=None) as health:
        _send(addr, 0, 0, 100, clock.t)
        wait_until(lambda: _received(health, (0, 0), 100), 5, "hb")
        roll = health.roll({0})
        assert roll == {(0, 0): 100}
        _send(addr, 0, 0, 200, clock.t + 0.1)
        wait_until(lambda: _received(health, (0, 0), 200), 5, "the replacement")
        gone = health.answer({0}, roll)
        assert list(gone) == [0] and "(pid 100) was replaced" in gone[0]
        assert health.roll({0}) == {(0, 0): 200}


def test_a_host_exit_is_dated_at_once_and_a_stale_host_from_its_last_heartbeat(tmp_path):
    """``losses`` (the measurement's date of a loss) knows a SIGKILLed host the moment it
    exits, long before its heartbeats go stale; a stopped host only counts once stale, from its
    last heartbeat. A new session's roll makes the old loss history."""
    import time

    addr = f"unix:{tmp_path}/h.sock"
    procs = []
    try:
        with LocalHeartbeatHealth(addr, key=KEY, num_slices=2, timeout=60, exits=False) as health:
            procs = [_host(addr, s, 0) for s in range(2)]
            assert health.wait_for(2, timeout=30) == frozenset({0, 1})
            assert health.losses({0, 1}) == {}
            os.kill(procs[0].pid, signal.SIGKILL)
            t_kill = time.monotonic()
            procs[0].wait(10)
            gone = wait_until(lambda: health.losses({0, 1}), 5, "the exit dated")
            assert list(gone) == [0] and t_kill - 0.01 <= gone[0] <= time.monotonic()
            # exits=False: not detected before the heartbeat timeout (60 s), though dated.
            assert health.live_slices() == frozenset({0, 1})
            assert health.losses({1}) == {}
            health.roll({0})
            assert health.losses({0, 1}) == {}
        with LocalHeartbeatHealth(addr, key=KEY, num_slices=2, timeout=0.5) as health:
            assert health.wait_for(1, timeout=30) == frozenset({1})
            os.kill(procs[1].pid, signal.SIGSTOP)
            t_stop = time.monotonic()
            try:
                gone = wait_until(lambda: health.losses({1}), 10, "the stopped host stale")
                assert t_stop - 0.5 <= gone[1] <= t_stop
            finally:
                os.kill(procs[1].pid, signal.SIGCONT)
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _two_slices_then_kill_slice_1_host_1(addr: str, health: LocalHeartbeatHealth,
                                         procs: list[subprocess.Popen]) -> None:
    """Two 2-host slices heartbeat, then slice 1's host 1 is SIGKILLed: its exit alone (the
    timeout is 60 s) must take slice 1 down. ``procs`` gets every host, for the caller to end."""
    procs.extend(_host(addr, s, h) for s in range(2) for h in range(2))
    assert health.wait_for(2, timeout=30) == frozenset({0, 1})
    os.kill(procs[3].pid, signal.SIGKILL)  # slice 1, host 1
    procs[3].wait(10)
    wait_until(lambda: health.live_slices() == frozenset({0}), 5, "slice 1 lost at once")


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="exits are seen through a pidfd (Linux)")
def test_an_exited_host_is_lost_at_once_and_back_with_its_replacement(tmp_path, procs):
    """An exit is detected without waiting out the heartbeat timeout (60 s here); the slice
    is live again once a replacement process heartbeats."""
    addr = f"unix:{tmp_path}/h.sock"
    with LocalHeartbeatHealth(addr, key=KEY, num_slices=2, hosts_per_slice=2, timeout=60) as health:
        _two_slices_then_kill_slice_1_host_1(addr, health, procs)
        procs.append(_host(addr, 1, 1))
        assert health.wait_for(2, timeout=30) == frozenset({0, 1})


def test_a_slice_left_out_by_replica_resize_counts_again_once_replaced(tmp_path, procs):
    """replica-resize: the recovery's wait returns on the survivor and none follows. The dead
    host's replacement (heard well within the timeout) must make its slice live without another
    wait, or the runtime's scale-up check never sees it."""
    addr = f"unix:{tmp_path}/h.sock"
    with LocalHeartbeatHealth(addr, key=KEY, num_slices=2, hosts_per_slice=2, timeout=60) as health:
        _two_slices_then_kill_slice_1_host_1(addr, health, procs)
        assert health.wait_for(1, timeout=30) == frozenset({0})  # resize onto slice 0
        procs.append(_host(addr, 1, 1))
        wait_until(lambda: health.live_slices() == frozenset({0, 1}), 30,
                   "the replaced slice to count again")
        health.roll({0, 1})  # the runtime scales up onto it: a new session's roll
        # A fast replacement of a host *in* the mesh is still latched down until handled.
        os.kill(procs[0].pid, signal.SIGKILL)  # slice 0, host 0
        procs[0].wait(10)
        procs.append(_host(addr, 0, 0))
        wait_until(lambda: health.host_pids()[(0, 0)] == procs[-1].pid, 30, "replacement")
        assert 0 not in health.live_slices()


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="exits are seen through a pidfd (Linux)")
def test_a_slice_left_out_counts_again_when_its_other_hosts_die_after_the_wait(tmp_path, procs):
    """replica-resize, as the local supervisor replaces a slice: one host is killed, the wait
    returns on the survivor at once, and only then are the slice's other hosts torn down and the
    slice recreated. The sibling's replacement (its predecessor fresh a moment ago) must not
    latch the slice down: no wait follows, and the runtime would never scale back up (seen in
    the fault hunt, row 6: 13 min on one slice)."""
    addr = f"unix:{tmp_path}/h.sock"
    with LocalHeartbeatHealth(addr, key=KEY, num_slices=2, hosts_per_slice=2, timeout=60) as health:
        _two_slices_then_kill_slice_1_host_1(addr, health, procs)
        assert health.wait_for(1, timeout=30) == frozenset({0})  # resize onto slice 0
        health.roll({0})  # the new session, on slice 0 alone
        os.kill(procs[2].pid, signal.SIGKILL)  # slice 1, host 0: the supervisor's teardown
        procs[2].wait(10)
        procs.extend([_host(addr, 1, 0), _host(addr, 1, 1)])  # the slice, recreated
        wait_until(lambda: health.live_slices() == frozenset({0, 1}), 30,
                   "the recreated slice to count again")


def test_a_wait_that_times_out_names_the_hung_host(tmp_path, procs):
    addr = f"unix:{tmp_path}/h.sock"
    with LocalHeartbeatHealth(addr, key=KEY, num_slices=2, timeout=0.5) as health:
        procs += [_host(addr, s, 0) for s in range(2)]
        assert health.wait_for(2, timeout=30) == frozenset({0, 1})
        os.kill(procs[1].pid, signal.SIGSTOP)
        wait_until(lambda: health.live_slices() == frozenset({0}), 10, "slice 1 stale")
        with pytest.raises(SliceWaitTimeout) as err:
            health.wait_for(2, timeout=0.5)
        assert (f"slice 1 host 0 (pid {procs[1].pid}) silent for " in str(err.value)
                and str(err.value).endswith("its process still there (hung))"))


def test_a_saturated_machine_does_not_look_like_a_dead_slice(tmp_path):
    """Every core busy (twice over) for longer than the heartbeat timeout: no slice is ever
    seen down. Liveness rests on exits and on heartbeats credited for deaf periods, not on the
    scheduler being kind."""
    import multiprocessing
    import time

    addr = f"unix:{tmp_path}/h.sock"
    procs, burners = [], []
    stop = multiprocessing.Event()
    try:
        with LocalHeartbeatHealth(addr, key=KEY, num_slices=2, hosts_per_slice=2, timeout=2.0) as health:
            procs = [_host(addr, s, h) for s in range(2) for h in range(2)]
            assert health.wait_for(2, timeout=30) == frozenset({0, 1})
            ctx = multiprocessing.get_context("spawn")
            stop = ctx.Event()
            burners = [ctx.Process(target=_burn, args=(stop,), daemon=True)
                       for _ in range(2 * (os.cpu_count() or 1))]
            for b in burners:
                b.start()
            time.sleep(1.0)
            assert all(b.is_alive() for b in burners), "the CPU burners did not start"
            seen = set()
            end = time.monotonic() + 6.0  # three heartbeat timeouts
            while time.monotonic() < end:
                seen |= frozenset({0, 1}) - health.live_slices()
                time.sleep(0.05)
            assert seen == set(), f"slices {sorted(seen)} looked lost under load"
    finally:
        stop.set()
        for b in burners:
            b.join(10)
            if b.is_alive():
                b.kill()
        for p in procs:
            p.kill()
            p.wait()


def _burn(stop) -> None:
    while not stop.is_set():
        sum(range(10_000))
