"""Kill workers and measure the recovery: one kill (``kill-worker --measure``) or a soak.

The measurement itself is pure (:mod:`elastix.measure.events`); this module only drives a backend: read
the trainer's events (or the head's log lines when the events are out of reach), kill, and poll
until the recovery that follows the kill has completed its first step, the workload has died, or
the timeout has passed. Clock and sleep are injected so callers (and tests) control waiting.
"""

from __future__ import annotations

import dataclasses
import enum
import random
import time
from collections.abc import Callable
from typing import Any

from elastix.backends.base import Backend, KillRecord, LogOptions, WorkloadStatus
from elastix.errors import BackendError, ElastixError, NotFoundError, UsageError
from elastix.measure.events import (
    Event,
    Recovery,
    events_from_log,
    events_from_records,
    log_note,
    ms_of,
    recoveries,
)
from elastix.measure.goodput import GoodputReport, goodput
from elastix.protocol.timefmt import iso_ms

DEAD_STATES = ("Failed", "Completed", "Succeeded")
COMPLETED_STATES = ("Completed", "Succeeded")
MODES = ("random", "slice", "host")


class Outcome(enum.IntEnum):
    """How a chaos run (or one measured kill) ended: its exit code, documented in the README.

    Chosen apart from 1 (runtime error), 2 (bad input) and 130 (Ctrl-C). When several apply,
    the highest in this order wins: DIED, BOUND_MISSED, COMPLETED_EARLY.
    """

    OK = 0  # every kill was carried out and measured within the bounds
    BOUND_MISSED = 3  # a recovery missed --max-downtime/--max-steps-lost or --timeout
    DIED = 4  # the workload failed (or was deleted) during the run
    COMPLETED_EARLY = 5  # the workload completed before the last kill


def read_stream(backend: Backend, name: str) -> tuple[list[Event], str]:
    """The workload's normalised events and their source: ``"events"`` or ``"log"``."""
    recs = backend.read_events(name)
    if recs is not None:
        return events_from_records(recs), "events"
    # The API's time on every line: MaxText's lines have no time of their own.
    lines = [e.text for e in backend.logs(name, LogOptions(follow=False, timestamps=True))
             if not e.notice]
    events = events_from_log(lines)
    return events, "log" + log_note(events)


@dataclasses.dataclass
class KillMeasurement:
    """One kill and the recovery that followed it (``recovery`` is None if none started)."""

    kills: list[KillRecord]
    recovery: Recovery | None
    source: str
    state_after: str
    jobset_restarts: int  # during the measurement
    head_restarts: int
    head_pid_before: int | None
    head_pid_after: int | None
    timed_out: bool

    @property
    def pid_same(self) -> bool | None:
        """The controller kept its PID: from the backend's view and from the trainer's."""
        views = [self.recovery.pid_same if self.recovery else None]
        if self.head_pid_before is not None and self.head_pid_after is not None:
            views.append(self.head_pid_before == self.head_pid_after)
        known = [v for v in views if v is not None]
        return all(known) if known else None

    @property
    def in_process(self) -> bool:
        """Recovered without restarting the JobSet or the head, in the same process."""
        r = self.recovery
        return bool(r and r.complete and r.kind == "in-process" and self.jobset_restarts == 0
                    and self.head_restarts == 0 and self.pid_same is not False)

    @property
    def outcome(self) -> Outcome:
        """``kill-worker --measure``'s exit code: recovered, completed, died or timed out."""
        if self.recovery is not None and self.recovery.complete:
            return Outcome.OK
        if self.state_after in COMPLETED_STATES:
            return Outcome.COMPLETED_EARLY
        return Outcome.DIED if self.state_after in DEAD_STATES else Outcome.BOUND_MISSED

    def to_json(self) -> dict[str, Any]:
        return {
            "kills": [{"pod": k.pod, "slice": k.slice, "host": k.host, "node": k.node,
                       "time": iso_ms(k.time), "pid": k.pid} for k in self.kills],
            "recovery": self.recovery.to_json() if self.recovery else None,
            "source": self.source, "state_after": self.state_after,
            "jobset_restarts": self.jobset_restarts, "head_restarts": self.head_restarts,
            "head_pid_before": self.head_pid_before, "head_pid_after": self.head_pid_after,
            "pid_same": self.pid_same, "in_process": self.in_process, "timed_out": self.timed_out,
            "exit_code": int(self.outcome),
        }


def _head(st: WorkloadStatus) -> tuple[int, int | None]:
    return (st.head.restarts, st.head.pid) if st.head else (0, None)


