"""``chaos run --verify``: did the recoveries lose anything? The run's losses, step by step,
against those of an uninterrupted reference run of the same job.

A recovery that restored the wrong state, skipped a batch or replayed one trains on, with its
downtime and steps lost looking fine; only the losses tell. After a recovery the trainer redoes
the steps from the restored one, so a step can be logged more than once: the run's trajectory is
the *last* loss logged for each step, the one the final model followed (:func:`trajectory`).
Where training is deterministic (the same devices and mesh, as a pause-resume recovery keeps
them) those losses equal the reference's bit for bit; elsewhere within ``--loss-tolerance``.

The losses come from the trainer's events file (every digit), or from its log lines, which
print 4 decimals (``loss: {loss:.4f}``; a MaxText log, 3): compared from a log, a tolerance
finer than half the last digit cannot be told from rounding and is refused.

:func:`trajectory` and :func:`compare` are pure; :func:`verify` drives a backend (its
interface only): it starts the reference (``Backend.clone``) once the chaos run is over, or
reads one the user made (``--reference``), waits until it reaches the run's last step, compares,
and deletes the reference it made, with its data.
"""

from __future__ import annotations

import dataclasses
import math
import re
import string
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from elastix.errors import ElastixError
from elastix.measure.events import events_of
from elastix.measure.report import DEAD_STATES, Violation
from elastix.protocol import eventspec

if TYPE_CHECKING:
    from elastix.backends.base import Backend, TrainerEvents
    from elastix.measure.report import ChaosReport


def _loss_pattern() -> re.Pattern[str]:
    """The loss of a step line: the text before ``{loss}`` in the step template, then a number."""
    parts = string.Formatter().parse(eventspec.EVENTS[eventspec.STEP].template)
    lead = next(lit for lit, field, _, _ in parts if field == "loss")
    return re.compile(re.escape(lead) + r"([-+]?(?:nan|inf|\d+(?:\.(\d*))?(?:[eE][-+]?\d+)?))",
                      re.IGNORECASE)


_STEP = eventspec.pattern(eventspec.STEP)
_LOSS = _loss_pattern()


@dataclasses.dataclass(frozen=True)
class Trajectory:
    """A run's loss at each step, as it stands: the last value logged for each."""

    losses: dict[int, float]
    source: str
    """``events`` (every digit) or ``log`` (``decimals`` of them)."""
    decimals: int | None = None
    """A log: the fewest decimals a loss was printed with."""
    redone: tuple[int, ...] = ()
    """Steps logged more than once (redone after a recovery or a restart)."""
    restored: tuple[tuple[int, str], ...] = ()
    """Saved steps it restored (step, source): at start-up or in a recovery."""
    ended: str | None = None
    """Set by the caller: the workload's state when it stopped before the step awaited."""

    def interruption(self, upto: int) -> str | None:
        """What made steps 1..``upto`` other than one uninterrupted run's, as a clause; None
        when nothing did (a recovery after ``upto`` changes none of them)."""
        r = next(((s, src) for s, src in self.restored if s < upto), None)
        if r is not None:
            return f"it restored step {r[0]} from {r[1]}"
        again = next((s for s in self.redone if s <= upto), None)
        if again is not None:
            return f"it logged step {again} twice (a step redone after a recovery)"
        return None

    @property
    def last_step(self) -> int | None:
        return max(self.losses) if self.losses else None

    @property
    def resolution(self) -> float:
        """Half the last printed digit: what rounding may hide (0 for an events file)."""
        return 0.0 if self.decimals is None else 0.5 * 10.0 ** -self.decimals


