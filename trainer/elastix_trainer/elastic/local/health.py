"""Slice health for the local backend: heartbeats from local slice-host processes.

The local backend runs one ``elastix.backends.local.host`` process per worker pod (slice host). Each sends
a small datagram every ``interval`` seconds to the address in ``ELASTIX_LOCAL_HEALTH``; this module
receives them in the controller. A slice is live iff *every* one of its hosts has sent a heartbeat
within the timeout, so a slice with one dead host is down even while its other hosts are fine, and
a replaced host counts again as soon as it heartbeats.

A host that is replaced faster than the timeout (its slice's heartbeats never went stale) still
lost its state: the first heartbeat from a new pid *latches* the slice as down until ``wait_for``
is called (the runtime's recovery waits for slices; a waiter wants the replacement). So no loss
goes unseen however long the step in flight takes (a latch that expired after one timeout let a
kill during a long step or a checkpoint's blocking copy pass unnoticed), as on TPU, where any
in-flight operation on the dead host fails, and every caller until then sees the same answer.
A loss already handled needs no latch: a host of a slice that ``wait_for`` returned without
(dead then, or torn down with its slice after) has been dealt with, and its replacement counts
the moment it is heard. In
replica-resize mode that ``wait_for`` returns on the survivors and no other follows, so a latch
there held the returning slice down for good and the runtime never scaled back up.

Silence is only counted while the controller could hear. A controller that was stopped
(SIGSTOP, a debugger) or starved of CPU for longer than ``DEAF_AFTER`` did not drain its socket,
whose queue is short (``net.unix.max_dgram_qlen``, 10 datagrams): the heartbeats sent meanwhile
were dropped by the senders. That deaf period is not held against the hosts: until the receiver
runs again, staleness is measured at the last moment it listened, and when it runs it credits
every host with the time it was deaf (once, until the host is heard again). A host that really
died then is found one timeout later.

What a step needs: every host answers. The controller's CPU devices stand in for a slice's
chips, so unlike on TPU they would go on computing after the host process is gone. ``roll``
names the hosts (their pids) a session's devices live on, and ``answer`` has each of them
answer now over this same socket (``ping``/``pong``, ``elastix.protocol.heartbeat``): it returns
once all have, or says which slices lost a host: one that exited or was replaced at once, one
that stays silent (hangs) at the heartbeat timeout, as a collective on TPU waits for a hung host
until the runtime declares it lost. The local stand-in asks it before a step or a host copy
counts (``elastix_trainer.elastic.local.standin``), so nothing is kept that needed a dead host
and nothing has to be undone afterwards. A pong counts only from the socket its host's
heartbeats come from (a datagram's sender address is the kernel's, not the sender's word).

When a host stopped counting is recorded too, for the measurement alone (``losses``: the
detection event's ``since_loss``): exactly where the OS can say (Linux: a pidfd of the host's
pid, readable the moment the process exits), else the last time it was heard (a heartbeat or
an answer). The record is cleared by
``wait_for``, with the latch, and by ``roll`` for the hosts a new session takes.

Detection. A host whose process exited is lost at once: an exit is a fact, not an inference,
so no load on the machine can fake one (unlike a late heartbeat). A host that hangs (stopped,
deadlocked) is still found by the heartbeat timeout, with the deaf-period crediting above. On
GKE the equivalent fact is a worker pod's termination seen by a Kubernetes watch; Pathways
itself notices through its own heartbeats (≈ 13 s in the published run). ``exits=False``
(``ELASTIX_DETECT_EXITS=0``) keeps the heartbeat-only behaviour, for comparisons.

Only the workload's own hosts are heard. The socket is a file in a directory only its owner
can enter (0700: the receiver refuses to bind anywhere else, and never to an abstract socket),
or loopback UDP; and every datagram is sealed with the workload's key (``ELASTIX_HEARTBEAT_KEY``,
``elastix.protocol.heartbeat``). A datagram that is not the workload's is dropped and counted
(``dropped``), never taken as a heartbeat, an answer or a loss: one whose seal does not match
(``forged``: a stranger, another workload), and one sealed but older than the newest heard from
its process, or sent before that process exited (``stale``: a captured datagram sent again; a
replay can make no host look fresher than it was, and no dead host alive). The first forged one
is logged at once, the counts when the receiver closes.

The address and the datagram are the protocol's (``elastix.protocol.heartbeat``). No JAX
import here: tests and benchmarks run the receiver without it.
"""

