"""How training is going, for ``workload list`` and ``status``: from the trainer's events.

The pods say whether a workload runs; only the trainer's events say whether it trains: the
last step and how long ago it completed (a stuck trainer shows as a growing age beside
Running pods), the step time, the loss, the goodput so far and the recoveries it made. The
same normalised events as every measurement (:mod:`elastix.measure.events`), so these numbers
and ``elastix workload goodput`` never disagree. On GKE the events are read from the head pod's
log lines (the same events, docs/events.md), the same columns for both backends: which source
is the backend's choice (``Backend.trainer_events``), not this module's.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from typing import Any

from elastix.backends.base import Backend, KillRecord, TrainerEvents, WorkloadStatus
from elastix.errors import ElastixError
from elastix.measure.events import Event, events_of, fmt_ms, ms_of, recoveries
from elastix.measure.goodput import goodput

RECENT_STEPS = 20
"""Step time is the median of this many last steps: one slow step (a save, a resize) is not
the run's pace."""


@dataclasses.dataclass(frozen=True)
class Recovering:
    """A recovery under way: its events began, its first step has not come yet."""

    index: int
    phase: str
    """Where it is, by its last event: ``cleanup`` (detected), ``waiting for slices``,
    ``restore``, ``first step`` (restored, compiling); a restart: ``restore``, ``first step``."""
    phase_since: int
    """When that phase began (ms since the epoch)."""
    since: int
    """When the recovery began (``elastic_detected``, or the new process's ``run_start``)."""
    lost_slices: list[int] = dataclasses.field(default_factory=list)
    """The slices lost, and lost again while it waited."""


@dataclasses.dataclass(frozen=True)
class Progress:
    """Training as the events tell it; every value None when the events do not say."""

    last_step: int | None = None
    last_step_at: int | None = None
    """When the last step completed (ms since the epoch)."""
    step_seconds: float | None = None
    loss: float | None = None
    goodput: float | None = None
    recoveries: int | None = 0
    """None where only the log's last lines were read (``list`` on GKE)."""
    live_slices: int | None = None
    recovering: Recovering | None = None
    """A recovery under way (the last step and its slices are from before it), else None."""
    skipped: int = 0
    """Torn lines of the events file skipped to read them (half a record, NUL bytes)."""
    unreadable: str | None = None
    """Why the trainer's events could not be read at all (every other value is then None):
    not the same as nothing to read yet, which is no ``Progress``."""
    failed_saves: int = 0
    """Checkpoint saves that failed since the newest one that committed (training goes on, and
    every step since that commit is at risk)."""
    last_committed: int | None = None
    """The step of the newest committed checkpoint, when the events say."""
    last_save_error: str | None = None
    """The newest failed save's ``step N: error`` (when ``failed_saves``)."""
    resumed_complete: int | None = None
    """The step of the kept checkpoint the trainer resumed and then completed without training
    a step: it was at or past the run's last step (a finished run's data, kept by ``delete``).
    None for any other run."""

    def seconds_since_step(self, now_ms: int) -> float | None:
        return None if self.last_step_at is None else max(0.0, (now_ms - self.last_step_at) / 1000)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["last_step_at"] = fmt_ms(self.last_step_at) if self.last_step_at is not None else None
        if self.recovering is not None:
            out["recovering"].update(phase_since=fmt_ms(self.recovering.phase_since),
                                     since=fmt_ms(self.recovering.since))
        return out


def progress(events: list[Event], loss: float | None = None) -> Progress:
    """The progress in ``events`` (an empty ``Progress`` when no step completed); ``loss``
    is the last step's, which only a record carries (measurement reads no loss from lines)."""
    steps = [e for e in events if e.name == "step"]
    saves = _saves(events)
    if not steps:
        return Progress(recoveries=len(recoveries(events)) if events else 0,
                        resumed_complete=resumed_complete(events), **saves)
    last = steps[-1]
    recent = [e.data.get("seconds") for e in steps[-RECENT_STEPS:]]
    recent = [s for s in recent if isinstance(s, (int, float))]
    report = goodput(events)
    return Progress(last_step=last.data.get("step"), last_step_at=last.t,
                    step_seconds=statistics.median(recent) if recent else None,
                    loss=loss, goodput=report.goodput,
                    recoveries=len(report.recoveries), live_slices=last.data.get("live_slices"),
                    recovering=recovering(events), **saves)