def trajectory(got: TrainerEvents | None) -> Trajectory:
    """The losses of a backend's trainer events (``Backend.trainer_events``): the raw records'
    ``loss`` (normalisation drops it), else each step line's; the last value of each step."""
    losses: dict[int, float] = {}
    redone: set[int] = set()
    decimals: int | None = None

    def add(step: int, loss: float) -> None:
        if step in losses:
            redone.add(step)
        losses[step] = loss

    if got is not None and got.records is not None:
        for rec in got.records:
            if rec.get("event") == eventspec.STEP and isinstance(rec.get("step"), int) \
                    and isinstance(rec.get("loss"), (int, float)):
                add(rec["step"], float(rec["loss"]))
        source = "events"
    else:
        source = "log"
        for line in got.lines or [] if got is not None else []:
            sm = _STEP.search(line)
            lm = _LOSS.search(line, sm.end()) if sm else None
            if lm is None:
                continue
            add(int(sm.group(1)), float(lm.group(1)))
            d = len(lm.group(2) or "")
            decimals = d if decimals is None else min(decimals, d)
    restored = tuple((e.data["step"], str(e.data.get("source")))
                     for e in events_of(got)[0] if e.name in ("restore", "elastic_restored")
                     and (e.data.get("step") or 0) > 0)
    return Trajectory(losses, source, decimals, tuple(sorted(redone)), restored)


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """The first step whose losses differ beyond the tolerance."""

    step: int
    run: float
    reference: float
    diff: float


@dataclasses.dataclass(frozen=True)
class Verification:
    """The run's losses against the reference's (``ChaosReport.verify``)."""

    ok: bool
    reference: str
    tolerance: float
    source: str
    """``events``, or ``log (N decimals)`` when either side's losses came from a log."""
    last_step: int | None = None
    """The run's last step: steps 1 to it are compared."""
    steps_compared: int = 0
    first_mismatch: Mismatch | None = None
    mismatches: int = 0
    max_abs_diff: float | None = None
    reason: str | None = None
    """Why nothing could be compared (``ok`` is then False)."""
    timed_out: bool = False
    """The reference did not reach the run's last step within the timeout: an error, not a
    verdict."""
    not_logged: tuple[int, ...] = ()
    """Steps 1..last the run never logged (a recovery's skipped steps): not compared."""
    not_in_reference: tuple[int, ...] = ()
    """Steps the run logged that the reference did not: not compared."""
    allow_gaps: bool = False
    """Steps not compared do not fail the verification (``--allow-unverified-steps``)."""

    def gaps(self) -> str | None:
        """The steps not compared, on either side, as a clause; None when every step was."""
        parts = [f"{_ranges(s)} not logged by {who}" for s, who in (
            (self.not_logged, "the run"), (self.not_in_reference, "the reference")) if s]
        return "; ".join(parts) or None

    def text(self) -> str:
        """One line: the verdict, the first differing step with both losses, or the reason."""
        ref = f"reference {self.reference}"
        if self.reason is not None:
            return f"verify: could not compare with {ref}: {self.reason}"
        gaps = self.gaps()
        m = self.first_mismatch
        if m is None and gaps and not self.allow_gaps:
            return (f"verify: compared {self.steps_compared} of the {self.last_step} steps with "
                    f"{ref}: {gaps} (--allow-unverified-steps accepts that)")
        if m is not None:
            return (f"verify: step {m.step} differs from {ref}: loss {_num(m.run)} (run) vs "
                    f"{_num(m.reference)} ({ref}), |diff| {_num(m.diff, 3)} > "
                    f"{self.tolerance:g}; {self.mismatches} of {self.steps_compared} steps "
                    "differ")
        how = "bitwise equal to" if self.tolerance == 0 else (
            f"within {self.tolerance:g} (max |diff| {_num(self.max_abs_diff or 0.0, 3)}) of")
        every = "all " if self.steps_compared == self.last_step else ""
        return (f"verify: losses {how} {ref}'s at {every}{self.steps_compared} steps up to "
                f"{self.last_step} ({self.source})" + (f"; not compared: {gaps}" if gaps else ""))

    def violation(self) -> Violation:
        """The missed bound, as the report lists it (kill 0: the run as a whole)."""
        diff = self.first_mismatch.diff if self.first_mismatch else None
        if self.first_mismatch is None and self.reason is None and self.gaps():
            return Violation(0, "verify", self.last_step, self.steps_compared,
                             detail=self.text().removeprefix("verify: "))
        return Violation(0, "verify", self.tolerance, _finite(diff),
                         detail=self.text().removeprefix("verify: "))

    def to_json(self) -> dict[str, Any]:
        m = self.first_mismatch
        return {"ok": self.ok, "reference": self.reference,
                "steps_compared": self.steps_compared, "last_step": self.last_step,
                "first_mismatch": None if m is None else {
                    "step": m.step, "run": _finite(m.run), "reference": _finite(m.reference)},
                "mismatches": self.mismatches, "max_abs_diff": self.max_abs_diff,
                "tolerance": self.tolerance, "source": self.source, "reason": self.reason,
                "not_logged": list(self.not_logged),
                "not_in_reference": list(self.not_in_reference),
                "allow_unverified_steps": self.allow_gaps}


