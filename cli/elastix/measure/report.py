"""The one report of a chaos experiment: ``chaos run`` and ``chaos kill-worker --measure`` alike.

Both commands drive :func:`elastix.measure.soak.run_soak` (a measured kill is a soak of one
kill) and print this report: the same JSON schema (snake_case keys, ``ok``, violations as
``{kill, bound, limit, value}``), the same bounds and the same exit code. The JUnit and Markdown
renderings (:mod:`elastix.views.report`) read only :meth:`ChaosReport.to_json`, so a CI job sees
the numbers the JSON has.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

from elastix.errors import ExitCode, OutcomeError
from elastix.measure.aim import Landing
from elastix.measure.events import Event, Recovery, fmt_ms, ms_of
from elastix.measure.goodput import GoodputReport
from elastix.protocol.timefmt import iso_ms

if TYPE_CHECKING:
    from elastix.backends.base import KillRecord
    from elastix.measure.plan import Plan

DEAD_STATES = ("Failed", "Completed", "Succeeded")
COMPLETED_STATES = ("Completed", "Succeeded")
SCHEMA_VERSION = 2  # bumped when a key changes meaning or goes away (2: docs/chaos.md)


@dataclasses.dataclass(frozen=True)
class Bounds:
    """What every recovery must meet; None: not bounded."""

    max_downtime: float | None = None  # seconds, Recovery.downtime (from the loss, else kill)
    max_steps_lost: int | None = None
    timeout: float = 600.0  # seconds to wait for a recovery: beyond it, it missed
    min_goodput: float | None = None  # a fraction, over the chaos window (ChaosReport.window)

    def to_json(self) -> dict[str, Any]:
        return {"max_downtime_seconds": self.max_downtime, "max_steps_lost": self.max_steps_lost,
                "timeout_seconds": self.timeout, "min_goodput": self.min_goodput}


@dataclasses.dataclass(frozen=True)
class Violation:
    """One missed bound: kill ``kill`` (1-based) had ``value`` where ``bound`` allows ``limit``.

    ``bound`` is ``max_downtime`` (seconds), ``max_steps_lost`` (steps) or ``recovery`` (no
    recovery within ``limit`` seconds, the ``--timeout``; ``value`` is then None); or, for
    the run as a whole (``kill`` 0), ``min_goodput`` (a fraction, over the chaos window) or
    ``verify`` (its losses differ from the reference's by ``value`` at the first differing
    step where ``--loss-tolerance`` allows ``limit``; ``value`` None when they could not be
    compared; :mod:`elastix.measure.verify`).
    """

    kill: int
    bound: str
    limit: float | int
    value: float | int | str | None
    state: str | None = None  # recovery: the workload's state when it was given up
    detail: str | None = None  # verify: the step, both losses (or why nothing was compared)

    def text(self) -> str:
        if self.bound == "verify":
            return f"verify: {self.detail}"
        if self.bound == "max_downtime":
            return f"kill {self.kill}: downtime {self.value:.3f} s > {self.limit:g} s"
        if self.bound == "max_steps_lost":
            return f"kill {self.kill}: {_steps(self.value)} lost > {self.limit}"
        if self.bound == "min_goodput":
            got = "unknown" if self.value is None else f"{self.value:.1%}"
            return (f"goodput {got} over the chaos window (first fault to the last event) < "
                    f"{self.limit:.1%}")
        why = ("the workload died" if self.state in DEAD_STATES
               else f"no recovery within {self.limit:g} s")
        return f"kill {self.kill}: {why} (state {self.state})"

    def label(self) -> str:
        """The bound missed in a few words, for a chart's label: ``downtime 3.214 s > 2 s``."""
        if self.bound == "max_downtime":
            v = float(self.value)  # type: ignore[arg-type]
            return f"downtime {v:.3f} s > {self.limit:g} s"  # as the tables and JUnit say it
        if self.bound == "max_steps_lost":
            return f"{_steps(self.value)} lost > {self.limit}"
        if self.bound == "min_goodput":
            got = "unknown" if self.value is None else f"{self.value:.1%}"
            return f"goodput {got} < {self.limit:.1%} (chaos window)"
        if self.bound == "verify":
            return ("verify: losses not compared" if self.value is None
                    else "verify: losses differ from the reference's")
        return ("the workload died" if self.state in DEAD_STATES
                else f"no recovery within {self.limit:g} s")

    def to_json(self) -> dict[str, Any]:
        return {"kill": self.kill, "bound": self.bound, "limit": self.limit, "value": self.value}


