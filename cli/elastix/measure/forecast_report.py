"""The forecast's inputs and its answer: a run's measurements as the simulation's costs, the
policies side by side at today's periods and at the best the simulation finds, with an interval
over repeated runs (:mod:`elastix.measure.forecast` plays each run)."""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from typing import Any

from elastix.errors import UsageError
from elastix.measure.advise import Measured, young_daly
from elastix.measure.forecast import POLICIES, Costs, Scenario, simulate
from elastix.measure.forecast_inputs import RunInputs

MAX_SLICES = 100_000  # past any TPU fleet; a bound, so --slices 10**9 is refused, never run
MAX_FAILURES = 5_000_000  # failures simulated in all (runs x policies x periods searched)
MAX_RUNS = 1_000
MAX_DAYS = 3_650
SEARCH = (0.25, 0.5, 0.71, 1.0, 1.41, 2.0, 4.0)  # times the Young-Daly period, tried
SEARCH_RUNS = 4  # runs per period tried; the best is then played with every run


# A full restart on GKE: the JobSet recreates every pod, the scheduler places them, the
# containers start, JAX and Pathways initialise, the checkpoint is read back and the step is
# compiled again. No GKE, JobSet, xpk or MaxText document found gives how long that takes (the
# search is in docs/forecast.md), so this default is an assumption, said as one in the output:
# 10 min, inside the 5-20 min restart overhead (u0) Meta reports for its research clusters
# (Kokolis et al., HPCA 2025, arXiv 2410.21680, the section on estimating ETTR).
GKE_RESTART = 600.0
GKE_RESTART_SOURCE = ("10 min, an assumption (no GKE/JobSet document gives one; Meta reports "
                      "5-20 min, docs/forecast.md)")


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The simulation's costs and where each came from (said in the output)."""

    costs: Costs
    measured: Measured
    sources: dict[str, str]
    notes: list[str]


def _span(xs: tuple[float, ...]) -> str:
    """Seconds as the output says them: one value, or the range of the samples."""
    return f"{xs[0]:g} s" if len(set(xs)) == 1 else f"{min(xs):g}-{max(xs):g} s"


def _restart(run: RunInputs, given: tuple[float, ...] | None, on_gke: bool,
             sources: dict[str, str], notes: list[str]) -> tuple[float, ...]:
    """A restart's cost: ``--restart-time``; else the restarts a GKE run measured; else the
    GKE default. A local run's own restart (a process start, seconds) is never the default:
    at fleet scale it would make a full restart look free."""
    if given is not None:
        sources["restart"] = f"{_span(given)}: --restart-time"
        return given
    measured = tuple(r.downtime for r in run.recoveries
                     if r.kind == "restart" and r.downtime is not None)
    if on_gke and measured:
        sources["restart"] = f"{_span(measured)}: {len(measured)} measured on GKE (sampled)"
        return measured
    sources["restart"] = GKE_RESTART_SOURCE
    own = (f"{len(measured)} restarts measured, median {statistics.median(measured):.1f} s"
           if measured else f"its start-up, {run.startup:.1f} s" if run.startup else None)
    if own and not on_gke:
        notes.append(f"this run's own restart cost ({own}) is a local process start, not a "
                     "JobSet restart; --restart-time sets the forecast's")
    elif own:
        notes.append(f"no restart measured on GKE ({own}); --restart-time sets the forecast's")
    return (GKE_RESTART,)