def _ranges(steps: tuple[int, ...]) -> str:
    """``steps 26-27, 40``: consecutive steps as ranges."""
    runs: list[list[int]] = []
    for s in sorted(steps):
        if runs and s == runs[-1][1] + 1:
            runs[-1][1] = s
        else:
            runs.append([s, s])
    words = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs]
    return ("step " if len(steps) == 1 else "steps ") + ", ".join(words)


def _num(v: float, digits: int | None = None) -> str:
    if not math.isfinite(v):
        return str(v)
    return repr(v) if digits is None else f"{v:.{digits}g}"


def _finite(v: float | None) -> float | str | None:
    """A float for JSON: ``nan``/``inf`` as strings (JSON has no such numbers)."""
    return v if v is None or math.isfinite(v) else str(v)


def check_tolerance(tolerance: float, source: Trajectory) -> str | None:
    """Why ``tolerance`` is too fine for losses read as ``source`` has them, or None."""
    need = source.resolution or (0.0 if source.source == "events" else 5e-5)
    if tolerance >= need:
        return None
    digits = source.decimals if source.decimals is not None else 4
    return (f"its losses come from log lines, which print {digits} decimals: a difference "
            f"under {need:g} cannot be told from rounding")


def compare(run: Trajectory, ref: Trajectory, tolerance: float, reference: str,
            upto: int | None = None, allow_gaps: bool = False) -> Verification:
    """The run's loss at each step 1..``upto`` (default its last) against the reference's.

    Equal within ``tolerance`` (absolute; 0: bitwise-equal floats; losses read from a log are
    compared as printed, their difference rounded to the digits printed). The reference must
    have reached that step without being interrupted itself. A step either side did not log
    (a recovery's skipped steps: ``steps_skipped``) is named, and fails the verification
    unless ``allow_gaps``.
    """
    last = run.last_step if upto is None else upto
    logged = [t for t in (run, ref) if t.source == "log"]
    source = "events" if not logged else (
        f"log ({min(t.decimals if t.decimals is not None else 4 for t in logged)} decimals)")

    def cannot(why: str) -> Verification:
        return Verification(False, reference, tolerance, source, last, reason=why)

    if last is None:
        return cannot("the run logged no step")
    broke = ref.interruption(last)
    if broke is not None:
        return cannot(f"the reference was not uninterrupted: {broke}")
    if ref.last_step is None or ref.last_step < last:
        return cannot(f"it reached step {ref.last_step or 0}, not the run's last step {last}"
                      + (f" ({ref.ended})" if ref.ended else ""))
    for t in logged:
        why = check_tolerance(tolerance, t)
        if why is not None:
            return cannot(why.replace("its losses", "losses", 1))
    digits = min((t.decimals for t in logged if t.decimals is not None), default=None)
    steps = [s for s in sorted(run.losses) if s <= last and s in ref.losses]
    if not steps:
        return cannot(f"no step up to {last} was logged by both")
    first, bad, worst = None, 0, None
    for s in steps:
        a, b = run.losses[s], ref.losses[s]
        same = a == b or (math.isnan(a) and math.isnan(b))
        diff = 0.0 if same else abs(a - b)
        if digits is not None and math.isfinite(diff):
            diff = round(diff, digits)
        if math.isfinite(diff):
            worst = diff if worst is None else max(worst, diff)
        if not same and not diff <= tolerance:  # a NaN diff is no match
            bad += 1
            first = first or Mismatch(s, a, b, diff)
    not_logged = tuple(s for s in range(1, last + 1) if s not in run.losses)
    not_in_ref = tuple(s for s in sorted(run.losses) if s <= last and s not in ref.losses)
    ok = bad == 0 and (allow_gaps or not (not_logged or not_in_ref))
    return Verification(ok, reference, tolerance, source, last, len(steps), first, bad,
                        worst, not_logged=not_logged, not_in_reference=not_in_ref,
                        allow_gaps=allow_gaps)