def measure_kill(backend: Backend, name: str, do_kill: Callable[[], list[KillRecord]], *,
                 timeout: float = 600.0, poll: float = 1.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> KillMeasurement:
    """Kill (``do_kill``) and wait for the recovery that follows; measure it.

    The baseline (recoveries so far, restart counters, head PID) is read before the kill, so the
    first recovery that appears afterwards is this kill's.
    """
    deadline = clock() + timeout
    while True:  # a kill before training steps (or mid-recovery) has no recovery to measure
        events, _ = read_stream(backend, name)
        before = backend.status(name)
        if _stepping(events) or before.state in DEAD_STATES:
            break
        if clock() >= deadline:
            raise BackendError(f"{name} has not completed a training step in {timeout:g} s; "
                               "nothing was killed",
                               hint=f"see elastix logs {name}, or raise --timeout")
        sleep(poll)
    n_before = len(recoveries(events))
    kills = do_kill()
    deadline = clock() + timeout
    rec: Recovery | None = None
    timed_out = True
    while True:
        events, source = read_stream(backend, name)
        new = recoveries(events)[n_before:]
        rec = new[0] if new else None
        st = backend.status(name)
        if (rec and rec.complete) or st.state in DEAD_STATES:
            timed_out = False
            break
        if clock() >= deadline:
            break
        sleep(poll)
    if rec is not None:
        rec.kill = ms_of(kills[0].time)
    h0, h1 = _head(before), _head(st)
    return KillMeasurement(kills, rec, source, st.state,
                           st.jobset_restarts - before.jobset_restarts, max(0, h1[0] - h0[0]),
                           h0[1], h1[1], timed_out)


def _stepping(events: list[Event]) -> bool:
    """The trainer has completed a step since it last started, and is not mid-recovery."""
    last_start = max((i for i, e in enumerate(events) if e.name == "run_start"), default=-1)
    if not any(e.name == "step" for e in events[last_start + 1:]):
        return False
    return all(r.complete for r in recoveries(events))


@dataclasses.dataclass
class SoakResult:
    """A chaos experiment: every kill's measurement, the run's goodput, what missed a bound,
    and why it stopped (``stopped``: "all N kills done", "completed at step S before kill K"...).
    """

    measurements: list[KillMeasurement]
    goodput: GoodputReport
    violations: list[str]
    died: bool
    stopped: str = ""
    completed_early: bool = False
    error: str | None = None  # a kill that could not be carried out, the workload still running
    interrupted: bool = False  # by Ctrl-C
    events: list[Event] = dataclasses.field(default_factory=list)  # read at the end, for plots

    @property
    def ok(self) -> bool:
        return not self.violations and not self.died and not self.completed_early \
            and self.error is None

    @property
    def outcome(self) -> Outcome:
        if self.died:
            return Outcome.DIED
        if self.violations:
            return Outcome.BOUND_MISSED
        if self.completed_early:
            return Outcome.COMPLETED_EARLY
        return Outcome.OK

    def to_json(self) -> dict[str, Any]:
        downs = [m.recovery.downtime for m in self.measurements
                 if m.recovery and m.recovery.downtime is not None]
        lost = [m.recovery.steps_lost for m in self.measurements
                if m.recovery and m.recovery.steps_lost is not None]
        return {
            "kills": [m.to_json() for m in self.measurements],
            "totals": {"kills": len(self.measurements), "recovered": len(downs),
                       "downtime_seconds": sum(downs), "mean_downtime_seconds":
                       sum(downs) / len(downs) if downs else None,
                       "max_downtime_seconds": max(downs, default=None),
                       "steps_lost": sum(lost), "goodput": self.goodput.goodput},
            "goodput": self.goodput.to_json(), "violations": self.violations, "died": self.died,
            "completed_early": self.completed_early, "stopped": self.stopped,
            "error": self.error, "exit_code": int(self.outcome) if self.error is None else 1,
            "ok": self.ok,
        }


def check_bounds(m: KillMeasurement, i: int, max_downtime: float | None,
                 max_steps_lost: int | None) -> list[str]:
    """Why kill ``i`` (1-based) missed a bound; empty when it did not.

    A workload that completed instead of recovering missed no bound: the soak reports it as
    having stopped early (:attr:`Outcome.COMPLETED_EARLY`).
    """
    r = m.recovery
    if r is None or not r.complete:
        if m.state_after in COMPLETED_STATES:
            return []
        why = "the workload died" if m.state_after in DEAD_STATES else "no recovery in time"
        return [f"kill {i}: {why} (state {m.state_after})"]
    out = []
    if max_downtime is not None and r.downtime is not None and r.downtime > max_downtime:
        out.append(f"kill {i}: downtime {r.downtime:.1f} s > {max_downtime:g} s")
    if max_steps_lost is not None and r.steps_lost is not None and r.steps_lost > max_steps_lost:
        out.append(f"kill {i}: {r.steps_lost} steps lost > {max_steps_lost}")
    return out


def _killer(backend: Backend, name: str, mode: str, rng: random.Random
            ) -> Callable[[], list[KillRecord]]:
    """What one kill does in each mode: any worker, one chosen host, or every host of a slice."""
    def kill() -> list[KillRecord]:
        if mode == "random":
            return [backend.kill_worker(name, seed=rng.randrange(2**31))]
        running = [(s.index, p.host) for s in backend.status(name).slices for p in s.pods
                   if p.phase == "Running" and p.role == "worker"]
        if not running:
            raise UsageError(f"workload {name} has no running worker to kill",
                             hint="wait until `elastix workload status` shows it Running")
        if mode == "host":
            sl, host = rng.choice(running)
            return [backend.kill_worker(name, slice=sl, host=host)]
        sl = rng.choice(sorted({s for s, _ in running}))
        done: list[KillRecord] = []
        for s, h in running:
            if s != sl:
                continue
            try:
                done.append(backend.kill_worker(name, slice=sl, host=h))
            except BackendError:
                # One host's death takes its whole slice down (on TPU, and so on the local
                # backend): the rest may be gone before their turn. That is the point.
                if not done:
                    raise
        return done
    return kill


def run_soak(backend: Backend, name: str, *, kills: int, interval: float, mode: str = "random",
             seed: int | None = None, max_downtime: float | None = None,
             max_steps_lost: int | None = None, timeout: float = 600.0, poll: float = 1.0,
             on_kill: Callable[[int, KillMeasurement], None] | None = None,
             clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> SoakResult:
    """Kill ``kills`` times, ``interval`` seconds apart (at least), measuring each recovery.

    Whatever ends it (the last kill, the workload completing or dying, a kill that cannot be
    carried out, Ctrl-C), the result holds every measurement made, the goodput so far and why
    it stopped: a soak is evidence. ``on_kill(i, measurement)`` reports progress. A Ctrl-C is
    re-raised by the caller after it has reported (``SoakResult.interrupted``).
    """
    if mode not in MODES:
        raise UsageError(f"unknown chaos mode {mode!r}", hint="use random, slice or host")
    if kills < 1 or interval < 0:
        raise UsageError("--kills must be >= 1 and --interval >= 0")
    rng = random.Random(seed)
    kill = _killer(backend, name, mode, rng)
    out: list[KillMeasurement] = []
    violations: list[str] = []
    ended: tuple[WorkloadStatus, str] | None = None  # the workload's end: its status, when
    error: str | None = None
    interrupted = deleted = False
    i = 0
    try:
        for i in range(1, kills + 1):
            started = clock()
            st = backend.status(name)
            if st.state in DEAD_STATES:
                ended = st, f"before kill {i}"
                break
            try:
                m = measure_kill(backend, name, kill, timeout=timeout, poll=poll, clock=clock,
                                 sleep=sleep)
            except ElastixError as err:  # e.g. no running worker left: did the workload end?
                st = backend.status(name)
                if st.state in DEAD_STATES:
                    ended = st, f"before kill {i}"
                else:
                    error = f"kill {i} failed: {err.message}"
                break
            out.append(m)
            violations += check_bounds(m, i, max_downtime, max_steps_lost)
            if on_kill:
                on_kill(i, m)
            if m.state_after in DEAD_STATES and not (m.recovery and m.recovery.complete):
                ended = backend.status(name), f"during kill {i}"
                break
            if i < kills:
                sleep(max(0.0, interval - (clock() - started)))
    except KeyboardInterrupt:
        interrupted = True
    except NotFoundError:
        if not out:
            raise  # a wrong name: nothing was done
        deleted = True
    events = _events_or_none(backend, name)
    report = goodput(events or [], kills=[ms_of(m.kills[0].time) for m in out])
    res = SoakResult(out, report, violations, died=deleted, error=error, interrupted=interrupted,
                     events=events or [])
    at = f" at step {report.last_step}" if report.last_step is not None else ""
    if ended is not None:
        st, when = ended
        if st.state in COMPLETED_STATES:
            res.completed_early = True
            res.stopped = f"the workload completed{at} {when}"
        else:
            res.died = True
            res.stopped = f"the workload {st.state.lower()}{at} {when}" + (
                f": {st.message}" if st.message else "")
    elif deleted:
        res.stopped = f"the workload was deleted during kill {i}"
    elif interrupted:
        res.stopped = f"interrupted (Ctrl-C) during kill {i}{at}"
    elif error is not None:
        res.stopped = error
    else:
        res.stopped = f"all {kills} kill{'s' if kills != 1 else ''} done"
    return res


def _events_or_none(backend: Backend, name: str) -> list[Event] | None:
    """The workload's events, or None when they cannot be read any more (it was deleted)."""
    try:
        return read_stream(backend, name)[0]
    except ElastixError:
        return None


class ChaosFailed(ElastixError):
    """A chaos run or a measured kill that ended badly, reported after its evidence was printed.

    Its exit code is the :class:`Outcome` (3, 4 or 5), so a CI job can tell a missed bound from
    a dead workload from one that simply finished first.
    """

    def __init__(self, outcome: Outcome, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.exit_code = int(outcome)
