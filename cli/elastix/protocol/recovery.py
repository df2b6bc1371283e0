"""The recovery point: the newest committed checkpoint, when it committed, and the steps done
since (what a stop now would cost), as both halves see it.

The GKE head publishes it on its own JobSet as three annotations
(``elastix_trainer.obs.recoverypoint``), so a scheduler choosing a victim, ``kubectl get jobset
-o yaml`` and ``elastix workload status`` read it without asking the trainer (kueue#477 asks
workloads for exactly this). The local backend folds the same value from the workload's events
file. Both fold the events with :class:`Tracker`, so they cannot disagree on what counts.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterable
from typing import Any

from elastix.protocol import eventspec, timefmt

LAST_COMMITTED_STEP = "elastix.dev/last-committed-step"
"""Annotation: the step of the newest checkpoint committed on storage (decimal)."""
LAST_COMMITTED_TIME = "elastix.dev/last-committed-time"
"""Annotation: when that checkpoint committed (RFC 3339 UTC, to the millisecond)."""
STEPS_AT_RISK = "elastix.dev/steps-at-risk"
"""Annotation: steps completed since that checkpoint, lost if the workload stopped now."""
ANNOTATIONS = (LAST_COMMITTED_STEP, LAST_COMMITTED_TIME, STEPS_AT_RISK)


@dataclasses.dataclass(frozen=True)
class RecoveryPoint:
    """Where a restart would resume, and what it would cost."""

    step: int
    """The newest committed checkpoint's step."""
    committed: dt.datetime | None
    """When it committed; None when only a restore named it (a new head restoring a checkpoint
    an earlier head committed leaves that head's time in place on GKE)."""
    steps_at_risk: int
    """Steps completed since that checkpoint."""

    def annotations(self) -> dict[str, str]:
        """The annotations to merge into the JobSet (no time: the key is left as it is)."""
        out = {LAST_COMMITTED_STEP: str(self.step), STEPS_AT_RISK: str(self.steps_at_risk)}
        if self.committed is not None:
            out[LAST_COMMITTED_TIME] = timefmt.iso_ms(self.committed)
        return out

    @classmethod
    def from_annotations(cls, annotations: dict[str, Any] | None) -> RecoveryPoint | None:
        """The recovery point a JobSet's annotations carry, or None (none, or unreadable)."""
        a = annotations or {}
        try:
            step = int(a[LAST_COMMITTED_STEP])
            at_risk = int(a.get(STEPS_AT_RISK) or 0)
            when = a.get(LAST_COMMITTED_TIME)
            return cls(step, timefmt.parse(when) if when else None, at_risk)
        except (KeyError, TypeError, ValueError):
            return None

    def line(self) -> str:
        """``recovery point: step 120 (committed 14:02:11Z, 7 steps at risk)``."""
        when = f"committed {self.committed:%H:%M:%S}Z" if self.committed else "commit time unknown"
        n = self.steps_at_risk
        return f"recovery point: step {self.step} ({when}, {n} step{'' if n == 1 else 's'} at risk)"


COMMIT, PROGRESS = "commit", "progress"
"""What :meth:`Tracker.add` says changed: the committed checkpoint, or only the steps at risk."""


class Tracker:
    """Folds trainer events (docs/events.md) into the recovery point, one record at a time.

    ``checkpoint_committed`` sets the checkpoint and its time; a ``restore`` or
    ``elastic_restored`` of a checkpoint sets the checkpoint too (an older one when a damaged
    newer step was skipped), with the time of its commit when these events saw it (a new
    head's restore of what an earlier head committed has none); ``step`` moves the last step
    completed, so the steps at risk (a rollback to a snapshot or a checkpoint lowers them).
    Nothing is known before the first commit or checkpoint restore.
    """

    def __init__(self) -> None:
        self.step: int | None = None
        self.committed: dt.datetime | None = None
        self.last_step: int | None = None
        self._times: dict[int, dt.datetime | None] = {}  # commit time by step

    def add(self, record: dict[str, Any]) -> str | None:
        """Take one event; :data:`COMMIT`, :data:`PROGRESS` or None (the point did not move)."""
        before = self.point()
        kind = record.get("event")
        step = record.get("step")
        if not isinstance(step, int):
            return None
        if kind == eventspec.CHECKPOINT_COMMITTED:
            self.step = step
            self.committed = self._times[step] = _time(record.get("ts"))
        elif kind in (eventspec.RESTORE, eventspec.ELASTIC_RESTORED):
            if record.get("source") == "checkpoint":
                self.step, self.committed = step, self._times.get(step)
            self.last_step = step
        elif kind == eventspec.STEP:
            self.last_step = step
        else:
            return None
        after = self.point()
        if after == before or after is None:
            return None
        if before is None or (after.step, after.committed) != (before.step, before.committed):
            return COMMIT
        return PROGRESS

    def point(self) -> RecoveryPoint | None:
        """The recovery point so far, or None before any checkpoint is known."""
        if self.step is None:
            return None
        at_risk = max(0, (self.last_step or 0) - self.step)
        return RecoveryPoint(self.step, self.committed, at_risk)


def of_records(records: Iterable[dict[str, Any]]) -> RecoveryPoint | None:
    """The recovery point of an events file's records (in file order)."""
    t = Tracker()
    for r in records:
        if isinstance(r, dict):
            t.add(r)
    return t.point()


_MOVES_CHECKPOINT = ('"checkpoint_committed"', '"restore"', '"elastic_restored"')
_STEP = ('"event": "step"', '"event":"step"')


def of_jsonl(lines: Iterable[str]) -> RecoveryPoint | None:
    """:func:`of_records` of an events file's lines, parsing only the lines that can move the
    point: the file grows by a ``step`` event a step, and of a run of those only the last one
    before the next commit or restore counts (a step only sets the last step completed)."""
    t, last_step = Tracker(), None

    def add(line: str) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            return  # a line being written now
        if isinstance(record, dict):
            t.add(record)

    for line in lines:
        if any(m in line for m in _MOVES_CHECKPOINT):
            if last_step is not None:
                add(last_step)
                last_step = None
            add(line)
        elif any(m in line for m in _STEP):
            last_step = line
    if last_step is not None:
        add(last_step)
    return t.point()


def _time(text: Any) -> dt.datetime | None:
    try:
        return timefmt.parse(text) if isinstance(text, str) else None
    except ValueError:
        return None
