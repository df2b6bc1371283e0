"""Kill workers and measure the recovery that follows one fault (:func:`measure_kill`); a soak
of many, on a plan, is :mod:`elastix.measure.soak`'s, each of its rounds measured here.

The measurement itself is pure (:mod:`elastix.measure.events`); this module only drives a backend: read
the trainer's events (``Backend.trainer_events``: its file, or the head's log), kill, and poll
until the recovery that follows the kill has completed its first step, the workload has died, or
the timeout has passed. Clock and sleep are injected so callers (and tests) control waiting.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable

from elastix.backends.base import Backend, KillRecord, WorkloadStatus
from elastix.errors import (
    BackendError,
    ElastixError,
    EventsUnreadable,
    ExitCode,
    NotFoundError,
    UsageError,
)
from elastix.interrupts import deferred
from elastix.measure.aim import (
    Aim,
    EventFeed,
    Landing,
    Window,
    check_reachable,
    compile_passed,
    find_open,
    landing,
)
from elastix.measure.events import (
    Event,
    Recovery,
    events_of,
    ms_of,
    recoveries,
)
from elastix.measure.plan import MODES
from elastix.measure.progress import Phase, wait_phase
from elastix.measure.report import (
    COMPLETED_STATES,
    DEAD_STATES,
    Bounds,
    ChaosFailed,
    ChaosReport,
    KillMeasurement,
    Violation,
)
from elastix.measure.wait import stepping
from elastix.protocol.timefmt import iso_ms

__all__ = ["COMPLETED_STATES", "DEAD_STATES", "MODES", "Bounds", "ChaosFailed", "ChaosReport",
           "KillMeasurement", "Violation", "check_killable", "measure_kill"]

def _head(st: WorkloadStatus) -> tuple[int, int | None]:
    return (st.head.restarts, st.head.pid) if st.head else (0, None)


DELETED = "the workload was deleted"


class WorkloadGone(ElastixError):
    """The run a chaos run measures is no more: deleted, or replaced by a new run under its
    name. Its measurements so far stand; the soak stops with this reason (exit 4)."""


@dataclasses.dataclass(frozen=True)
class RunId:
    """What tells one run of a workload from the next under the same name: when it was
    created (``create --replace`` creates it again: a new JobSet, a new local plan) and the
    events file its trainer writes. A head restart or a slice's is the same run."""

    created: dt.datetime | None
    events: str | None

    @classmethod
    def of(cls, backend: Backend, name: str, st: WorkloadStatus) -> RunId:
        return cls(st.created, backend.events_path(name))

    def changed(self, backend: Backend, name: str, st: WorkloadStatus) -> str | None:
        """Why ``st`` is another run than this one, in words; None: the same run.

        Raises:
            NotFoundError: the workload is gone (its plan read for its events file).
        """
        if st.created != self.created:
            when = f" created {iso_ms(st.created)}" if st.created else ""
            return f"the workload was replaced by a new run{when} (create --replace?)"
        events = backend.events_path(name)
        if events != self.events:
            return f"the workload's run changed: its events file is now {events}, not " \
                   f"{self.events}"
        return None


def _read_status(backend: Backend, name: str, run: RunId | None
                 ) -> tuple[WorkloadStatus | None, str | None]:
    """The workload's status and, when it is not the run measured any more, why (deleted:
    no status; replaced: the new run's)."""
    try:
        st = backend.status(name)
        return st, run.changed(backend, name, st) if run is not None else None
    except NotFoundError:
        return None, DELETED