def calibrate(run: RunInputs, replace: tuple[float, ...] | None = None,
              recovery: float | None = None, restart: tuple[float, ...] | None = None,
              on_gke: bool = False) -> Calibration:
    """The costs a run measured (:func:`elastix.measure.forecast_inputs.inputs_of`).

    Args:
        replace: the platform's replace time (samples) given by the user; else the waits for
            slices the run's in-process recoveries measured (the local backend's delay).
        recovery: a recovery's downtime to assume when the run has no in-process one.
        restart: a full restart's cost (samples) given by the user (:func:`_restart`).
        on_gke: the run was read from a GKE cluster (its restarts are GKE's).

    Raises:
        UsageError: something the forecast needs was not measured and not given.
    """
    m = run.measured
    inproc = [r for r in run.recoveries if r.kind == "in-process"]
    sources: dict[str, str] = {}
    notes: list[str] = []
    if inproc:
        before = tuple(r.before_wait for r in inproc)
        after = tuple(r.after_wait for r in inproc)
        sources["in-process recovery"] = f"{len(inproc)} measured (their phases, sampled)"
    elif recovery is not None:
        before, after = (0.0,), (recovery,)
        sources["in-process recovery"] = f"--recovery-time {recovery:g} s (none measured)"
    else:
        raise UsageError("no in-process recovery in this run to calibrate the forecast",
                         hint="measure one (elastix chaos kill-worker NAME --measure), or "
                              "assume its downtime: --recovery-time 60s")
    restarts = _restart(run, restart, on_gke, sources, notes)
    if replace is not None:
        sources["replace time"] = f"{_span(replace)}: --replace-time"
    else:
        waits = tuple(r.wait for r in inproc)
        if not waits:
            raise UsageError("no wait for a replacement slice measured in this run",
                             hint="give the platform's: --replace-time 10m")
        replace = waits
        sources["replace time"] = (f"{_span(waits)}: the waits for slices of {len(waits)} "
                                   "recoveries (the local backend's delay; give "
                                   "--replace-time for GKE's)")
    if m.checkpoint_period and m.checkpoint_stall is None:
        notes.append("no checkpoint stall measured: saves are counted as free")
    costs = Costs(m.step, m.checkpoint_stall or 0.0, m.snapshot_stall or 0.0, before, after,
                  restarts, replace)
    return Calibration(costs, m, sources, notes)


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A mean over runs and its 95 % interval (normal, over the runs' spread)."""

    mean: float
    low: float
    high: float

    @classmethod
    def of(cls, xs: list[float], top: float = math.inf) -> Estimate:
        """Clipped to ``[0, top]``: a share is never more than 1, a count never negative."""
        mean = statistics.fmean(xs)
        half = 1.96 * statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else 0.0
        return cls(mean, max(0.0, mean - half), min(top, mean + half))


@dataclasses.dataclass(frozen=True)
class Row:
    """One policy at one setting of the periods, over ``runs`` runs."""

    policy: str
    periods: str  # "today" or "best"
    checkpoint_period: int | None
    snapshot_period: int
    goodput: Estimate
    slice_weighted_goodput: Estimate
    steps_lost_per_day: Estimate
    fewer_slices_share: Estimate  # of the wall time
    restarts: Estimate  # per run
    recoveries: Estimate  # in-process, per run

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _seeds(seed: int, runs: int) -> list[int]:
    return [seed * 1_000_003 + i for i in range(runs)]  # the same runs for every setting


def play(c: Costs, sc: Scenario, policy: str, seeds: list[int], periods: str = "today") -> Row:
    """``policy`` over one run per seed."""
    out = [simulate(c, sc, policy, random.Random(s)) for s in seeds]
    days = sc.seconds / 86400
    return Row(policy, periods, sc.checkpoint_period, sc.snapshot_period,
               Estimate.of([o.goodput for o in out], 1.0),
               Estimate.of([o.slice_weighted_goodput for o in out], 1.0),
               Estimate.of([o.steps_lost / days for o in out]),
               Estimate.of([o.fewer_slices_seconds / sc.seconds for o in out], 1.0),
               Estimate.of([float(o.restarts) for o in out]),
               Estimate.of([float(o.recoveries) for o in out]))


def _around(stall: float, mtbf: float, step: float, today: int | None) -> list[int]:
    """Periods (steps) to try: multiples of the Young-Daly period, and today's."""
    best = young_daly(stall, mtbf) / step if stall > 0 else 0
    tried = {max(1, round(best * f)) for f in SEARCH} if best else set()
    return sorted(tried | ({today} if today else set()))


def best_periods(c: Costs, sc: Scenario, policy: str, seeds: list[int]
                 ) -> tuple[int | None, int]:
    """The checkpoint and snapshot periods with the highest mean goodput over ``seeds``:
    one period at a time (snapshots first, set by slice failures; then checkpoints, set by
    restarts), over multiples of the Young-Daly period."""
    slice_mtbf = sc.host_mtbf / (sc.slices * sc.hosts_per_slice)

    def score(ck: int | None, sn: int) -> float:
        return statistics.fmean(simulate(c, sc.with_periods(ck, sn), policy,
                                         random.Random(s)).goodput for s in seeds)

    ck, sn = sc.checkpoint_period, sc.snapshot_period
    every = slice_mtbf if not sc.head_mtbf else 1 / (1 / slice_mtbf + 1 / sc.head_mtbf)
    if policy == "restart":
        sn = 0  # a restart loses the host snapshots: they would only stall
        head = every
    elif sn and c.snapshot_stall > 0:
        sn = max(_around(c.snapshot_stall, slice_mtbf, c.step, sn), key=lambda p: score(ck, p))
        head = sc.head_mtbf or sc.seconds * 10  # with snapshots, checkpoints guard restarts
    else:
        head = every  # no snapshots: checkpoints serve slice failures too
    if ck and c.checkpoint_stall > 0:
        ck = max(_around(c.checkpoint_stall, head, c.step, ck), key=lambda p: score(p, sn))
    return ck, min(sn, ck) if sn and ck else sn


def expected_failures(sc: Scenario, runs: int) -> float:
    """Failures one policy's runs simulate, on average (the work a forecast is)."""
    rate = sc.slices * sc.hosts_per_slice / sc.host_mtbf + (1 / sc.head_mtbf if sc.head_mtbf
                                                             else 0.0)
    return rate * sc.seconds * runs


def check(sc: Scenario, c: Costs, runs: int) -> None:
    """Refuse what cannot be forecast, in one line each.

    Raises:
        UsageError: the first problem found.
    """
    if not c.step > 0:
        raise UsageError(f"the run's step time is {c.step:g} s: nothing to simulate",
                         hint="forecast from a run whose steps took time")
    if not 1 <= sc.slices <= MAX_SLICES:
        raise UsageError(f"--slices {sc.slices} is out of range: 1 to {MAX_SLICES:,}",
                         hint="the size of the training to forecast, in slices")
    if not 1 <= sc.min_slices <= sc.slices:
        raise UsageError(f"--min-slices {sc.min_slices} is out of range: 1 to --slices "
                         f"({sc.slices})", hint="replica-resize trains on no fewer slices")
    if not 1 <= runs <= MAX_RUNS:
        raise UsageError(f"--runs {runs} is out of range: 1 to {MAX_RUNS}", hint="e.g. --runs 20")
    if sc.checkpoint_period is not None and sc.checkpoint_period < 1:
        raise UsageError(f"--checkpoint-period {sc.checkpoint_period} is not a period",
                         hint="steps between checkpoints, 1 or more")
    if sc.snapshot_period < 0:
        raise UsageError(f"--snapshot-period {sc.snapshot_period} is negative",
                         hint="steps between host snapshots, or 0 for none")
    if sc.spare_slices < 0:
        raise UsageError(f"--spare-slices {sc.spare_slices} is negative", hint="e.g. 0 or 2")
    if max(c.restart) >= sc.seconds:
        raise UsageError(f"the restart time ({max(c.restart):g} s) is not shorter than the run "
                         f"({sc.seconds:g} s)", hint="forecast more --days, or a shorter "
                                                    "--restart-time")
    if max(c.replace) >= sc.seconds:
        raise UsageError(f"the replace time ({max(c.replace):g} s) is not shorter than the run "
                         f"({sc.seconds:g} s)", hint="forecast more --days, or a shorter "
                                                    "--replace-time")
    work = expected_failures(sc, runs) * len(POLICIES) * (2 + 2 * len(SEARCH))
    if work > MAX_FAILURES:
        raise UsageError(f"this forecast would simulate about {work:,.0f} failures, more than "
                         f"the limit of {MAX_FAILURES:,}", hint="fewer --slices, --days or "
                                                               "--runs, or a longer --host-mtbf")


@dataclasses.dataclass(frozen=True)
class Forecast:
    scenario: Scenario
    runs: int
    seed: int
    rows: list[Row]

    def row(self, policy: str, periods: str = "best") -> Row:
        return next(r for r in self.rows if r.policy == policy and r.periods == periods)

    def to_json(self) -> dict[str, Any]:
        return {"scenario": dataclasses.asdict(self.scenario), "runs": self.runs,
                "seed": self.seed, "rows": [r.to_json() for r in self.rows]}


def forecast(c: Costs, sc: Scenario, runs: int = 20, seed: int = 0,
             policies: tuple[str, ...] = POLICIES, search: bool = True) -> Forecast:
    """Each policy at today's periods and (``search``) at the best the simulation finds."""
    seeds = _seeds(seed, runs)
    rows = []
    for p in policies:
        rows.append(play(c, sc, p, seeds))
        if search:
            ck, sn = best_periods(c, sc, p, seeds[:SEARCH_RUNS])
            rows.append(play(c, sc.with_periods(ck, sn), p, seeds, "best"))
    return Forecast(sc, runs, seed, rows)
