"""How training is going, for ``workload list`` and ``status``: from the trainer's events.

The pods say whether a workload runs; only the trainer's events say whether it trains: the
last step and how long ago it completed (a stuck trainer shows as a growing age beside
Running pods), the step time, the loss, the goodput so far and the recoveries it made. The
same normalised events as every measurement (:mod:`elastix.measure.events`), so these numbers
and ``elastix workload goodput`` never disagree.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

from elastix.backends.base import Backend
from elastix.errors import ElastixError
from elastix.measure.events import Event, events_from_records, fmt_ms, recoveries
from elastix.measure.goodput import goodput

RECENT_STEPS = 20
"""Step time is the median of this many last steps: one slow step (a save, a resize) is not
the run's pace."""


@dataclasses.dataclass(frozen=True)
class Progress:
    """Training as the events tell it; every value None when the events do not say."""

    last_step: int | None = None
    last_step_at: int | None = None
    """When the last step completed (ms since the epoch)."""
    step_seconds: float | None = None
    loss: float | None = None
    goodput: float | None = None
    recoveries: int = 0
    live_slices: int | None = None

    def seconds_since_step(self, now_ms: int) -> float | None:
        return None if self.last_step_at is None else max(0.0, (now_ms - self.last_step_at) / 1000)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["last_step_at"] = fmt_ms(self.last_step_at) if self.last_step_at is not None else None
        return out


def progress(events: list[Event], loss: float | None = None) -> Progress:
    """The progress in ``events`` (an empty ``Progress`` when no step completed); ``loss``
    is the last step's, which only a record carries (measurement reads no loss from lines)."""
    steps = [e for e in events if e.name == "step"]
    if not steps:
        return Progress(recoveries=len(recoveries(events)) if events else 0)
    last = steps[-1]
    recent = [e.data.get("seconds") for e in steps[-RECENT_STEPS:]]
    recent = [s for s in recent if isinstance(s, (int, float))]
    report = goodput(events)
    return Progress(last_step=last.data.get("step"), last_step_at=last.t,
                    step_seconds=statistics.median(recent) if recent else None,
                    loss=loss, goodput=report.goodput,
                    recoveries=len(report.recoveries), live_slices=last.data.get("live_slices"))


def read_progress(backend: Backend, name: str) -> Progress | bool | None:
    """The workload's progress from its events file; None when it has none to read; False
    where reading it is not cheap (no log is scanned: ``list`` asks for every workload, and a
    log is the whole run).

    Only the local backend's events are a local file. On GKE each workload's events object
    would cost a JobSet read and a download per workload and refresh (``list`` and ``status``
    keep to one list per kind, ``tests/backends/gke/test_scale_requests.py``): not shown there.
    """
    if backend.name != "local":
        return False
    try:
        records = backend.read_events(name)
        if records is None:
            return None
        loss = next((r.get("loss") for r in reversed(records)
                     if isinstance(r, dict) and r.get("event") == "step"), None)
        return progress(events_from_records(records),
                        loss if isinstance(loss, (int, float)) else None)
    except (ElastixError, OSError, ValueError):
        return None  # the pods' view still shows; the events are a bonus here