class Stops:
    """The hosts a soak stopped (``hang``). A hang ends by itself (``--for``) or by the
    platform replacing the host; on any other way out of the soak (Ctrl-C, SIGTERM, an
    error) :meth:`undo` resumes every host still stopped, so none is left stopped by a
    command that no longer runs (locally for ever with the hung-host probe off)."""

    def __init__(self) -> None:
        self.recs: list[KillRecord] = []
        self.made: list[KillRecord] = []
        """Every fault made, hang or not: what a Ctrl-C that came while one was made (held
        until it was noted) leaves to report."""
        self.resumed: list[KillRecord] = []
        """The hosts :meth:`undo` resumed (what an interrupted command says it did)."""

    def note(self, recs: list[KillRecord]) -> list[KillRecord]:
        new = [r for r in recs if not r.dry_run and all(r is not x for x in self.made)]
        self.made += new
        self.recs += [r for r in new if r.fault == "hang"]
        return recs

    def held(self, inject: Callable[[], list[KillRecord]]) -> list[KillRecord]:
        """``inject()`` with Ctrl-C held until its records are noted: a host stopped is a host
        known."""
        with deferred():
            return self.note(inject())

    def undo(self, backend: Backend, name: str) -> list[KillRecord]:
        """Resume every host noted and not resumed yet that still exists (Ctrl-C held
        meanwhile: a second one must not leave the rest stopped)."""
        with deferred():
            for r in self.recs:
                if r.resumed is not None:
                    continue
                try:
                    ok = backend.resume(name, r)
                except (ElastixError, OSError):
                    ok = False  # gone with its workload: nothing left stopped
                if ok:
                    self.resumed.append(r)
        return self.resumed


LOG_POLL = 0.05
"""Seconds between reads of a local head's log while a fault waits for its moment (a head
with no events file: MaxText). An events file is followed as it is written
(:class:`EventFeed`); a remote source is read once a ``poll``."""


def _head_now(st: WorkloadStatus) -> tuple[bool, int | None]:
    """Whether the head runs, and since when (ms; None: unknown)."""
    h = st.head
    return (h is not None and h.phase == "Running",
            ms_of(h.started) if h is not None and h.started is not None else None)


def _worker_running(st: WorkloadStatus) -> bool:
    return any(p.phase == "Running" for s in st.slices for p in s.pods)


REPORT_EVERY = 0.5
"""Seconds between two phase reports while a fault waits for its moment."""


def _wait_for_moment(backend: Backend, name: str, feed: EventFeed, aim: Aim, since: int, *,
                     deadline: float, poll: float, clock: Callable[[], float],
                     sleep: Callable[[float], None], report: Callable[[Phase], None] | None = None,
                     run: RunId | None = None, opened: bool = False
                     ) -> tuple[WorkloadStatus, Window | None]:
    """Wait until the fault may land: the run is stepping (un-aimed), or the aimed moment is
    open (``opened``: the recovery an opener kill began, open or come and gone:
    :func:`~elastix.measure.aim.find_open`'s ``late``). Returns the status last read and the
    window found (None when un-aimed, or when the workload ended first).

    Raises:
        UsageError: the aim cannot be met by this run (exit 2; nothing was killed).
        BackendError: the moment did not come within the timeout (nothing was killed).
        WorkloadGone: ``run`` was replaced by a new run (nothing was killed).
    """
    step = LOG_POLL if aim.aimed else poll
    next_status = clock()
    st: WorkloadStatus | None = None
    checked = False
    first = True
    next_report = clock()
    while True:
        events = feed.poll()
        if first and aim.during in ("save", "snapshot"):
            # a save or snapshot already under way is missed: its copy, where a fault hurts,
            # is most likely over; aim at the next one from its start
            since, first = max(since, len(events)), False
        if clock() >= next_status or st is None:
            st = backend.status(name)
            next_status = clock() + poll
            why = run.changed(backend, name, st) if run is not None else None
            if why is not None:
                raise WorkloadGone(why)
            if st.state in DEAD_STATES:
                return st, None
        if not checked and (events or aim.during != "startup"):
            check_reachable(aim, events, feed.records)
            checked = any(e.name == "run_start" for e in events)
        if aim.after is not None:  # its delay was waited by the caller: now
            return st, None
        if aim.during == "compile" and (at := compile_passed(events, _head_now(st))) is not None:
            raise UsageError(f"--during compile: {name} is already stepping (step {at}): its "
                             "first compile has passed, and its head is not restarting",
                             hint="aim at compile right after `elastix workload create`, or "
                                  "once its head restarts; or use --at-step N or --during save")
        if not aim.aimed:
            if stepping(events):
                return st, None
        elif aim.during == "startup":
            if find_open(events, aim, since, feed.records) is None:
                raise UsageError(f"--during startup: {name} has already started (its trainer "
                                 "wrote run_start)", hint="aim at startup right after "
                                 "`elastix workload create`, or use --during compile")
            if _worker_running(st):
                return st, find_open(events, aim, since, feed.records)
            step = poll / 20  # the hosts start in ms: check the pods often
            next_status = min(next_status, clock() + step)
        elif not aim.needs_stepping() or stepping(events) or aim.at_step is not None:
            w = find_open(events, aim, since, feed.records, late=opened)
            if w is not None:
                return st, w
        if clock() >= deadline:
            what = "stepping (no step after a committed snapshot or checkpoint)" \
                if not aim.aimed else f"{aim.describe()} (the moment never came)"
            raise BackendError(f"{name} was not {what} within the timeout; nothing was killed",
                               hint=f"see elastix logs {name}; or raise --timeout")
        if report is not None and clock() >= next_report:  # O(events): not at every wake,
            report(wait_phase(st, events))  # an aimed moment's events may come ms apart
            next_report = clock() + REPORT_EVERY
        if feed.following:  # woken by the trainer's next event line, or at the next status
            feed.wait(max(0.0, min(next_status - clock(), poll)) if aim.aimed else step)
        else:
            # a remote source (GKE: the API server) is read once a poll; a local log often
            sleep(step if aim.aimed and feed.path is not None else poll)