def resumed_complete(events: list[Event]) -> int | None:
    """The step of the checkpoint the last run restored at start-up when it then completed
    with no step of its own: the kept checkpoint was at or past its last step. Else None."""
    starts = [i for i, e in enumerate(events) if e.name == "run_start"]
    run = events[starts[-1]:] if starts else events
    restored = next((e for e in run if e.name == "restore"), None)
    end = next((e for e in run if e.name == "run_end"), None)
    if restored is None or end is None or end.data.get("status") != "completed" \
            or any(e.name == "step" for e in run):
        return None
    return restored.data.get("step")


def _saves(events: list[Event]) -> dict[str, Any]:
    """:class:`Progress`'s save fields: failures since the newest commit, and that commit."""
    failed, committed, error = 0, None, None
    for e in events:
        if e.name == "checkpoint_committed":
            failed, committed, error = 0, e.data.get("step"), None
        elif e.name == "checkpoint_save_failed":
            failed += 1
            error = f"step {e.data.get('step')}: {e.data.get('error') or 'unknown error'}"
    return {"failed_saves": failed, "last_committed": committed, "last_save_error": error}


def recovering(events: list[Event]) -> Recovering | None:
    """The recovery under way at the end of ``events``: the last one, not complete, and no
    ``run_end`` since it began (a trainer that gave up is not recovering)."""
    recs = recoveries(events)
    if not recs or recs[-1].complete or recs[-1].start is None:
        return None
    rec = recs[-1]
    if any(e.name == "run_end" and e.t >= rec.start for e in events):
        return None
    points = ([("restore", rec.start), ("first step", rec.restored)] if rec.kind == "restart"
              else [("cleanup", rec.start), ("waiting for slices", rec.cleanup_done),
                    ("restore", rec.slices_ready), ("first step", rec.restored)])
    phase, since = [(n, t) for n, t in points if t is not None][-1]
    lost = set(rec.lost_slices or []) | {s for _, again in rec.lost_again for s in again}
    return Recovering(index=rec.index, phase=phase, phase_since=since, since=rec.start,
                      lost_slices=sorted(lost))


def read_progress(backend: Backend, name: str, *, whole: bool = False) -> Progress | None:
    """The workload's progress, or None when there is nothing to read yet (its
    ``unreadable`` says why when the events are there but cannot be read).

    From the backend's cheapest read of the trainer's events (``Backend.trainer_events``:
    locally its events file; on GKE the head pod's log, ``whole`` for ``status``, the last
    lines for ``list``: the events file is in a bucket, a JobSet read and a download per
    workload and refresh, where the log is one request). The goodput and the recoveries are
    the run's so far only when the events reach its start; from a tail they would be the
    tail's, so they are left out (None) rather than shown as the run's.
    """
    try:
        got = backend.trainer_events(name, tail=not whole, cheap=True)
        if got is None:
            return None
        p = progress(events_of(got)[0], last_loss(got))
    except (ElastixError, OSError, ValueError) as err:
        # the pods' view still shows; the training line says the events are there, unread
        why = getattr(err, "message", None) or str(err) or type(err).__name__
        return Progress(recoveries=None, unreadable=why.splitlines()[0])
    p = dataclasses.replace(p, skipped=got.skipped)
    return p if got.from_start else dataclasses.replace(p, goodput=None, recoveries=None)


# The loss at the end of a ``completed step`` line: elastix's template (eventspec's ``step``,
# after its measured values) and MaxText's (``..., total_weights: N, loss: X``) both end so.
_LOSS = re.compile(r"\bcompleted step: \d+,.*\bloss: ([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))")


