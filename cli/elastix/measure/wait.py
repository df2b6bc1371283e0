"""``elastix workload wait``: poll a workload until a condition holds, on any backend.

Only the backend interface is used (``status``, and the trainer's events through
``Backend.trainer_events``: its events file or the head's log), so the local and the GKE
backend wait alike. Like ``kubectl wait``: the condition met is exit 0, the timeout a distinct code
(:attr:`ExitCode.TIMED_OUT`); unlike it, a workload that can no longer meet the condition (it
failed, or completed while ``running`` was awaited) ends the wait at once with its own code,
so a CI job does not sit out the timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from elastix.backends.base import Backend, WorkloadStatus
from elastix.errors import ElastixError, ExitCode, NotFoundError, OutcomeError
from elastix.measure.events import Event, events_of, recoveries
from elastix.measure.progress import Phase, resumed_complete, since_first_save, wait_phase

CONDITIONS = ("running", "stepping", "completed", "deleted")
_COMPLETED = ("Completed", "Succeeded")


def stepping(events: list[Event]) -> bool:
    """The trainer is in steady state: it completed a step after its first committed snapshot
    or checkpoint of this run, and is not mid-recovery.

    A kill from then on restores from that save, never from init (a kill right after the first
    step, as the first snapshot was copied, once restored from init and lost every step). A
    start-up ``restore`` of a saved step counts as a save: it is on storage. A stream without
    a ``run_start`` is another trainer's log (MaxText): it says nothing of its saves, so a step
    after the start is all that can be known.
    """
    starts = [i for i, e in enumerate(events) if e.name == "run_start"]
    run = since_first_save(events[starts[-1]:]) if starts else events
    if run is None or not any(e.name == "step" for e in run):
        return False
    # not mid-recovery: the last recovery stepped again. One cut short by the next (a fault
    # during its restore) never steps itself; the one after it ends both (a busy CI run's
    # wait, which asked every recovery to be complete, sat out its 200 s after such a cut).
    recs = recoveries(events)
    return not recs or recs[-1].complete


def _met(cond: str, name: str, st: WorkloadStatus, events: list[Event]) -> bool:
    """Whether ``cond`` holds now (``events``: the trainer's, read for ``stepping``); raises
    when it never can any more."""
    if st.state == "Failed":
        raise OutcomeError(ExitCode.DIED, f"workload {name} failed while waiting for it to be "
                           f"{cond}" + (f": {st.message}" if st.message else ""),
                           hint=f"see elastix logs {name} and elastix workload status {name}")
    if cond == "completed":
        return st.state in _COMPLETED
    if st.state in _COMPLETED:
        kept = resumed_complete(events)
        if kept is not None:  # the quickstart run again over a finished run's kept data
            raise OutcomeError(
                ExitCode.COMPLETED, f"workload {name} completed before it was {cond}: it "
                f"resumed its kept checkpoint of step {kept}, at or past its last step, and had "
                "no step to train", hint=f"start over: elastix workload delete {name} "
                "--delete-data, or create it again with --fresh")
        raise OutcomeError(ExitCode.COMPLETED, f"workload {name} completed before it was {cond}",
                           hint="give the job more steps (or wait --for completed)")
    if cond == "running":
        return st.state == "Running"
    return stepping(events)


def _why_completed(backend: Backend, name: str) -> list[Event]:
    """The trainer's events of a workload that completed before the awaited condition, to
    say why (a kept checkpoint already at its last step); none when they cannot be read:
    the exit code is 5 either way."""
    try:
        return events_of(backend.trainer_events(name, cheap=True))[0]
    except ElastixError:
        return []


def _deletion(st: WorkloadStatus) -> Phase:
    """A wait for ``deleted``: its pods stopping once the workload is being deleted; before
    that, nothing the wait waits for is under way, and the line says so (it said "stopping
    pods" of a workload that nobody had deleted)."""
    if st.state == "Terminating":
        return wait_phase(None, [])
    return Phase(f"not being deleted (it is {st.state})")


def wait_for(backend: Backend, name: str, cond: str, *, timeout: float, poll: float = 1.0,
             clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep,
             report: Callable[[Phase], None] | None = None) -> WorkloadStatus | None:
    """Wait until workload ``name`` is ``cond`` (one of :data:`CONDITIONS`).

    Returns the status that met it (None for ``deleted``). ``report`` is told the phase
    (:func:`~elastix.measure.progress.wait_phase`) before each sleep: what the wait waits for.

    Raises:
        NotFoundError: the workload does not exist (when not waiting for ``deleted``).
        OutcomeError: exit 4 it failed or was deleted, 5 it completed before ``running`` or
            ``stepping``, 6 ``timeout`` seconds passed first.
    """
    deadline = clock() + timeout
    seen = False
    while True:
        try:
            st = backend.status(name)
            seen = True
            # the trainer's events: what stepping is judged on; for a report of a wait for
            # completion, the cheapest read (GKE: the head's log, not the bucket); a wait for
            # running or deleted needs none (its phases are the pods')
            # a finished workload is judged on its state alone, before any read (a failed
            # one is exit 4 even when its trainer's events can no longer be read)
            running = st.state not in ("Failed", *_COMPLETED)
            events = events_of(backend.trainer_events(name))[0] \
                if cond == "stepping" and running \
                else events_of(backend.trainer_events(name, cheap=True))[0] \
                if report is not None and cond == "completed" and st.state == "Running" \
                else _why_completed(backend, name) if cond in ("running", "stepping") \
                and st.state in _COMPLETED else []
        except NotFoundError:  # deleted between the status and its events is deleted too
            if cond == "deleted":
                return None
            if not seen or backend.exists(name):  # there, its head pod not: said as it is
                raise
            raise OutcomeError(ExitCode.DIED, f"workload {name} was deleted while waiting for "
                               f"it to be {cond}") from None
        if cond != "deleted" and _met(cond, name, st, events):
            return st
        if clock() >= deadline:
            why = f"; {st.reasons[0]}" if st.reasons else ""
            raise OutcomeError(ExitCode.TIMED_OUT, f"timed out after {timeout:g} s waiting for "
                               f"workload {name} to be {cond} (it is {st.state}{why})",
                               hint=f"see elastix workload status {name}, or raise --timeout")
        if report is not None:
            report(_deletion(st) if cond == "deleted" else wait_phase(st, events))
        sleep(poll)