def measure_kill(backend: Backend, name: str, do_kill: Callable[[], list[KillRecord]], *,
                 timeout: float = 600.0, poll: float = 1.0, aim: Aim | None = None,
                 since: int = 0, hang_for: float | None = None,
                 opened: list[KillRecord] | None = None, baseline: int | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 report: Callable[[Phase], None] | None = None,
                 stops: Stops | None = None, run: RunId | None = None) -> KillMeasurement:
    """Fault (``do_kill``) once the moment has come, and wait for the recovery that follows;
    measure it.

    ``aim``: when (:mod:`elastix.measure.aim`); un-aimed, once the trainer is stepping (a kill
    before its first save restores from init). ``since``: the index of the events after which
    an aimed moment counts (the previous fault's). ``hang_for``: resume the hung hosts
    (:meth:`Backend.resume`) that long after the fault. The baseline (recoveries so far,
    restart counters, head PID) is read before the fault, so the first recovery that appears
    afterwards is this fault's (``opened``: faults made before this one to open the
    recovery it aims at, ``baseline`` the count of recoveries before them: the recovery
    measured is then the newest since that count, once it completes, and this fault is among
    its ``also_killed``); a fault before the run's first step that no recovery took up
    is measured as absorbed by the start (a ``start-up`` recovery: fault to first step).
    ``report`` is told the phase before each sleep (:func:`~elastix.measure.progress.wait_phase`:
    compiling, ..., killed POD, recovering: restore, ...).

    ``stops`` notes a ``hang``'s hosts; whatever interrupts the measurement (Ctrl-C, SIGTERM,
    an error) resumes them before it goes on. ``run``: the run measured; deleted or replaced
    after the fault, the measurement ends there with what it had (its ``gone``); before it,
    :class:`WorkloadGone` (or ``NotFoundError``) and nothing was made.
    """
    aim = aim or Aim()
    stops = stops if stops is not None else Stops()
    deadline = clock() + timeout
    feed = EventFeed(backend, name)
    made = len(stops.made)
    before: WorkloadStatus | None = None
    try:
        before, window = _wait_for_moment(backend, name, feed, aim, since, deadline=deadline,
                                          poll=poll, clock=clock, sleep=sleep, report=report,
                                          run=run, opened=bool(opened))
        events = feed.events
        n_before = len(recoveries(events)) if baseline is None else baseline
        start = max((i for i, e in enumerate(events) if e.name == "run_start"), default=0)
        first_steps = sum(1 for e in events[start:] if e.name == "step")  # this run's
        _measurable(backend, name)
        aimed = stops.held(do_kill)
    except BaseException as err:
        feed.close()
        if isinstance(err, KeyboardInterrupt) and before is not None and stops.made[made:]:
            # Ctrl-C held while the faults were made: they were made
            stops.undo(backend, name)
            raise Cut(_cut([*(opened or []), *stops.made[made:]], before)) from err
        raise
    kills = [*(opened or []), *aimed]
    try:
        return _follow(backend, name, feed, kills, aimed, before, window, aim, opened,
                       n_before, first_steps, timeout=timeout, poll=poll, hang_for=hang_for,
                       clock=clock, sleep=sleep, report=report, run=run)
    except BaseException as err:  # Ctrl-C, SIGTERM, an error: no host is left stopped by it
        stops.undo(backend, name)
        if isinstance(err, KeyboardInterrupt):
            raise Cut(_cut(kills, before)) from err
        raise
    finally:
        feed.close()


