"""A chaos soak: faults on a plan (``chaos run``; ``kill-worker --measure`` is a soak of one).

Each round picks its target (``_killer``: a running worker, a random host or the head), makes
its fault, and :func:`elastix.measure.chaos.measure_kill` measures the recovery that follows;
the soak stops at its plan's end, at a missed bound, when the workload dies or completes, or
on Ctrl-C, and reports every measurement so far (:class:`elastix.measure.report.ChaosReport`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
import time
from collections.abc import Callable

from elastix.backends.base import Backend, Fault, KillRecord, WorkloadStatus
from elastix.errors import BackendError, ElastixError, NotFoundError, UsageError
from elastix.interrupts import sigterm_interrupts
from elastix.measure.chaos import (
    DELETED,
    Cut,
    RunId,
    Stops,
    WorkloadGone,
    events_or_none,
    measure_kill,
    why_unreadable,
)
from elastix.measure.events import events_of, ms_of, recoveries
from elastix.measure.goodput import goodput
from elastix.measure.plan import Plan, Round
from elastix.measure.progress import Phase
from elastix.measure.report import (
    COMPLETED_STATES,
    DEAD_STATES,
    Bounds,
    ChaosReport,
    KillMeasurement,
    Violation,
    check_bounds,
    trainer_step,
)
from elastix.measure.wait import wait_for


def _running(backend: Backend, name: str) -> list[tuple[int, int]]:
    running = [(s.index, p.host) for s in backend.status(name).slices for p in s.pods
               if p.phase == "Running" and p.role == "worker"]
    if not running:
        raise UsageError(f"workload {name} has no running worker to kill",
                         hint="wait until `elastix workload status` shows it Running")
    return running


def _killer(backend: Backend, name: str, mode: str, rng: random.Random, fault: Fault = Fault(),
            count: int = 1, spread: float = 0.0, sleep: Callable[[float], None] = time.sleep,
            stops: Stops | None = None) -> Callable[..., list[KillRecord]]:
    """What one round of faults does: ``count`` faults of kind ``fault``, ``spread`` seconds
    apart, each on a slice not yet hit when one runs (``mode`` random: any worker, host: one
    chosen host, slice: every host of a slice, as ``--fault slice``). ``stops`` notes each
    host a hang stopped as it is stopped (a Ctrl-C during ``spread`` then resumes it)."""
    stops = stops if stops is not None else Stops()
    kind = "slice" if mode == "slice" and fault.kind == "kill" else fault.kind
    fault = dataclasses.replace(fault, kind=kind)

    def one(hit: set[int], taken: set[tuple[int, int | None]], slice_: int | None = None,
            host: int | None = None) -> list[KillRecord]:
        if kind == "head":
            return stops.held(lambda: backend.inject(name, fault))
        if slice_ is None and (mode == "host" or kind == "slice" or hit):
            # never a host already hit (one process is one fault), a slice not yet hit first
            free = [(s, h) for s, h in _running(backend, name) if (s, h) not in taken
                    and (s, None) not in taken]
            running = [(s, h) for s, h in free if s not in hit] or free
            if not running:
                raise BackendError(f"workload {name} has no running worker left that this "
                                   "round has not hit")
            if kind == "slice":
                slice_ = rng.choice(sorted({s for s, _ in running}))
            else:
                slice_, host = rng.choice(running) if mode == "host" or hit else (None, None)
        victim_seed = rng.randrange(2**31)
        return stops.held(lambda: backend.inject(name, fault, slice=slice_, host=host,
                                                 seed=victim_seed))

    def kill(slice_: int | None = None, host: int | None = None) -> list[KillRecord]:
        done: list[KillRecord] = []
        hit: set[int] = set()
        taken: set[tuple[int, int | None]] = set()  # (slice, None): the whole slice
        for i in range(count):
            if i and spread > 0:
                sleep(spread)
            try:
                recs = one(hit, taken, slice_ if i == 0 else None, host if i == 0 else None)
            except ElastixError:
                if not done:
                    raise
                break  # the rest went down with the first (a slice, the head): that is the fault
            done += recs
            hit |= {r.slice for r in recs if r.slice is not None}
            taken |= {(r.slice, None if kind == "slice" else r.host) for r in recs
                      if r.slice is not None}
        return done
    return kill


def _spared(backend: Backend, name: str, rng: random.Random, opened: list[KillRecord],
            fault: Fault, mode: str) -> list[tuple[int, int | None]]:
    """The victim of a fault aimed at the recovery ``opened`` began: a host (or, for a slice
    fault, a slice) the opener did not take, since another host of a dead slice dying changes
    nothing, on TPU too. Picked as soon as the opener struck, so when the moment opens only the
    signal is left to send (a restore from host memory lasts ~20 ms here). Empty: every
    running host is on a lost slice, and the fault takes any."""
    lost = {r.slice for r in opened if r.slice is not None}
    live = [(s, h) for s, h in _running(backend, name) if s not in lost]
    if not live:
        return []
    if fault.kind == "slice" or (mode == "slice" and fault.kind == "kill"):
        return [(rng.choice(sorted({s for s, _ in live})), None)]
    return [rng.choice(live)]


def run_soak(backend: Backend, name: str, plan: Plan, *, bounds: Bounds | None = None,
             poll: float = 1.0, on_kill: Callable[[int, KillMeasurement], None] | None = None,
             clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep,
             wall: Callable[[], float] = time.time,
             report: Callable[[Phase], None] | None = None) -> ChaosReport:
    """Run ``plan``'s rounds (:mod:`elastix.measure.plan`) in order, measuring each recovery.

    ``wall`` is the clock the faults are recorded on (a backend's ``utc_now``): a round's
    interval counts from the previous round's recorded fault, a scheduled round from the
    moment the trainer was first seen stepping. No un-aimed fault lands before the trainer is
    stepping (:func:`~elastix.measure.wait.stepping`). Whatever ends it (the last round, the
    workload completing or dying, a kill that cannot be carried out, Ctrl-C), the report holds
    every measurement made, the goodput so far and why it stopped: a soak is evidence.
    ``on_kill(i, measurement)`` reports each measurement, ``report`` each wait's phase (as
    :func:`measure_kill`). A Ctrl-C is re-raised by the caller after it has reported
    (``ChaosReport.interrupted``).
    """
    soak = _Soak(backend, name, plan, bounds or Bounds(), poll, clock, sleep, wall, report)
    end = _End()
    interrupted = False
    i = 0
    try:
        with sigterm_interrupts():  # SIGTERM too resumes the hosts a hang stopped
            for i, r in enumerate(plan.rounds, 1):
                end = soak.round(i, r, on_kill)
                if end.stopped:
                    break
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM (interrupts.Terminated)
        interrupted = True
        if isinstance(err, Cut):  # a fault was made: its measurement so far is kept
            soak.keep(i, plan.rounds[i - 1], err.measurement)
    except (NotFoundError, WorkloadGone) as err:
        if soak.run is None:
            raise  # a wrong name: nothing was done
        why = DELETED if isinstance(err, NotFoundError) else err.message
        end = _End(gone=f"{why} {'during' if len(soak.out) >= i or soak.opened else 'before'} "
                        f"kill {i}")
    except BaseException:
        soak.stops.undo(backend, name)
        raise
    if interrupted or end.error is not None:
        soak.stops.undo(backend, name)
    return soak.result(end, i, interrupted)


@dataclasses.dataclass(frozen=True)
class _End:
    """Why a soak stopped before its last round: the workload ended (its status, and when),
    a kill could not be made or measured (``error``), or the workload went (``gone``)."""

    ended: tuple[WorkloadStatus, str] | None = None
    error: str | None = None
    gone: str | None = None

    @property
    def stopped(self) -> bool:
        return self.ended is not None or self.error is not None or self.gone is not None


class _Soak:
    """A chaos run between its rounds: the victims' random draws (one ``Random`` from the
    plan's seed, so the same plan and seed make the same faults), the hosts a hang stopped,
    the previous fault's time, and the measurements so far."""

    def __init__(self, backend: Backend, name: str, plan: Plan, bounds: Bounds, poll: float,
                 clock: Callable[[], float], sleep: Callable[[float], None],
                 wall: Callable[[], float], report: Callable[[Phase], None] | None) -> None:
        self.backend, self.name, self.plan, self.bounds, self.poll = backend, name, plan, \
            bounds, poll
        self.clock, self.sleep, self.wall, self.report = clock, sleep, wall, report
        self.rng = random.Random(plan.seed)
        self.stops = Stops()  # every host a hang stopped: resumed on a way out no fault's end
        # An interval is from one *recorded* kill to the next (what the report and JUnit
        # show), so it reads the record's own clock: each record is taken once its kill
        # begins, never before, so waiting until the previous record's time + interval on
        # that clock makes the next record at least that far from it by construction.
        self.last_kill: list[float] = []  # the previous kill's recorded time, epoch seconds
        self.start: float | None = None  # wall time a schedule counts from
        self.since = 0  # events before the next aimed moment may open
        self.run: RunId | None = None  # the run measured: the one the first status found
        self.opened: list[KillRecord] = []  # this round's opener
        self.out: list[KillMeasurement] = []
        self.violations: list[Violation] = []

    def round(self, i: int, r: Round, on_kill: Callable[[int, KillMeasurement], None] | None
              ) -> _End:
        """Round ``i``: wait its turn, fault, measure the recovery; why to stop, if so."""
        self._wait_turn(i, r)
        st = self._status()
        if st.state in DEAD_STATES:
            return _End(ended=(st, f"before kill {i}"))
        self.opened = []
        try:
            m = self._measure(i, r)
        except ElastixError as err:  # e.g. no running worker left: did the workload end?
            if isinstance(err, (NotFoundError, WorkloadGone)):
                raise  # the workload is gone: said by the caller, with what was measured
            if isinstance(err, UsageError) and not (self.out or self.opened or self.last_kill):
                raise  # an aim this run cannot meet: exit 2, nothing was killed
            st = self.backend.status(self.name)
            if st.state in DEAD_STATES:
                return _End(ended=(st, f"before kill {i}"))
            return _End(error=f"kill {i} failed: {err.message}")
        self._record(i, r, m)
        if on_kill:
            on_kill(i, m)
        if m.gone is not None:
            return _End(gone=f"{m.gone} during kill {i}")
        if m.unreadable is not None:  # another fault's recovery could not be measured either
            return _End(error=f"kill {i}: {m.unreadable}")
        if m.state_after in DEAD_STATES and not (m.recovery and m.recovery.complete):
            return _End(ended=(self.backend.status(self.name), f"during kill {i}"))
        return _End()

    def _wait_turn(self, i: int, r: Round) -> None:
        """A round after an interval: until that long after the previous recorded fault."""
        if r.interval is None or not self.last_kill:
            return
        due = self.last_kill[0] + r.interval
        self._say_until(i, due)
        while (left := due + 1e-6 - self.wall()) > 0:
            self.sleep(left)

    def _say_until(self, i: int, due: float) -> None:
        if self.report is not None and due > self.wall():
            at = dt.datetime.fromtimestamp(due)
            self.report(Phase(f"stepping until fault {i} at {at:%H:%M:%S}"))

    def _status(self) -> WorkloadStatus:
        st = self.backend.status(self.name)
        if self.run is None:
            self.run = RunId.of(self.backend, self.name, st)
        elif (why := self.run.changed(self.backend, self.name, st)) is not None:
            raise WorkloadGone(why)
        return st

    def _measure(self, i: int, r: Round) -> KillMeasurement:
        """The round's fault once due (a schedule's time, ``after``, or its aimed moment),
        and the recovery that followed."""
        if r.at is not None:
            if self.start is None:
                self._stepping()
                self.start = self.wall()
            self._say_until(i, self.start + r.at)
            while (left := self.start + r.at - self.wall()) > 0:
                self.sleep(min(left, self.poll))
        if r.after:
            self.sleep(r.after)
        n_base, pin = self._open(r) if r.opener else (None, None)
        m = measure_kill(self.backend, self.name, lambda: self._kill(r, pin),
                         timeout=self.bounds.timeout, poll=self.poll, clock=self.clock,
                         sleep=self.sleep, aim=r.aim(), since=self.since,
                         hang_for=r.fault.hang_for, opened=self.opened, baseline=n_base,
                         report=self.report, stops=self.stops, run=self.run)
        m.openers = len(self.opened)
        return m

    def _stepping(self) -> None:
        wait_for(self.backend, self.name, "stepping", timeout=self.bounds.timeout,
                 poll=self.poll, clock=self.clock, sleep=self.sleep, report=self.report)

    def _open(self, r: Round) -> tuple[int, tuple[int, int | None] | None]:
        """Open the recovery the round aims at (one kill, any host); the recoveries before
        it, and the victim its fault will take (unless pinned): a host, or a slice, the
        opener spared."""
        self._stepping()
        evs = events_of(self.backend.trainer_events(self.name))[0]
        n_base, self.since = len(recoveries(evs)), len(evs)
        self.opened += self.backend.inject(self.name, Fault("kill"),
                                           seed=self.rng.randrange(2**31))
        if self.plan.pinned or r.slice is not None:
            return n_base, None
        spared = _spared(self.backend, self.name, self.rng, self.opened, r.fault, self.plan.mode)
        return n_base, spared[0] if spared else None  # none: every running host was lost

    def _kill(self, r: Round, pin: tuple[int, int | None] | None) -> list[KillRecord]:
        """The round's faults: at ``kill-worker``'s own victim (pinned), the opener's spared
        one, the round's target, or the plan's mode's choice."""
        if self.plan.pinned:
            recs = self.stops.held(lambda: self.backend.inject(
                self.name, r.fault, slice=r.slice, host=r.host, seed=self.plan.seed))
        else:
            slice_, host = pin if pin is not None else (r.slice, r.host)
            recs = _killer(self.backend, self.name, self.plan.mode, self.rng, r.fault, r.count,
                           r.spread, self.sleep, self.stops)(slice_, host)
        if recs:
            self.last_kill[:] = [max(x.time.timestamp() for x in recs)]
        return recs

    def _record(self, i: int, r: Round, m: KillMeasurement) -> None:
        """Keep round ``i``'s measurement: its fault, how late it was, the bounds it missed;
        and where the next aimed moment's events start."""
        m.fault = r.fault.describe()
        if r.at is not None and self.start is not None:
            m.planned = r.at
            m.late = max(0.0, round(m.kills[0].time.timestamp() - self.start - r.at, 3))
        if m.unreadable is None and m.gone is None:
            try:
                self.since = len(events_of(self.backend.trainer_events(self.name))[0])
            except NotFoundError:
                m.gone = DELETED
            except ElastixError as err:
                m.unreadable = why_unreadable(err)
        self.out.append(m)
        if ((m.unreadable is None and m.gone is None) or (m.recovery and m.recovery.complete)) \
                and not m.interrupted:
            self.violations += check_bounds(m, i, self.bounds)  # unread is no missed bound

    def keep(self, i: int, r: Round, m: KillMeasurement) -> None:
        """Round ``i``'s measurement cut short by Ctrl-C: its faults, kept as made; nothing
        more is read (the user asked to stop)."""
        m.fault = r.fault.describe()
        self.out.append(m)

    def result(self, end: _End, i: int, interrupted: bool) -> ChaosReport:
        """The report: every measurement, the goodput of what was read, why it stopped."""
        error = end.error
        # a replaced workload's events are the new run's: none of this soak's
        events, unread = events_or_none(self.backend, self.name) if end.gone is None \
            else (None, None)
        if unread is not None and error is None:
            error = f"the trainer's events could not be read at the end: {unread}"
        g = goodput(events or [], kills=[t for m in self.out for t in m.fault_times()])
        first = min((ms_of(m.kills[0].time) for m in self.out), default=None)
        res = ChaosReport(self.out, g, self.violations, died=end.gone is not None, error=error,
                          interrupted=interrupted, events=events or [], workload=self.name,
                          bounds=self.bounds, window=(first, g.end) if first is not None and
                          g.end > first else None, resumed=self.stops.resumed, plan=self.plan)
        res.check_goodput()
        res.stopped = _why_stopped(res, end.ended, i, len(self.plan.rounds), end.gone,
                                   interrupted, error)
        return res


def _why_stopped(res: ChaosReport, ended: tuple[WorkloadStatus, str] | None, i: int,
                 kills: int, gone: str | None, interrupted: bool, error: str | None) -> str:
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
    if gone is not None:
        return gone
    if interrupted:
        return f"interrupted (Ctrl-C) during kill {i}{at}"
    if error is not None:
        return error
    # One fault (kill-worker --measure, or --kills 1) is not "all 1 kill" (issue 39).
    return "the one kill done" if kills == 1 else f"all {kills} kills done"
