"""Advice from measurements: the checkpoint and snapshot periods a run's own numbers call for.

Nothing in the anchors turns their measurements into a setting. ``elastix workload advise``
reads what a run measured (a save's stall, a snapshot's stall, a recovery's downtime, the step
time, and the failures it saw, or ``--mtbf``) and gives the first-order optimum of Young
(J. W. Young, "A first order approximation to the optimum checkpoint interval", CACM 17(9),
1974) as Daly restated it (J. T. Daly, "A higher order estimate of the optimum
checkpoint interval for restart dumps", FGCS 22(3), 2006, eq. 1): with a save costing
``delta`` seconds and failures ``M`` seconds apart on average, saving every

    T* = sqrt(2 * delta * M)

seconds minimises the expected waste, ``delta / T`` of stall plus ``T / 2`` of work lost per
failure, to ``sqrt(2 * delta / M)``. elastix's recoveries have two levels: a slice loss is
recovered in process from the newest of a host snapshot (in the controller's memory, which a
slice loss spares) and a checkpoint; the controller's own death (a restart) only from a
checkpoint. So the snapshot period is set by slice failures, and the checkpoint period by
controller failures (``--head-mtbf``, or restarts seen); without host snapshots, checkpoints
serve slice failures too. The expected goodput of a setting is one minus its waste:

    waste = delta_c / T_c + delta_s / T_s + (R + W) / M + [T_c / 2] / M_head

with ``R`` a recovery's downtime (loss, else kill, to the first step after it, measured) and ``W`` the work
a slice failure loses, half the interval of the newest save it can restore. A first-order model:
it leaves out start-up and everything else the run spends, so it ranks settings and says how
much a change is worth; the run's measured goodput (``workload goodput``) is the number.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any

from elastix.errors import UsageError
from elastix.measure.events import Event, recoveries


@dataclasses.dataclass(frozen=True)
class Measured:
    """What a run measured that the periods depend on (seconds unless said)."""

    wall: float
    step: float  # median step time, the steps' own (no stall)
    checkpoint_period: int | None  # steps; None: it saves no checkpoints
    snapshot_period: int  # steps; 0: no host snapshots
    checkpoint_stall: float | None  # median blocking seconds of a save
    snapshot_stall: float | None  # median seconds of a snapshot
    downtime: float | None  # median recovery downtime
    failures: int  # slice losses recovered in process
    restarts: int  # controller restarts
    saves: int
    snapshots: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _period(steps: list[int]) -> int | None:
    """The most common gap between the steps saved (a period the config does not say)."""
    gaps = [b - a for a, b in zip(steps, steps[1:], strict=False) if b > a]
    return statistics.mode(gaps) if gaps else None


def _whole(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**53 else None


def measure(events: list[Event], records: list[dict[str, Any]] | None = None) -> Measured:
    """What ``events`` (and, for elastix's trainer, its ``run_start`` config) measured.

    Raises:
        UsageError: no step was measured.
    """
    steps = [e.data["seconds"] for e in events if e.name == "step"
             and isinstance(e.data.get("seconds"), (int, float))]
    if len(steps) < 2:
        raise UsageError("not enough steps to advise on (fewer than 2 measured)",
                         hint="let the run train for a while, then ask again")
    config: dict[str, Any] = {}
    for rec in reversed(records or []):
        if rec.get("event") == "run_start" and isinstance(rec.get("config"), dict):
            config = rec["config"]
            break
    committed = [e for e in events if e.name == "checkpoint_committed"]
    snaps = [e for e in events if e.name == "snapshot_taken"]
    # the config's periods when they are whole numbers, else what the saves show
    ckpt = _whole(config.get("checkpoint_period")) if config.get("checkpoint_dir") else None
    if not config or (config.get("checkpoint_dir") and ckpt is None):
        ckpt = _period(sorted({e.data["step"] for e in committed}))
    snap = _whole(config.get("snapshot_period")) if config else None
    if snap is None:
        snap = _period(sorted({e.data["step"] for e in snaps}))
    recs = [r for r in recoveries(events) if r.complete]
    # A completed run's final save copies at the boundary once, whatever the copy mode: a
    # one-off, not the periodic stall the periods trade against (a short benchmark's final
    # save made the median of two saves 0.85 s where every periodic one blocked 0.0002 s).
    final = {e.data.get("step") for e in events
             if e.name == "run_end" and e.data.get("status") == "completed"}
    periodic = [e for e in committed if e.data.get("step") not in final] or committed
    return Measured(
        wall=(events[-1].t - events[0].t) / 1000, step=statistics.median(steps[1:] or steps),
        checkpoint_period=ckpt or None, snapshot_period=snap or 0,
        checkpoint_stall=_median([e.data["blocking_seconds"] for e in periodic
                                  if e.data.get("blocking_seconds") is not None]),
        snapshot_stall=_median([e.data["seconds"] for e in snaps
                                if e.data.get("seconds") is not None]),
        downtime=_median([r.downtime for r in recs if r.downtime is not None]),
        failures=sum(1 for r in recs if r.kind == "in-process"),
        restarts=sum(1 for r in recs if r.kind == "restart"),
        saves=len(committed), snapshots=len(snaps))


def young_daly(stall: float, mtbf: float) -> float:
    """The first-order optimum interval, seconds: ``sqrt(2 * stall * mtbf)``."""
    return math.sqrt(2.0 * stall * mtbf)


@dataclasses.dataclass(frozen=True)
class Setting:
    """Periods in steps (None: no checkpoints; 0: no snapshots) and their expected goodput."""

    checkpoint_period: int | None
    snapshot_period: int
    goodput: float
    waste: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def waste(m: Measured, checkpoint_period: int | None, snapshot_period: int, mtbf: float,
          head_mtbf: float | None) -> dict[str, float]:
    """The expected waste of a setting, as fractions of the wall time, by part."""
    tc = checkpoint_period * m.step if checkpoint_period else math.inf
    ts = snapshot_period * m.step if snapshot_period else math.inf
    newest = min(tc, ts)
    out = {"checkpoint stall": (m.checkpoint_stall or 0.0) / tc if checkpoint_period else 0.0,
           "snapshot stall": (m.snapshot_stall or 0.0) / ts if snapshot_period else 0.0,
           "work lost": (newest / 2) / mtbf if math.isfinite(newest) else 1.0,
           "downtime": (m.downtime or 0.0) / mtbf}
    if head_mtbf:
        out["work lost (controller)"] = (tc / 2) / head_mtbf if math.isfinite(tc) else 1.0
    return out


def _setting(m: Measured, c: int | None, s: int, mtbf: float, head: float | None) -> Setting:
    parts = waste(m, c, s, mtbf, head)
    total = sum(parts.values())
    if total > 1.0:
        # Waste is a share of the wall time: no part, and not all of them, can be more. Past
        # 100 % the first-order model no longer holds (failures come faster than the run
        # saves and recovers): the parts keep their proportions within it (advise notes it).
        parts = {k: v / total for k, v in parts.items()}
    return Setting(c, s, max(0.0, 1.0 - total), parts)


def _over(setting: Setting, m: Measured, mtbf: float, head: float | None) -> float:
    """The first-order model's raw waste of a setting (above 1: the model does not hold)."""
    return sum(waste(m, setting.checkpoint_period, setting.snapshot_period, mtbf,
                     head).values())


@dataclasses.dataclass(frozen=True)
class Advice:
    measured: Measured
    mtbf: float
    mtbf_from: str  # "--mtbf", or "observed: N failures in W s"
    head_mtbf: float | None
    today: Setting
    advised: Setting
    notes: list[str]
    uncapped: int | None = None
    """The snapshot period Young-Daly gives when the advice caps it at the checkpoint period
    (a snapshot less often than a checkpoint saves nothing a checkpoint doesn't); else None."""

    def to_json(self) -> dict[str, Any]:
        return {"measured": self.measured.to_json(), "mtbf_seconds": self.mtbf,
                "mtbf_from": self.mtbf_from, "head_mtbf_seconds": self.head_mtbf,
                "today": self.today.to_json(), "advised": self.advised.to_json(),
                "uncapped_snapshot_period": self.uncapped, "notes": self.notes}


def _steps(seconds: float, step: float) -> int:
    return max(1, round(seconds / step))


def advise(m: Measured, mtbf: float | None = None, head_mtbf: float | None = None) -> Advice:
    """The periods ``m`` calls for at the failure rate given (or observed).

    Raises:
        UsageError: no failure rate: none given and none seen in the run; a step time of 0.
    """
    notes: list[str] = []
    uncapped: int | None = None
    if not m.step > 0:  # steps under half a millisecond: events keep 3 decimals
        raise UsageError(f"the run's step time is {m.step:g} s (under the events' millisecond):"
                         " no period in steps follows from it",
                         hint="advise on a run whose steps take a millisecond or more")
    if mtbf is None:
        if not m.failures:
            raise UsageError("no slice failure in this run to take a failure rate from",
                             hint="give your fleet's: --mtbf 6h (mean time between slice "
                                  "failures)")
        mtbf, mtbf_from = m.wall / m.failures, (f"observed: {m.failures} failure"
                                                f"{'s' if m.failures != 1 else ''} in "
                                                f"{m.wall:.0f} s")
        notes.append("the failure rate is this run's (a chaos soak's is far above a fleet's): "
                     "give --mtbf for production periods")
    else:
        mtbf_from = "--mtbf"
    if head_mtbf is None and m.restarts:
        head_mtbf = m.wall / m.restarts
    c, s = m.checkpoint_period, m.snapshot_period
    if s and m.snapshot_stall is not None:
        s = _steps(young_daly(m.snapshot_stall, mtbf), m.step)
        if c and head_mtbf and m.checkpoint_stall is not None:
            c = _steps(young_daly(m.checkpoint_stall, head_mtbf), m.step)
        elif c:
            notes.append("the checkpoint period is kept: with host snapshots it guards only "
                         "against the controller's own death; give --head-mtbf to set it")
        if c and s > c:
            uncapped, s = s, c  # a snapshot less often than a checkpoint saves nothing more
            notes.append(f"the snapshot period is capped at the checkpoint period (every {c} "
                         f"steps): Young-Daly alone gives every {uncapped} steps, and a "
                         "snapshot less often than a checkpoint saves nothing a checkpoint "
                         "doesn't")
    elif c and m.checkpoint_stall is not None:
        c = _steps(young_daly(m.checkpoint_stall, mtbf), m.step)
        notes.append("no host snapshots: a slice loss restores a checkpoint; --snapshot-period "
                     "makes it restore host memory instead, at a snapshot's stall")
    else:
        notes.append("the run saves nothing: every failure restarts from step 0; give the "
                     "trainer --checkpoint-dir")
    if m.downtime is None:
        seen = m.failures + m.restarts
        why = (f"none of this run's {seen} recover{'ies' if seen != 1 else 'y'} reached a "
               "first step after it" if seen else "this run had no recovery")
        notes.append(f"no recovery downtime was measured ({why}): downtime is counted as 0 s, "
                     "so the expected goodput is an upper bound; `elastix chaos kill-worker "
                     "NAME --measure` measures one")
    today = _setting(m, m.checkpoint_period, m.snapshot_period, mtbf, head_mtbf)
    advised = _setting(m, c, s, mtbf, head_mtbf)
    for label, setting in (("today's", today), ("the advised", advised)):
        raw = _over(setting, m, mtbf, head_mtbf)
        if raw > 1.0:
            notes.append(f"at {label} periods the first-order model's waste is {raw:.0%} of "
                         "the wall time: failures come faster than the run saves and "
                         "recovers, so it makes no progress on average (goodput 0 %); its "
                         "badput parts are shown as shares of that waste")
    return Advice(m, mtbf, mtbf_from, head_mtbf, today, advised, notes, uncapped)


def curve(advice: Advice, points: int = 60) -> tuple[str, list[tuple[int, float]]]:
    """Expected badput against the period advised on (snapshots' when on, else
    checkpoints'), from a tenth of the optimum to ten times it: (which, [(steps, badput)])."""
    m, a = advice.measured, advice.advised
    which = "snapshot" if a.snapshot_period else "checkpoint"
    best = (a.snapshot_period if which == "snapshot" else a.checkpoint_period) or 1
    now = (advice.today.snapshot_period if which == "snapshot"
           else advice.today.checkpoint_period) or best
    lo, hi = max(1, min(best // 10, now // 2)), max(best * 10, now * 2, 2)
    out = []
    for i in range(points):
        p = max(1, round(lo * (hi / lo) ** (i / (points - 1))))
        if out and out[-1][0] == p:
            continue
        c = a.checkpoint_period if which == "snapshot" else p
        s = p if which == "snapshot" else a.snapshot_period
        out.append((p, 1.0 - _setting(m, c, s, advice.mtbf, advice.head_mtbf).goodput))
    return which, out