class Cut(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) once a fault was made: the fault's measurement so far (its
    ``interrupted`` set), for the report to keep."""

    def __init__(self, measurement: KillMeasurement) -> None:
        super().__init__()
        self.measurement = measurement


def _cut(kills: list[KillRecord], before: WorkloadStatus) -> KillMeasurement:
    """The measurement of faults made when Ctrl-C cut it short: the faults, no recovery,
    the workload's state as last read."""
    h0 = _head(before)
    return KillMeasurement(kills, None, "events", before.state, 0, 0, h0[1], None,
                           timed_out=False, interrupted=True)


def _measurable(backend: Backend, name: str) -> None:
    """The events a recovery is measured from, read as :func:`_follow` will read them: a
    fault whose recovery could not be measured is not made.

    Raises:
        UsageError: they cannot be read now (exit 2: nothing was killed).
    """
    try:
        events_of(backend.trainer_events(name))
    except EventsUnreadable as err:
        raise UsageError(f"{err.message}: nothing was killed: its recovery could not be "
                         "measured", hint=err.hint) from None


def _follow(backend: Backend, name: str, feed: EventFeed, kills: list[KillRecord],
            aimed: list[KillRecord], before: WorkloadStatus, window: Window | None, aim: Aim,
            opened: list[KillRecord] | None, n_before: int, first_steps: int, *,
            timeout: float, poll: float, hang_for: float | None, clock: Callable[[], float],
            sleep: Callable[[float], None], report: Callable[[Phase], None] | None,
            run: RunId | None) -> KillMeasurement:
    """:func:`measure_kill` once the fault is made: follow the recovery, resume a hang on
    time, place an aimed fault; what it finds is measured whatever ends it (the workload
    deleted or replaced, its events unreadable: said in the measurement)."""
    kill_ms = ms_of(aimed[0].time)
    resume_at = clock() + hang_for if hang_for is not None else None
    deadline = clock() + timeout
    rec: Recovery | None = None
    timed_out = True
    new: list[Recovery] = []
    source, unreadable, landed, gone = "events", None, None, None
    st: WorkloadStatus | None = before
    while True:
        if resume_at is not None and clock() >= resume_at:
            for k in kills:
                backend.resume(name, k)
            resume_at = None
        try:
            events, source = events_of(backend.trainer_events(name))
        except NotFoundError:
            st, gone, timed_out = None, DELETED, False
            break
        except ElastixError as err:  # the fault is made: reported with what it had
            unreadable = why_unreadable(err)
            st, gone = _read_status(backend, name, run)
            timed_out = False
            break
        found = recoveries(events)[n_before:]
        # A recovery followed by another before its first step was cut short (a second
        # loss during it, or a restart's compile): the fault's recovery is the first that
        # stepped again.
        got = next((r for r in found if r.complete), found[-1] if found else None)
        if got is None:
            got = _absorbed(events, kill_ms, first_steps)
        if got is None and resume_at is None and hang_for is not None:
            got = _stalled(events, kill_ms, kills)
        st, gone = _read_status(backend, name, run)
        if gone is not None:  # these events may be the new run's: the last read is kept
            timed_out = False
            break
        rec, new = got, found
        if (rec and rec.complete) or st.state in DEAD_STATES:
            timed_out = False
            break
        if clock() >= deadline:
            break
        if report is not None:  # an opened recovery is under way already: named as such
            report(wait_phase(st, events, killed=None if opened else aimed))
        sleep(min(poll, max(0.0, resume_at - clock())) if resume_at is not None else poll)
    if resume_at is not None and gone is None:  # the recovery ended first: the hang still
        while (left := resume_at - clock()) > 0:  # ends on time
            sleep(left)
        for k in kills:
            backend.resume(name, k)
    if (aim.at_step is not None or aim.during is not None) and gone is None:
        landed, gone, unreadable = _landed(feed, aim, window, aimed[0], unreadable)
    if rec is not None:
        rec.kill = ms_of(kills[0].time)
        if opened and kill_ms not in rec.also_killed:
            rec.also_killed.append(kill_ms)
        cut = [r for r in new[:new.index(rec)] if not r.complete] if rec in new else []
        if cut:  # the fault's recovery is timed from the first fault, the one cut short
            rec.first_fault = cut[0].loss if cut[0].loss is not None else rec.kill
    m = _measurement(kills, rec, new, before, st if gone is None else None, gone, source,
                     timed_out)
    m.landing, m.unreadable = landed, unreadable
    return m