@dataclasses.dataclass
class KillMeasurement:
    """One fault and the recovery that followed it (``recovery`` is None if none started)."""

    kills: list[KillRecord]
    recovery: Recovery | None
    source: str
    state_after: str
    jobset_restarts: int  # during the measurement
    head_restarts: int
    head_pid_before: int | None
    head_pid_after: int | None
    timed_out: bool
    fault: str = "kill"  # Fault.describe(): "kill", "term (grace 30 s)", "hang (10 s)"...
    landing: Landing | None = None  # where an aimed fault landed
    planned: float | None = None  # --mtbf/--schedule: seconds after the soak's start it was due
    late: float | None = None  # seconds it landed after it was due (a recovery was measured)
    openers: int = 0  # kills[:openers] opened the recovery the aimed fault landed in
    cut_short: list[int] = dataclasses.field(default_factory=list)
    """Recoveries (1-based, in the order they began) that began after the fault (or its
    opener) and never stepped: another loss cut them short, and :attr:`recovery` is the
    one that followed."""
    unreadable: str | None = None
    """Why the trainer's events could not be read after the fault (a line that is no event,
    an events file that is no file): the measurement stopped there, with what it had."""
    gone: str | None = None
    """The workload measured went away after the fault: deleted, or replaced by a new run
    under its name (``create --replace``); the measurement stopped there, with what it had."""
    interrupted: bool = False
    """Ctrl-C (or SIGTERM) came after the fault was made: the measurement stopped there."""

    def fault_times(self) -> list[int]:
        """The ms of each distinct fault (a slice's hosts or a --count round's are one; an
        opener and the aimed fault are two), for goodput's attribution of kills."""
        starts = [0] + ([self.openers] if 0 < self.openers < len(self.kills) else [])
        return [ms_of(self.kills[i].time) for i in starts]

    @property
    def pid_same(self) -> bool | None:
        """The controller kept its PID: from the backend's view and from the trainer's. A
        fault that killed the head killed the controller: never the same, whatever a status
        read before its replacement still records."""
        if any(k.fault == "head" for k in self.kills):
            return False
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
        """This kill's own exit code: recovered, completed, died, timed out, or not measured
        (its events unreadable: a runtime error)."""
        if self.recovery is not None and self.recovery.complete:
            return ExitCode.OK
        if self.interrupted:
            return ExitCode.INTERRUPTED
        if self.gone is not None:
            return ExitCode.DIED
        if self.unreadable is not None:
            return ExitCode.ERROR
        if self.state_after in COMPLETED_STATES:
            return ExitCode.COMPLETED
        return ExitCode.DIED if self.state_after in DEAD_STATES else ExitCode.BOUND_MISSED

    def to_json(self) -> dict[str, Any]:
        return {
            "fault": self.fault,
            "kills": [{"pod": k.pod, "slice": k.slice, "host": k.host, "node": k.node,
                       "time": iso_ms(k.time), "sent": iso_ms(k.sent) if k.sent else None,
                       "pid": k.pid, "fault": k.fault,
                       "grace_seconds": k.grace,
                       "resumed": iso_ms(k.resumed) if k.resumed else None}
                      for k in self.kills],
            "aim": self.landing.to_json() if self.landing else None,
            "planned_seconds": self.planned, "late_seconds": self.late,
            "openers": self.openers, "cut_short": self.cut_short,
            "recovery": self.recovery.to_json() if self.recovery else None,
            "source": self.source, "state_after": self.state_after,
            "jobset_restarts": self.jobset_restarts, "head_restarts": self.head_restarts,
            "head_pid_before": self.head_pid_before, "head_pid_after": self.head_pid_after,
            "pid_same": self.pid_same, "in_process": self.in_process, "timed_out": self.timed_out,
            "unreadable": self.unreadable, "gone": self.gone,
            "interrupted": self.interrupted, "exit_code": int(self.outcome),
        }


