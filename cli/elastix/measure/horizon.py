"""Whether a chaos plan fits the run it is aimed at: a plan whose last fault is due after the
trainer's last step would end with the workload completed (exit 5) and faults never made
(``chaos run --mtbf 5m --kills 10`` on a 5-minute job plans faults 20 minutes out).

The run's end is read from its own events: the ``steps`` of its ``run_start`` config and its
recent pace (wall seconds a step, saves included). Recoveries only push the end later, so a
plan past this end is past it by at least that much. A trainer that says no step count (a
MaxText log) is not judged.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from elastix.measure.events import Event
from elastix.measure.plan import Plan

PACE_STEPS = 50
"""The last steps the pace is taken over."""


@dataclasses.dataclass(frozen=True)
class Left:
    """What is left of a run: steps to its last, at ``pace`` seconds a step."""

    steps: int
    pace: float

    @property
    def seconds(self) -> float:
        return self.steps * self.pace


def run_left(events: list[Event], records: list[dict[str, Any]] | None) -> Left | None:
    """What is left of the current run at its recent pace (``records``: the raw events, for
    the ``run_start`` config); None when it says no step count or has not stepped twice."""
    start = max((i for i, e in enumerate(events) if e.name == "run_start"), default=None)
    cfg = next((r.get("config") for r in reversed(records or [])
                if r.get("event") == "run_start"), None)
    if start is None:
        return None
    total = cfg.get("steps") if isinstance(cfg, dict) else None
    steps = [(e.t, e.data["step"]) for e in events[start:] if e.name == "step"
             and isinstance(e.data.get("step"), int)][-PACE_STEPS:]
    if not isinstance(total, int) or isinstance(total, bool) or len(steps) < 2:
        return None
    (t0, s0), (t1, s1) = steps[0], steps[-1]
    if s1 <= s0:
        return None
    return Left(max(0, total - s1), (t1 - t0) / 1000 / (s1 - s0))


def plan_reach(plan: Plan) -> float | None:
    """Seconds after the run is first seen stepping that the plan's last fault is due, at the
    earliest: a schedule's (``--mtbf``, ``--schedule``, a plan file's ``at``) last time, or
    the intervals of un-aimed rounds added up (each also waits for the recovery before it).
    None when its rounds wait for moments or steps."""
    ats = [r.at for r in plan.rounds if r.at is not None]
    if ats:
        return max(ats)
    if all(r.at is None and r.step is None and r.during is None and not r.after
           for r in plan.rounds):
        return sum(r.interval or 0.0 for r in plan.rounds)
    return None


def outlasts(plan: Plan, events: list[Event], records: list[dict[str, Any]] | None,
             name: str) -> tuple[str, str] | None:
    """(message, hint) when the plan's last fault is due after the run's last step; None when
    it fits, or either is unknown."""
    reach, left = plan_reach(plan), run_left(events, records)
    if reach is None or left is None or reach <= left.seconds:
        return None
    return (f"the plan's last fault is due {reach:.0f} s after stepping, but {name} ends in "
            f"about {left.seconds:.0f} s ({left.steps} steps left at {left.pace:.3f} s a "
            "step): a fault due after that is never made",
            "plan fewer or closer faults (--kills, --mtbf, --interval), or run a longer job "
            "(workload create NAME --replace with more --steps in its --command)")
