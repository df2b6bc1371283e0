"""Kill workers and measure the recovery: one kill (``kill-worker --measure``) or a soak.

The measurement itself is pure (:mod:`elastix.measure.events`); this module only drives a backend: read
the trainer's events (``Backend.trainer_events``: its file, or the head's log), kill, and poll
until the recovery that follows the kill has completed its first step, the workload has died, or
the timeout has passed. Clock and sleep are injected so callers (and tests) control waiting.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from typing import Any

from elastix.backends.base import Backend, KillRecord, WorkloadStatus
from elastix.errors import BackendError, ElastixError, ExitCode, NotFoundError, UsageError
from elastix.measure.events import (
    Event,
    Recovery,
    events_of,
    ms_of,
    recoveries,
)
from elastix.measure.goodput import goodput
from elastix.measure.report import (
    COMPLETED_STATES,
    DEAD_STATES,
    Bounds,
    ChaosFailed,
    ChaosReport,
    Violation,
    check_bounds,
    trainer_step,
)
from elastix.measure.wait import stepping
from elastix.protocol.timefmt import iso_ms

__all__ = ["COMPLETED_STATES", "DEAD_STATES", "MODES", "Bounds", "ChaosFailed", "ChaosReport",
           "KillMeasurement", "Violation", "measure_kill", "run_soak"]

MODES = ("random", "slice", "host")


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
    def outcome(self) -> ExitCode:
        """This kill's own exit code: recovered, completed, died or timed out."""
        if self.recovery is not None and self.recovery.complete:
            return ExitCode.OK
        if self.state_after in COMPLETED_STATES:
            return ExitCode.COMPLETED
        return ExitCode.DIED if self.state_after in DEAD_STATES else ExitCode.BOUND_MISSED

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
    # A kill before the trainer is stepping (or mid-recovery) has no steady-state recovery to
    # measure: before its first save it restores from init.
    while True:
        events, _ = events_of(backend.trainer_events(name))
        before = backend.status(name)
        if stepping(events) or before.state in DEAD_STATES:
            break
        if clock() >= deadline:
            raise BackendError(f"{name} is not stepping after {timeout:g} s (no step after a "
                               "committed snapshot or checkpoint); nothing was killed",
                               hint=f"see elastix logs {name}; does the job save? or raise "
                                    "--timeout")
        sleep(poll)
    n_before = len(recoveries(events))
    kills = do_kill()
    deadline = clock() + timeout
    rec: Recovery | None = None
    timed_out = True
    while True:
        events, source = events_of(backend.trainer_events(name))
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
             seed: int | None = None, bounds: Bounds | None = None, poll: float = 1.0,
             killer: Callable[[], list[KillRecord]] | None = None,
             on_kill: Callable[[int, KillMeasurement], None] | None = None,
             clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep,
             wall: Callable[[], float] = time.time) -> ChaosReport:
    """Kill ``kills`` times, at least ``interval`` seconds from one recorded kill to the next
    (``wall`` is the clock the kills are recorded on: a backend's ``utc_now``), measuring
    each recovery. No kill lands before the trainer is stepping (:func:`~elastix.measure.wait.
    stepping`): the wait for it is not counted in the interval.

    ``killer`` replaces ``mode``'s choice of victims (``kill-worker --measure``'s pinned pod).
    Whatever ends it (the last kill, the workload completing or dying, a kill that cannot be
    carried out, Ctrl-C), the report holds every measurement made, the goodput so far and why
    it stopped: a soak is evidence. ``on_kill(i, measurement)`` reports progress. A Ctrl-C is
    re-raised by the caller after it has reported (``ChaosReport.interrupted``).
    """
    if mode not in MODES:
        raise UsageError(f"unknown chaos mode {mode!r}", hint="use random, slice or host")
    if kills < 1 or interval < 0:
        raise UsageError("--kills must be >= 1 and --interval >= 0")
    bounds = bounds or Bounds()
    chosen = killer or _killer(backend, name, mode, random.Random(seed))
    # --interval is from one *recorded* kill to the next (what the report and JUnit show), so
    # the schedule reads the record's own clock: each record is taken once its kill begins,
    # never before, so waiting until the previous record's time + interval on that clock makes
    # the next record at least that far from it by construction (the clock at the call and
    # the time a backend records are two instants; scheduling from the first let two records
    # fall 3.988 s apart with --interval 4s).
    last_kill: list[float] = []  # the previous kill's recorded time, in epoch seconds

    def kill() -> list[KillRecord]:
        recs = chosen()
        if recs:
            last_kill[:] = [max(r.time.timestamp() for r in recs)]
        return recs

    out: list[KillMeasurement] = []
    violations: list[Violation] = []
    ended: tuple[WorkloadStatus, str] | None = None  # the workload's end: its status, when
    error: str | None = None
    interrupted = deleted = False
    i = 0
    try:
        for i in range(1, kills + 1):
            if last_kill:  # counted from the previous kill, not from before its wait
                while (left := last_kill[0] + interval + 1e-6 - wall()) > 0:
                    sleep(left)
            st = backend.status(name)
            if st.state in DEAD_STATES:
                ended = st, f"before kill {i}"
                break
            try:
                m = measure_kill(backend, name, kill, timeout=bounds.timeout, poll=poll,
                                 clock=clock, sleep=sleep)
            except ElastixError as err:  # e.g. no running worker left: did the workload end?
                st = backend.status(name)
                if st.state in DEAD_STATES:
                    ended = st, f"before kill {i}"
                else:
                    error = f"kill {i} failed: {err.message}"
                break
            out.append(m)
            violations += check_bounds(m, i, bounds)
            if on_kill:
                on_kill(i, m)
            if m.state_after in DEAD_STATES and not (m.recovery and m.recovery.complete):
                ended = backend.status(name), f"during kill {i}"
                break
    except KeyboardInterrupt:
        interrupted = True
    except NotFoundError:
        if not out:
            raise  # a wrong name: nothing was done
        deleted = True
    events = _events_or_none(backend, name)
    report = goodput(events or [], kills=[ms_of(m.kills[0].time) for m in out])
    res = ChaosReport(out, report, violations, died=deleted, error=error,
                      interrupted=interrupted, events=events or [], workload=name,
                      bounds=bounds)
    res.stopped = _why_stopped(res, ended, i, kills, deleted, interrupted, error)
    return res