def _landed(feed: EventFeed, aim: Aim, window: Window | None, first: KillRecord,
            unreadable: str | None) -> tuple[Landing | None, str | None, str | None]:
    """Where an aimed fault landed: once its signal was sent, where the backend says
    (``kill_worker``); or the workload gone, or its events unreadable, when read for it."""
    sent = ms_of(first.sent if first.sent is not None else first.time)
    try:
        return landing(feed.poll(), aim, window, sent), None, unreadable
    except NotFoundError:
        return None, DELETED, unreadable
    except ElastixError as err:
        return None, None, unreadable or why_unreadable(err)


def _measurement(kills: list[KillRecord], rec: Recovery | None, new: list[Recovery],
                 before: WorkloadStatus, st: WorkloadStatus | None, gone: str | None,
                 source: str, timed_out: bool) -> KillMeasurement:
    """The fault's measurement from the status before it and the last one read (None: the
    workload ``gone``): restarts, the head's PID, the recoveries it cut short."""
    h0 = _head(before)
    h1 = _head(st) if st is not None else (h0[0], None)
    short = [r.index for r in new[:new.index(rec)] if not r.complete] if rec in new else []
    state = st.state if st is not None else "Deleted" if gone == DELETED else "Replaced"
    restarts = st.jobset_restarts - before.jobset_restarts if st is not None else 0
    return KillMeasurement(kills, rec, source, state, restarts, max(0, h1[0] - h0[0]),
                           h0[1], h1[1], timed_out, cut_short=short, gone=gone)


def why_unreadable(err: ElastixError) -> str:
    """What a read of the trainer's events after a fault ran into, in one line."""
    return f"the trainer's events could not be read after the fault: {err.message}"


def _stalled(events: list[Event], kill: int, kills: list[KillRecord]) -> Recovery | None:
    """A hang shorter than the loss timeout: no recovery began, and once the hosts were
    resumed a step completed. Measured from the fault to that step; nothing was lost."""
    resumed = [ms_of(k.resumed) for k in kills if k.resumed is not None]
    if not resumed or any(e.name == "elastic_detected" and e.t >= kill for e in events):
        return None
    after = [e for e in events if e.name == "step" and e.t > max(resumed)]
    if not after:
        return None
    done = [e.data["step"] for e in events if e.name == "step" and e.t <= kill]
    last = done[-1] if done else after[0].data["step"] - 1
    return Recovery(0, "stall", start=kill, first_step_at=after[0].t,
                    first_step=after[0].data["step"], first_step_time_seconds=after[0].data.get(
                        "seconds"), last_step=last, restored_step=last)


def _absorbed(events: list[Event], kill: int, steps_before: int) -> Recovery | None:
    """A fault before the run's first step that no recovery took up: the start absorbed it
    (the slice's replacement came up while the trainer still waited for its slices). Its
    measurement is the time from the fault to that first step; no step was lost."""
    if steps_before:
        return None
    i = next((j for j, e in enumerate(events) if e.name == "step" and e.t >= kill), None)
    if i is None or any(e.name == "elastic_detected" and e.t >= kill for e in events[:i]):
        return None
    first = events[i]
    done = first.data["step"] - 1
    return Recovery(0, "start-up", start=kill, first_step_at=first.t, first_step=first.data["step"],
                    first_step_time_seconds=first.data.get("seconds"), last_step=done,
                    restored_step=done)


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


def events_or_none(backend: Backend, name: str) -> tuple[list[Event] | None, str | None]:
    """The workload's events, or None when they cannot be read any more: it was deleted, or
    (then also why, in one line) they are not events any more."""
    try:
        return events_of(backend.trainer_events(name))[0], None
    except NotFoundError:
        return None, None
    except ElastixError as err:
        return None, err.message