from __future__ import annotations

import os
import secrets
import selectors
import socket
import stat
import threading
import time
from collections import Counter
from collections.abc import Callable

from elastix.errors import UsageError
from elastix.protocol import envvars, heartbeat
from elastix.protocol.heartbeat import DEFAULT_TIMEOUT
from elastix_trainer.elastic.health import HealthSource, SliceWaitTimeout, stopped
from elastix_trainer.obs.events import log

RECV_WAKE = 0.2
"""The receiver wakes at least this often (its socket timeout), datagrams or not."""
PING_RESEND = 0.05
"""Seconds between pings to a host that has not answered yet (a dropped datagram is resent)."""
DEAF_AFTER = 0.5
"""Seconds the receiver may go without running before the gap counts as a deaf period (the
controller stopped or starved), not as silence of the hosts."""


class LocalHeartbeatHealth(HealthSource):
    """The ``HealthSource`` of the local backend (see ``elastix_trainer.elastic.health``).

    Args:
        address: where to receive heartbeats (``unix:PATH``, ``unix:@NAME``, ``udp:HOST:PORT``).
        num_slices: slices of the workload (ids ``0 .. num_slices-1``).
        hosts_per_slice: hosts that must all be fresh for a slice to be live.
        timeout: seconds without a heartbeat after which a host counts as lost.
        clock: monotonic clock, injectable for tests; must match the senders' clock.
        deaf_after: seconds without the receiver running that count as a deaf period (see
            the module docstring); None turns that off (a hand-driven test clock).
        exits: a host whose process exited is lost at once (where the OS tells: Linux), not
            one heartbeat timeout later.
        key: the workload's key (hex, ``ELASTIX_HEARTBEAT_KEY``): only datagrams sealed with
            it count.

    Raises:
        UsageError: the address is an abstract socket, or a socket file whose directory others
            can enter.
    """

    def __init__(self, address: str, num_slices: int, hosts_per_slice: int = 1,
                 timeout: float = DEFAULT_TIMEOUT,
                 clock: Callable[[], float] = time.monotonic,
                 deaf_after: float | None = DEAF_AFTER, exits: bool = True, *,
                 key: str) -> None:
        if num_slices < 1 or hosts_per_slice < 1 or timeout <= 0:
            raise ValueError("num_slices and hosts_per_slice must be >= 1 and timeout > 0")
        self._key = heartbeat.key_bytes(key)
        self.address = address
        self.num_slices = num_slices
        self.hosts_per_slice = hosts_per_slice
        self.timeout = timeout
        self.exits = exits
        self._clock = clock
        self._last: dict[tuple[int, int], float] = {}
        self._pids: dict[tuple[int, int], int] = {}
        self._latched: dict[int, float] = {}  # slice -> down until (clock): a host was replaced
        self._cond = threading.Condition()
        self._closed = False
        self._listened = clock()  # when the receiver last ran (see DEAF_AFTER)
        self._deaf_after = deaf_after
        self._credited: set[tuple[int, int]] = set()  # credited for a gap, not heard since
        self._heard: dict[tuple[int, int], float] = {}  # last heartbeat, never credited
        self._died: dict[tuple[int, int], float] = {}  # when the host stopped counting
        self._pidfds: dict[int, tuple[tuple[int, int], int]] = {}  # fd -> (key, pid)
        self._exited_now: set[tuple[int, int]] = set()  # exited, no replacement heard yet
        self._handled: dict[tuple[int, int], int] = {}  # host -> pid whose loss wait_for saw
        self._addr: dict[tuple[int, int], object] = {}  # host -> the socket its heartbeats use
        self._answers: dict[tuple[int, int], tuple[int, int]] = {}  # host -> (pid, newest token)
        # Tokens carry this receiver's own random epoch above a count: a host's late answer
        # to an earlier receiver on the same address (a restarted controller, or a test
        # binding it again) never counts as an answer to this one's ping of the same count.
        self._token = secrets.randbits(31) << 32
        self._unaskable: set[tuple[int, int]] = set()  # hosts with no address, said once
        self._newest: dict[tuple[int, int], tuple[int, float]] = {}  # host -> (pid, newest ts)
        self._exit_at: dict[tuple[int, int], tuple[int, float]] = {}  # host -> (pid, exited)
        self._dropped: Counter[str] = Counter()
        try:
            family, sockaddr = heartbeat.parse_address(address)
        except ValueError as err:
            raise UsageError(str(err), hint="the local backend's supervisor sets it") from None
        self._path = sockaddr if family == socket.AF_UNIX else None
        if self._path is not None:
            _check_private_dir(self._path)
        self._sock = socket.socket(family, socket.SOCK_DGRAM)
        if self._path is not None and os.path.exists(self._path):
            os.unlink(self._path)  # left by a controller of an earlier restart attempt
        self._sock.bind(sockaddr)
        if self._path is not None:
            os.chmod(self._path, 0o600)  # its 0700 directory keeps others out; so does this
        self._sock.setblocking(False)
        self._sel = selectors.DefaultSelector()  # the socket, and a pidfd per host (Linux)
        self._sel.register(self._sock, selectors.EVENT_READ)
        # close() wakes the receiver through this pipe: closing the socket does not end a
        # select() already waiting on it, and a stopped head waited up to RECV_WAKE to exit.
        self._wake_r, self._wake_w = os.pipe()
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._receive, name="elastix-local-health",
                                        daemon=True)
        self._thread.start()

    @classmethod
    def from_env(cls, num_slices: int, env: dict[str, str] | None = None) -> LocalHeartbeatHealth:
        """Build from ``ELASTIX_LOCAL_HEALTH``, ``ELASTIX_HOSTS_PER_SLICE`` and
        ``ELASTIX_HEALTH_TIMEOUT``."""
        env = os.environ if env is None else env
        if not env.get(envvars.HEARTBEAT_KEY):
            raise UsageError(f"{envvars.LOCAL_HEALTH} is set but {envvars.HEARTBEAT_KEY} is not: "
                             "no heartbeat could be told from a forgery",
                             hint="the local backend's supervisor sets both; unset "
                                  f"{envvars.LOCAL_HEALTH} to run without slice hosts")
        return cls(env[envvars.LOCAL_HEALTH], num_slices,
                   hosts_per_slice=int(env.get(envvars.HOSTS_PER_SLICE, "1")),
                   timeout=float(env.get(envvars.HEALTH_TIMEOUT, DEFAULT_TIMEOUT)),
                   exits=env.get(envvars.DETECT_EXITS, "1") != "0",
                   key=env[envvars.HEARTBEAT_KEY])

    def _awake(self) -> None:
        """The receiver runs: if it was deaf (not scheduled) for a while, credit the hosts."""
        if self._deaf_after is None:
            return
        with self._cond:
            now = self._clock()
            gap = now - self._listened
            if gap > self._deaf_after:
                # One credit per host until it is heard again: a host that died during the gap
                # is credited once, so back-to-back gaps (a starved receiver) cannot hide it.
                for key in self._last:
                    if key not in self._credited:
                        self._last[key] += gap
                        self._credited.add(key)
            self._listened = now

    def _receive(self) -> None:
        while not self._closed:
            self._awake()
            try:
                ready = self._sel.select(RECV_WAKE)  # wakes: close(), deaf-period bookkeeping
            except (OSError, ValueError):
                return  # closed
            self._awake()
            for key, _ in ready:
                if key.fileobj == self._wake_r:
                    return  # close()
                if key.fileobj is self._sock:
                    self._drain()
                else:
                    self._exited(key.fd)

    def _drain(self) -> None:
        while True:
            try:
                data, sender = self._sock.recvfrom(heartbeat.MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # socket closed
            text = heartbeat.unseal(self._key, data)
            if text is None:
                self._drop("forged", sender)
                continue
            pong = heartbeat.decode_pong(text)
            if pong is not None:
                self._answered(pong, sender)
                continue
            hb = heartbeat.decode(text)
            if hb is None or not (0 <= hb[0] < self.num_slices and 0 <= hb[1] < self.hosts_per_slice):
                self._drop("unexpected", sender)
                continue
            slice_id, host, pid, ts = hb
            with self._cond:
                key = (slice_id, host)
                if self._stale(key, pid, ts):
                    self._drop("stale", sender)
                    continue
                self._newest[key] = (pid, ts)
                last = self._last.get(key, float("-inf"))
                if ts >= last:
                    old = self._pids.get(key, pid)
                    if old != pid and self._handled.pop(key, None) != old:
                        # The old host is gone: it stopped counting at its last heartbeat,
                        # unless its pidfd already said exactly when.
                        self._died.setdefault(key, self._heard.get(key, ts))
                        # Replaced while its predecessor still looked fresh: the loss would go
                        # unseen without the latch. (A stale predecessor was already seen down.)
                        if ts - last <= self.timeout:
                            self._latched[slice_id] = float("inf")  # until wait_for (see above)
                    if old != pid or key not in self._pids:
                        self._watch(key, pid)
                    self._last[key] = ts
                    self._heard[key] = ts if old != pid else max(ts, self._heard.get(key, ts))
                    self._pids[key] = pid
                    if sender:
                        self._addr[key] = sender
                    self._exited_now.discard(key)
                    self._credited.discard(key)
                self._cond.notify_all()

    def _stale(self, key: tuple[int, int], pid: int, ts: float) -> bool:
        """A sealed heartbeat no newer than one already heard from its process, or sent before
        that process exited: a replay (or one queued before the exit), never news."""
        newest = self._newest.get(key)
        if newest is not None and newest[0] == pid and ts <= newest[1]:
            return True
        gone = self._exit_at.get(key)
        return gone is not None and gone[0] == pid and ts <= gone[1]

    def _drop(self, why: str, sender: object) -> None:
        """Count a datagram that is not the workload's; say the first forged one at once."""
        with self._cond:
            self._dropped[why] += 1
            first = why != "stale" and self._dropped[why] == 1
        if first:
            log.warning("elastix: dropped a %s heartbeat datagram from %r (not sealed with this "
                        "workload's key, or not one of its hosts'); further ones are counted",
                        why, sender or "an unnamed socket")

    def dropped(self) -> dict[str, int]:
        """Datagrams dropped as not the workload's, by why: ``forged`` (the seal does not
        match), ``stale`` (a replay, or queued before its process exited), ``unexpected``
        (sealed, but no heartbeat or answer of this workload's hosts)."""
        with self._cond:
            return dict(self._dropped)

    def _answered(self, pong: tuple[int, int, int, int], sender: object) -> None:
        """A host answered a ``ping``: counted only from the socket its heartbeats come from."""
        slice_id, host, pid, token = pong
        key = (slice_id, host)
        with self._cond:
            if not sender or self._addr.get(key) != sender or self._pids.get(key) != pid:
                return
            prev = self._answers.get(key)
            if prev is None or prev[0] != pid or token > prev[1]:
                self._answers[key] = (pid, token)
            # Heard from, later than its last heartbeat maybe: a loss found later is dated no
            # earlier than this answer (``losses``: the steps it answered for were completed).
            self._heard[key] = max(self._heard.get(key, float("-inf")), self._clock())
            self._cond.notify_all()

    def _watch(self, key: tuple[int, int], pid: int) -> None:
        """Learn the moment ``pid`` exits (Linux pidfd; elsewhere the last heartbeat stands)."""
        for fd, (k, _) in list(self._pidfds.items()):
            if k == key:  # the predecessor's: no longer this host
                self._unwatch(fd)
        open_pidfd = getattr(os, "pidfd_open", None)
        if open_pidfd is None:
            return
        try:
            fd = open_pidfd(pid)
        except OSError:  # already gone (or another PID namespace): heartbeats still tell
            return
        self._pidfds[fd] = (key, pid)
        self._sel.register(fd, selectors.EVENT_READ)

    def _unwatch(self, fd: int) -> None:
        self._pidfds.pop(fd, None)
        try:
            self._sel.unregister(fd)
        except (KeyError, ValueError):
            pass
        os.close(fd)

    def _exited(self, fd: int) -> None:
        key, pid = self._pidfds[fd]
        now = self._clock()
        self._unwatch(fd)
        with self._cond:
            self._exit_at[key] = (pid, now)  # nothing it sent later is real (``_stale``)
            if self._pids.get(key) == pid:
                self._died.setdefault(key, now)
                self._exited_now.add(key)
            self._cond.notify_all()

    def _judged_now(self) -> float:
        """Now, as staleness is judged: as of the last moment the receiver could listen (right
        after a freeze the caller may run before the receiver has drained, or missed, anything)."""
        now = self._clock()
        if self._deaf_after is not None:
            now = min(now, self._listened + RECV_WAKE + 0.05)
        return now

    def _live_locked(self) -> frozenset[int]:
        now = self._judged_now()
        live = set()
        for s in range(self.num_slices):
            if all(now - self._last.get((s, h), float("-inf")) <= self.timeout
                   for h in range(self.hosts_per_slice)):
                live.add(s)
        if self.exits:
            live -= {s for s, _ in self._exited_now}
        return frozenset(live)

    def live_slices(self) -> frozenset[int]:
        """Slices whose every host heartbeated within the timeout. Never blocks.

        A slice with a host replaced within the last timeout period is reported missing.
        """
        with self._cond:
            now = self._clock()
            return self._live_locked() - {s for s, t in self._latched.items() if t > now}

    def losses(self, slices) -> dict[int, float]:
        """Slices of ``slices`` that lost a host, each with since when (this clock): from when
        it exited (exact where the OS tells: a pidfd), else from its last heartbeat (replaced
        unseen, or stale: it hangs). For the measurement only (the detection event's
        ``since_loss``); nothing is kept or dropped by it. Cleared by ``wait_for`` (the loss is
        being handled) and by ``roll`` (a new session takes the host)."""
        wanted = frozenset(slices)
        out: dict[int, float] = {}

        def note(s: int, t: float) -> None:
            out[s] = min(t, out.get(s, t))

        with self._cond:
            for (s, _), t in self._died.items():
                if s in wanted:
                    note(s, t)
            now = self._clock()
            for (s, h), t in self._heard.items():
                if s in wanted and now - self._last[(s, h)] > self.timeout:
                    note(s, t)
        return out

    # -- what a step needs: every host of its mesh answers ---------------------------------------
    def roll(self, slices) -> dict[tuple[int, int], int]:
        """The pid of every host of ``slices`` now: the hosts a session's devices live on, whose
        answers its steps need (``answer``). Whatever befell these hosts before (outside the
        mesh, in replica-resize) is history: their loss records are dropped."""
        wanted = frozenset(slices)
        with self._cond:
            for key in [k for k in self._died if k[0] in wanted]:
                del self._died[key]
            for key in [k for k in self._handled if k[0] in wanted]:
                del self._handled[key]
            return {k: p for k, p in self._pids.items() if k[0] in wanted}

    def answer(self, slices, roll: dict[tuple[int, int], int]) -> dict[int, str]:
        """Have every host of ``slices`` (as ``roll`` names them) answer now.

        Blocks until each has answered after this call began (returns ``{}``), or until a
        host of them is known lost, and returns ``{slice: why}``: a host whose process exited
        or was replaced at once, a silent one (hung) once its heartbeats are a timeout old, as
        a TPU collective waits for a hung host until it is declared lost. Pings are sent again
        every ``PING_RESEND`` seconds (a datagram may be dropped on a full queue).
        """
        keys = self._keys(slices)
        with self._cond:
            self._token += 1
            token = self._token
            sent = float("-inf")
            while True:
                gone = self._gone(keys, roll)
                if gone:
                    return gone
                waiting = [k for k in keys if k in self._addr and not self._has_answered(
                    k, roll[k], token)]
                if not waiting:
                    self._say_unaskable(keys)
                    return {}
                now = time.monotonic()
                if now - sent >= PING_RESEND:
                    self._ping(waiting, token)
                    sent = now
                self._cond.wait(PING_RESEND)

    def gone(self, slices, roll: dict[tuple[int, int], int]) -> dict[int, str]:
        """``answer``'s verdict as it stands now, without asking: ``{slice: why}`` for the
        slices of ``slices`` already known to have lost a host of ``roll``, ``{}`` otherwise.
        Never blocks: a copy under way asks it between its parts, so a copy that can no longer
        complete stops being waited for once the loss is known (``LocalStandIn.check_transfer``)."""
        keys = self._keys(slices)
        with self._cond:
            return self._gone(keys, roll)

    def _keys(self, slices) -> list[tuple[int, int]]:
        return [(s, h) for s in sorted(frozenset(slices)) for h in range(self.hosts_per_slice)]

    def _has_answered(self, key: tuple[int, int], pid: int, token: int) -> bool:
        got = self._answers.get(key)
        return got is not None and got[0] == pid and got[1] >= token \
            and got[1] >> 32 == token >> 32

    def _say_unaskable(self, keys) -> None:
        """A host whose heartbeats come from a socket with no address (a sender of another
        make) cannot be asked: its freshness alone answers for it. Said once per host."""
        for key in keys:
            if key not in self._addr and key not in self._unaskable:
                self._unaskable.add(key)
                log.warning(
                    "elastix: slice %d host %d heartbeats from a socket with no address: a "
                    "step cannot ask it to answer, only its heartbeats count", *key)

    def _ping(self, keys, token: int) -> None:
        data = heartbeat.encode_ping(self._key, token)
        for key in keys:
            try:
                self._sock.sendto(data, self._addr[key])
            except OSError:
                pass  # its queue is full (it hangs) or it is gone: the verdict says which

    def _gone(self, keys, roll: dict[tuple[int, int], int]) -> dict[int, str]:
        """``{slice: why}`` for the slices of ``keys`` that lost a host of ``roll``."""
        now = self._judged_now()
        out: dict[int, str] = {}
        for key in keys:
            s, h = key
            pid = roll.get(key)
            if pid is None:
                out.setdefault(s, f"slice {s} host {h} was never heard")
            elif self._pids.get(key) != pid:
                out.setdefault(s, f"slice {s} host {h} (pid {pid}) was replaced")
            elif self.exits and key in self._exited_now:
                out.setdefault(s, f"slice {s} host {h} (pid {pid}) exited")
            elif now - self._last.get(key, float("-inf")) > self.timeout:
                out.setdefault(s, f"slice {s} host {h} (pid {pid}) stopped answering "
                                  f"({now - self._heard.get(key, now):.1f} s silent)")
        return out

    def host_pids(self) -> dict[tuple[int, int], int]:
        """The pid that last heartbeated for each ``(slice, host)`` (for logs and tests)."""
        with self._cond:
            return dict(self._pids)

    def wait_for(self, required: int, timeout: float,
                 stop: Callable[[], bool] | None = None) -> frozenset[int]:
        """Block until at least ``required`` slices are live and return them.

        Raises:
            SliceWaitTimeout: fewer than ``required`` slices were live after ``timeout`` seconds.
            WaitStopped: ``stop()`` turned true first (checked every 0.1 s).
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            self._latched.clear()  # a waiter wants replacements: they count at once
            while True:
                # A host known to have exited does not count until its replacement is heard,
                # though its heartbeats are not stale yet (detection is not at stake here).
                live = self._live_locked() - {s for s, _ in self._exited_now}
                if len(live) >= required:
                    self._latched.clear()  # replacements that arrived while waiting count too
                    self._died.clear()  # the loss is handled: what comes back counts afresh
                    self._note_handled(live)
                    return live
                stopped(stop, live, required)
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    raise SliceWaitTimeout(
                        f"only {len(live)} of {required} required slices live after "
                        f"{timeout:.1f} s (live: {sorted(live)}{self._why_missing(live)})")
                # Heartbeats notify; the short cap re-evaluates staleness as time passes.
                self._cond.wait(min(left, 0.1))

    def _why_missing(self, live: frozenset[int]) -> str:
        """``; slice 1 host 0 (pid 42) silent for 300 s, its process still there (hung)``: what
        each missing slice's hosts did, so a timed-out wait says which host to look at."""
        now = self._clock()
        notes = []
        for s in range(self.num_slices):
            if s in live:
                continue
            for h in range(self.hosts_per_slice):
                key, pid = (s, h), self._pids.get((s, h))
                if pid is None:
                    notes.append(f"slice {s} host {h} never heartbeated")
                elif key in self._exited_now:
                    notes.append(f"slice {s} host {h} (pid {pid}) exited, no replacement heard")
                elif now - self._last[key] > self.timeout:
                    there = _process_exists(pid)
                    notes.append(f"slice {s} host {h} (pid {pid}) silent for "
                                 f"{now - self._heard[key]:.0f} s"
                                 + (", its process still there (hung)" if there else ""))
        return "; " + "; ".join(notes) if notes else ""

    def _note_handled(self, live: frozenset[int]) -> None:
        """Remember every host of the slices left out of ``live``: their losses are handled,
        so their replacements are not latched (see the module docstring). Every host, not
        only the dead ones: a slice is recreated as a unit, and its other hosts may be torn
        down after this wait returned (the local supervisor kills them when it sees the first
        die); latching their replacements held the slice down for good in replica-resize
        (fault hunt row 6). A slice outside the next session's mesh has nothing in flight a
        replacement could hide the loss of."""
        self._handled = {key: pid for key, pid in self._pids.items() if key[0] not in live}

    def close(self) -> None:
        """Stop receiving and remove the socket file. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with self._cond:
            self._cond.notify_all()
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=1.0)
        self._sock.close()
        for fd in list(self._pidfds):
            self._unwatch(fd)
        self._sel.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        if self._path is not None:
            try:
                os.unlink(self._path)
            except FileNotFoundError:
                pass
        if self._dropped:
            log.warning("elastix: dropped %s heartbeat datagrams that were not this workload's "
                        "hosts'", ", ".join(f"{n} {why}" for why, n in sorted(self._dropped.items())))

    def __enter__(self) -> LocalHeartbeatHealth:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_private_dir(path: str) -> None:
    """Refuse a socket file whose directory another user could enter: anyone who can reach a
    UNIX socket file with write access can send to it.

    Raises:
        UsageError: the directory is not this user's, or its mode lets others in.
    """
    d = os.path.dirname(os.path.abspath(path))
    try:
        st = os.stat(d)
    except OSError as err:
        raise UsageError(f"the heartbeat socket's directory {d}: {err.strerror or err}",
                         hint="the local backend's supervisor makes it (0700)") from None
    if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077:
        raise UsageError(f"the heartbeat socket's directory {d} is open to other users (mode "
                         f"{stat.S_IMODE(st.st_mode):o}, owner uid {st.st_uid})",
                         hint="give a socket path in a directory of yours with mode 0700")


def _process_exists(pid: int) -> bool:
    """True if ``pid`` exists on this machine (the local backend's hosts are local)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, not ours to signal
    return True