def last_loss(got: TrainerEvents) -> float | None:
    """The last step's loss, which only a record or a line carries (normalised events have
    none: measurement reads no loss)."""
    if got.records is not None:
        loss = next((r.get("loss") for r in reversed(got.records)
                     if isinstance(r, dict) and r.get("event") == "step"), None)
        return loss if isinstance(loss, (int, float)) else None
    for line in reversed(got.lines or []):
        m = _LOSS.search(line)
        if m:
            return float(m.group(1))
    return None


@dataclasses.dataclass(frozen=True)
class Phase:
    """Where a wait stands, for the line that says what it waits for (:func:`wait_phase`)."""

    what: str
    """``starting``, ``starting the trainer``, ``compiling``, ``waiting for the first save``,
    ``stepping``, ``killed POD``, ``recovering: PHASE`` (as ``status --watch`` names it),
    ``stopping pods``; or a caller's own (``stepping until fault 2 at 12:03:00``)."""
    since: int | None = None
    """When it began (ms since the epoch), when the events or the fault say; None: the
    reporter counts from when it first saw it."""


def since_first_save(run: list[Event]) -> list[Event] | None:
    """The events of ``run`` (one run's: from its ``run_start`` on) after its first save, or
    None before it. A save is a committed snapshot or checkpoint, or a start-up ``restore`` of
    a saved step (it is on storage): a kill from then on restores from it, never from init.
    ``workload wait --for stepping`` (:func:`elastix.measure.wait.stepping`) and the phase every
    wait reports (:func:`wait_phase`) judge the first save by this one rule."""
    saved = next((i for i, e in enumerate(run) if e.name in ("snapshot_taken",
                  "checkpoint_committed") or (e.name == "restore" and
                                              (e.data.get("step") or 0) > 0)), None)
    return None if saved is None else run[saved + 1:]


def wait_phase(st: WorkloadStatus | None, events: list[Event], *,
               killed: list[KillRecord] | None = None) -> Phase:
    """The phase a workload is in, from its status and its trainer's events: what every wait
    (``workload wait``, ``chaos``, ``delete --wait``) says it waits for.

    ``st`` None: waiting for pods to go (``delete --wait``). ``killed``: the faults just made
    (their first's time bounds the events that count as their recovery's): until the trainer
    notices (its ``elastic_detected``, or a restarted head's ``run_start``) the phase is
    ``killed POD``. A recovery under way is named as ``status --watch`` names it.
    """
    if st is None:
        return Phase("stopping pods")
    if killed:
        kill = ms_of(killed[0].time)
        if not any(e.t >= kill and e.name in ("elastic_detected", "run_start") for e in events):
            verb = {"term": "terminated", "hang": "stopped"}.get(
                (killed[0].fault or "kill").split(" ", 1)[0], "killed")
            return Phase(f"{verb} {', '.join(k.pod for k in killed)}", kill)
    rec = recovering(events)
    if rec is not None:
        return Phase(f"recovering: {rec.phase}", rec.phase_since)
    pods = [p for s in st.slices for p in s.pods] + ([st.head] if st.head else [])
    starts = [i for i, e in enumerate(events) if e.name == "run_start"]
    # Pods not all running are the start only before the trainer started: after it, a slice
    # left out (replica-resize) may stay pending while training steps on without it.
    if st.state != "Running" or not pods or (
            not starts and any(p.phase != "Running" for p in pods)):
        return Phase("starting")
    run = events[starts[-1]:] if starts else events
    steps = [e for e in run if e.name == "step"]
    if not steps:
        return Phase("compiling", run[0].t) if starts else Phase("starting the trainer")
    after = since_first_save(run)
    # stepping as ``workload wait --for stepping`` means it (measure.wait.stepping): a step
    # after the first save, not the save alone (a busy CI run's wait once said "stepping"
    # between the two while it still waited for stepping)
    if starts and (after is None or not any(e.name == "step" for e in after)):
        return Phase("waiting for the first save", steps[0].t)
    return Phase("stepping")