class Verdict(Protocol):
    """What the report keeps of ``chaos run --verify``'s comparison of losses
    (:class:`elastix.measure.verify.Verification`)."""

    ok: bool

    def to_json(self) -> dict[str, Any]: ...


def _steps(n: object) -> str:
    """``1 step``, ``4 steps``."""
    return f"{n} step{'' if n == 1 else 's'}"


def check_bounds(m: KillMeasurement, i: int, bounds: Bounds) -> list[Violation]:
    """The bounds kill ``i`` (1-based) missed; empty when it met them all.

    A workload that completed instead of recovering missed no bound: the report says it
    stopped early (:attr:`ExitCode.COMPLETED`).
    """
    r = m.recovery
    if r is None or not r.complete:
        if m.state_after in COMPLETED_STATES:
            return []
        return [Violation(i, "recovery", bounds.timeout, None, m.state_after)]
    out = []
    if bounds.max_downtime is not None and r.downtime is not None \
            and r.downtime > bounds.max_downtime:
        out.append(Violation(i, "max_downtime", bounds.max_downtime, r.downtime))
    if bounds.max_steps_lost is not None and r.steps_lost is not None \
            and r.steps_lost > bounds.max_steps_lost:
        out.append(Violation(i, "max_steps_lost", bounds.max_steps_lost, r.steps_lost))
    return out