def _why_stopped(res: ChaosReport, ended: tuple[WorkloadStatus, str] | None, i: int,
                 kills: int, deleted: bool, interrupted: bool, error: str | None) -> str:
    """The report's ``stopped`` line (and its completed/died flags). The step named is the
    trainer's own record of where it ended (its ``run_end``), not the last step seen."""
    step = trainer_step(res.events)
    at = f" at step {step}" if step is not None else ""
    if ended is not None:
        st, when = ended
        if st.state in COMPLETED_STATES:
            res.completed_early = True
            return f"the workload completed{at} {when}"
        res.died = True
        return f"the workload {st.state.lower()}{at} {when}" + (
            f": {st.message}" if st.message else "")
    if deleted:
        return f"the workload was deleted during kill {i}"
    if interrupted:
        return f"interrupted (Ctrl-C) during kill {i}{at}"
    if error is not None:
        return error
    return f"all {kills} kill{'s' if kills != 1 else ''} done"


def check_killable(backend: Backend, name: str) -> WorkloadStatus:
    """The workload's status, when a kill can be made: else the code ``chaos run`` gives.

    Raises:
        ChaosFailed: the workload completed (exit 5) or failed (exit 4): nothing was killed.
    """
    st = backend.status(name)
    if st.state in COMPLETED_STATES:
        raise ChaosFailed(ExitCode.COMPLETED, f"workload {name} has completed: nothing to kill",
                          hint=f"create it again: elastix workload create {name} --replace")
    if st.state in DEAD_STATES:
        raise ChaosFailed(ExitCode.DIED, f"workload {name} is {st.state}: nothing to kill",
                          hint=f"see elastix workload status {name}")
    return st


def _events_or_none(backend: Backend, name: str) -> list[Event] | None:
    """The workload's events, or None when they cannot be read any more (it was deleted)."""
    try:
        return events_of(backend.trainer_events(name))[0]
    except ElastixError:
        return None