# --------------------------------------------------------------------------- the reference


def verify(backend: Backend, name: str, *, reference: str | None, tolerance: float,
           timeout: float, keep: bool = False, allow_gaps: bool = False,
           say: Callable[[str], None] = lambda _: None,
           poll: float = 1.0, clock: Callable[[], float] = time.monotonic,
           sleep: Callable[[float], None] = time.sleep,
           progress: Callable[[str], None] = lambda _: None) -> Verification:
    """Compare workload ``name``'s losses with a reference's, up to its last step so far.

    ``reference``: a workload the user made (only its events are read; never deleted); None:
    start one (``Backend.clone``), and delete it with its data afterwards, whatever happens
    (Ctrl-C too), unless ``keep``. The reference is awaited until it reaches the run's last
    step, stops, or ``timeout`` seconds pass (then ``timed_out``). ``say`` reports what it
    does; ``progress`` where the reference is while it is awaited (:func:`reference_phase`).
    """
    run = trajectory(backend.trainer_events(name))
    last = run.last_step
    made = reference is None
    if last is None:
        return compare(run, run, tolerance, reference or "-")  # says: no step
    ref = backend.clone(name) if reference is None else reference
    say(f"{'started' if made else 'reading'} reference {ref}: the same job, uninterrupted, "
        f"to step {last}")
    try:
        got = _await(backend, ref, last, timeout, poll, clock, sleep, progress)
        if isinstance(got, str):
            return Verification(False, ref, tolerance, run.source, last, reason=got,
                                timed_out=True)
        run = trajectory(backend.trainer_events(name))  # read again: the last values
        return compare(run, got, tolerance, ref, upto=last, allow_gaps=allow_gaps)
    finally:
        if made and not keep:
            say(f"deleting reference {ref} and its data")
            backend.delete(ref, wait=True, delete_data=True)
        elif made:
            say(f"kept reference {ref}: elastix workload delete {ref} --delete-data removes "
                "it and its data")


def reference_phase(step: int | None, last: int) -> str:
    """Where the reference is, in at most about ten words a run: ``starting``, then ``past
    step 120 of 1195`` by tenths of the target (a CI log gets a line a tenth, not a poll)."""
    if step is None:
        return f"starting (the target is step {last})"
    tenth = max(last // 10, 1)
    return f"past step {min(step // tenth * tenth, last)} of {last}"


def _await(backend: Backend, ref: str, last: int, timeout: float, poll: float,
           clock: Callable[[], float], sleep: Callable[[float], None],
           progress: Callable[[str], None] = lambda _: None) -> Trajectory | str:
    """The reference's trajectory once it reached step ``last``, was interrupted or stopped;
    or why it was given up (the timeout)."""
    deadline = clock() + timeout
    while True:
        try:
            got = trajectory(backend.trainer_events(ref))
            state = backend.status(ref).state
        except ElastixError as err:
            return Trajectory({}, "events", ended=f"it cannot be read: {err.message}")
        progress(reference_phase(got.last_step, last))
        done = got.last_step is not None and got.last_step >= last
        if done or got.interruption(last) is not None:
            return got
        if state in DEAD_STATES:
            return dataclasses.replace(got, ended=f"it is {state}")
        if clock() >= deadline:
            return (f"it was at step {got.last_step or 0} of {last} when the timeout "
                    f"({timeout:g} s) passed")
        sleep(poll)


def attach(res: ChaosReport, v: Verification) -> None:
    """Put the verification in the report: a mismatch, or nothing to compare, is a missed
    bound (exit 3); a reference that did not get there in time is an error (exit 1)."""
    res.verify = v
    if v.ok:
        return
    if v.timed_out:
        res.error = v.text()
    else:
        res.violations.append(v.violation())