@dataclasses.dataclass
class ChaosReport:
    """A chaos experiment: every kill's measurement, the run's goodput, what missed a bound,
    and why it stopped (``stopped``: "all N kills done", "completed at step S before kill K"...).
    """

    measurements: list[KillMeasurement]
    goodput: GoodputReport
    violations: list[Violation]
    died: bool
    stopped: str = ""
    completed_early: bool = False
    error: str | None = None  # a kill that could not be carried out, the workload still running
    interrupted: bool = False  # by Ctrl-C
    events: list[Event] = dataclasses.field(default_factory=list)  # read at the end, for plots
    workload: str = ""
    bounds: Bounds = dataclasses.field(default_factory=Bounds)
    verify: Verdict | None = None  # chaos run --verify (elastix.measure.verify)
    window: tuple[int, int] | None = None
    """The chaos window (ms): the first fault to the last event read, the goodput bound's."""
    resumed: list[KillRecord] = dataclasses.field(default_factory=list)
    """Hosts a hang had stopped that the run resumed on its way out (Ctrl-C, SIGTERM, an
    error), so none is left stopped by a command that no longer runs."""
    plan: Plan | None = None
    """The plan run (:mod:`elastix.measure.plan`): kill ``i``'s measurement is round ``i``'s."""

    @property
    def window_goodput(self) -> float | None:
        return self.goodput.between(*self.window) if self.window else None

    def check_goodput(self) -> None:
        """Add the ``min_goodput`` violation when the window's goodput is under the bound (or
        cannot be known: no fault was made, or no event after it)."""
        if self.bounds.min_goodput is None:
            return
        got = self.window_goodput
        if got is None or got < self.bounds.min_goodput:
            self.violations.append(Violation(0, "min_goodput", self.bounds.min_goodput, got))

    @property
    def ok(self) -> bool:
        return not self.violations and not self.died and not self.completed_early \
            and self.error is None and not self.interrupted

    @property
    def outcome(self) -> ExitCode:
        """The exit code. When several apply: died, then a missed bound, then completed."""
        if self.died:
            return ExitCode.DIED
        if self.violations:
            return ExitCode.BOUND_MISSED
        if self.completed_early:
            return ExitCode.COMPLETED
        return ExitCode.OK

    @property
    def exit_code(self) -> int:
        """The command's exit code: 130 after Ctrl-C (the command exits so), else 1 for an
        error, else the outcome."""
        if self.interrupted:
            return int(ExitCode.INTERRUPTED)
        return int(ExitCode.ERROR) if self.error is not None else int(self.outcome)

    def kill_violations(self, i: int) -> list[Violation]:
        return [v for v in self.violations if v.kill == i]

    def missed_by_fault(self) -> dict[int, tuple[str, ...]]:
        """For the charts: each kill's first fault (ms) to the bounds it missed, in words."""
        return {m.fault_times()[0]: tuple(v.label() for v in self.kill_violations(i))
                for i, m in enumerate(self.measurements, 1) if self.kill_violations(i)}

    def to_json(self) -> dict[str, Any]:
        from elastix.measure.forecast_inputs import report_inputs

        downs = [m.recovery.downtime for m in self.measurements
                 if m.recovery and m.recovery.downtime is not None]
        lost = [m.recovery.steps_lost for m in self.measurements
                if m.recovery and m.recovery.steps_lost is not None]
        kills = []
        for i, m in enumerate(self.measurements, 1):
            d = {"index": i, **m.to_json()}
            d["ok"] = not self.kill_violations(i) and m.recovery is not None \
                and m.recovery.complete
            if self.plan is not None and i <= len(self.plan.rounds):  # the round it measured
                r = self.plan.rounds[i - 1]
                d["round"] = {"when": r.when(i), "target": r.target()}
            kills.append(d)
        return {
            "schema_version": SCHEMA_VERSION, "workload": self.workload,
            "ok": self.ok, "exit_code": self.exit_code,
            "bounds": self.bounds.to_json(),
            "violations": [v.to_json() for v in self.violations],
            "kills": kills,
            "totals": {"kills": len(self.measurements), "recovered": len(downs),
                       "downtime_seconds": sum(downs), "mean_downtime_seconds":
                       sum(downs) / len(downs) if downs else None,
                       "max_downtime_seconds": max(downs, default=None),
                       "steps_lost": sum(lost), "goodput": self.goodput.goodput},
            "chaos_window": None if self.window is None else {
                "start": fmt_ms(self.window[0]), "end": fmt_ms(self.window[1]),
                "seconds": (self.window[1] - self.window[0]) / 1000,
                "goodput": self.window_goodput},
            "goodput": self.goodput.to_json(), "ml_goodput": _ml_goodput(self.events),
            "died": self.died,
            "completed_early": self.completed_early, "stopped": self.stopped,
            "error": self.error, "interrupted": self.interrupted,
            "resumed_on_exit": [{"pod": k.pod, "slice": k.slice, "host": k.host,
                                 "resumed": fmt_ms(ms_of(k.resumed)) if k.resumed else None}
                                for k in self.resumed],
            "verify": self.verify.to_json() if self.verify is not None else None,
            "plan": self.plan.to_json() if self.plan is not None else None,
            "forecast_inputs": report_inputs(self.events),  # workload forecast --report
        }


class ChaosFailed(OutcomeError):
    """A chaos run or a measured kill that ended badly, reported after its evidence was printed.

    Its exit code is the report's outcome (3, 4 or 5), so a CI job can tell a missed bound from
    a dead workload from one that simply finished first.
    """

    def __init__(self, outcome: ExitCode, message: str, hint: str | None = None) -> None:
        super().__init__(outcome, message, hint)


def trainer_step(events: list[Event]) -> int | None:
    """The step the trainer itself says it ended at (its last ``run_end``), else its last step.

    A recovery can roll steps back (work done after a loss is not kept), so the last ``step``
    event may be later than where the run really stands: its own record wins.
    """
    last_start = max((i for i, e in enumerate(events) if e.name == "run_start"), default=-1)
    for e in reversed(events[last_start + 1:]):
        if e.name == "run_end" and e.data.get("step") is not None:
            return e.data["step"]
    return next((e.data["step"] for e in reversed(events) if e.name == "step"), None)


def _ml_goodput(events: list[Event]) -> dict[str, Any] | None:
    """The run in ml-goodput-measurement's categories (:mod:`elastix.measure.mlgoodput`), or
    None when they cannot be computed from these events."""
    from elastix.measure import mlgoodput

    if not events:
        return None
    try:
        return mlgoodput.measure(events).to_json()
    except mlgoodput.NotComputable:
        return None
