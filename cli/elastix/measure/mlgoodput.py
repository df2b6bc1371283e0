"""Goodput as Google's ml-goodput-measurement counts it, from a normalised event stream.

MaxText users' dashboards speak the categories of ``ml-goodput-measurement`` (PyPI, Apache-2.0);
this module shows an elastix run in them, offline, without the library (it needs Cloud Logging
and imports ``google.cloud.logging`` and ``google.cloud.monitoring_v3``). Two halves:

- :func:`entries`: the run as the library's log entries, which elastix event is which record
  (:class:`elastix.protocol.mlgoodput.Feed`, which the trainer also writes live; its choices
  are listed there);
- :func:`calculate`: the library's arithmetic over those entries, reproduced from
  ml-goodput-measurement **0.2.3** ``src/goodput.py`` (``GoodputCalculator``:
  ``_get_current_productive_and_unproductive_time`` L780-1252, ``_get_total_job_time``
  L1254-1294, ``_sanitize_unproductive_times`` / ``_compute_other_unproductive_time``
  L1391-1441, ``get_job_goodput`` L1478-1585, ``_get_job_badput_breakdown`` L1786-1934),
  ``src/goodput_elastic.py`` (``ElasticGoodputCalculator`` L107-347: elastic waits,
  re-initialisation, slice efficiency) and ``src/checkpoint_badput_calculator.py`` (save and
  restore blocking time, L385-445 and L572-640), quirks included (a segment ending at step 0
  counts nothing; saves of one step are averaged, not summed; OTHER is floored at 0).

``tests/measure/test_mlgoodput_crosscheck.py`` feeds the same entries to the real library and
holds the two to 0.5 points overall and 1 % of the wall time per category.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from elastix.measure.events import Event
from elastix.measure.goodput import full_mesh_slices
from elastix.protocol.mlgoodput import (
    CUSTOM_END,
    CUSTOM_START,
    CUSTOM_TYPE,
    JOB_END,
    JOB_START,
    PREP_END,
    PREP_START,
    REINIT_END,
    REINIT_START,
    SLICES_AT,
    STEP_COUNT,
    STEP_START,
    TPU_END,
    TPU_START,
    WAIT_END,
    WAIT_START,
    WAIT_TYPE,
    Feed,
)
from elastix.protocol.mlgoodput import SNAPSHOT as SNAPSHOT  # the custom badput type

LIBRARY = "ml-goodput-measurement 0.2.3"

# The library's BadputType names, in its enum's order (goodput_utils.py L81-95).
CATEGORIES = ("TPU_INITIALIZATION", "TRAINING_PREP", "PROGRAM_STARTUP", "DATA_LOADING_SYNC",
              "DATA_LOADING_ASYNC", "UNPRODUCTIVE_CHECKPOINT_SAVE_TIME",
              "UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME", "WASTED_PROGRESS_FROM_DISRUPTION",
              "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION", "CUSTOM_BADPUT_EVENTS", "OTHER",
              "ELASTIC_SLICE_DOWN", "ELASTIC_SCALE_UP", "ELASTIC_REINITIALIZATION")
DIFFERENCES = (
    "differs from elastix's own: host snapshots are CUSTOM_BADPUT_EVENTS (elastix: snapshot "
    "stall); only the first step's excess over the mean step is PROGRAM_STARTUP; detection and a "
    "failed step fall in OTHER; the last step runs to the job's end; a step on fewer slices is "
    "fully productive (stepping_slice_efficiency says how full the mesh was)")

def entries(events: list[Event], job: str = "elastix") -> list[dict[str, Any]]:
    """The run as the library's log entries (what its recorders would have written), in order:
    :class:`elastix.protocol.mlgoodput.Feed` over ``events``, the full mesh as
    :func:`full_mesh_slices` reads it from the whole run (the choices are listed there; the
    trainer writes the same entries live)."""
    feed = Feed(job, full_mesh_slices(events))
    return [e for ev in events for e in feed.add(ev.name, ev.t, ev.data)]


@dataclasses.dataclass
class MlGoodputReport:
    """The library's numbers for one run (seconds unless named ``percent``)."""

    total_elapsed_time: float
    productive_seconds: float
    badput_seconds: dict[str, Any]  # CATEGORIES -> seconds; CUSTOM_BADPUT_EVENTS a dict
    max_productive_step: int
    last_recorded_step: int
    disruption_count: int
    ended: bool  # a job_end_time was recorded; else the job runs to the stream's last event
    stepping_slice_efficiency: float | None = None
    available_slice_efficiency: float | None = None

    @property
    def goodput_percent(self) -> float:
        return self.productive_seconds / self.total_elapsed_time * 100

    def badput_percent(self) -> dict[str, Any]:
        """Each category as a percentage of the total time, as ``get_job_goodput`` reports it
        (a value outside (0, total) is 0)."""
        tot = self.total_elapsed_time

        def pct(v: float) -> float:
            return v / tot * 100 if 0 < v < tot else 0.0

        return {k: ({s: pct(x) for s, x in v.items()} if isinstance(v, dict) else pct(v))
                for k, v in self.badput_seconds.items()}

    def to_json(self) -> dict[str, Any]:
        return {"library": LIBRARY, "total_elapsed_time": self.total_elapsed_time,
                "job_ended": self.ended, "productive_seconds": self.productive_seconds,
                "goodput_percent": self.goodput_percent, "badput_seconds": self.badput_seconds,
                "badput_percent": self.badput_percent(),
                "max_productive_step": self.max_productive_step,
                "last_recorded_step": self.last_recorded_step,
                "disruption_count": self.disruption_count,
                "stepping_slice_efficiency": self.stepping_slice_efficiency,
                "available_slice_efficiency": self.available_slice_efficiency}


def measure(events: list[Event]) -> MlGoodputReport:
    """The run in ``events`` in the library's categories; a run without a completed
    ``run_end`` is measured up to its last event (the library: up to now)."""
    return calculate(entries(events), events[-1].t / 1000)


def _pairs(entries: list[dict[str, Any]], start: str, end: str,
           kind: str | None = None) -> list[tuple[float, float, str]]:
    """Start/end entries paired per type (a second start replaces an open one)."""
    out, open_ = [], {}
    for e in entries:
        k = str(e.get(kind, "")).upper() if kind == CUSTOM_TYPE else e.get(kind, "unknown")
        if start in e:
            open_[k] = e[start]
        elif end in e and k in open_:
            a = open_.pop(k)
            if a < e[end]:
                out.append((a, e[end], k))
    return out


def _segment(steps: dict[int, float], curr: int, customs: list) -> tuple[float, dict, int]:
    """One segment's productive time and badput (goodput.py L799-1003)."""
    if curr == 0:
        return 0.0, {}, 0
    items = list(steps.items())
    lo = min(steps)
    total = first = wasted = 0.0
    times: list[float] = []
    custom: dict[str, float] = {}
    n = maxp = 0
    for (ps, pt), (cs, ct) in zip(items, items[1:], strict=False):
        if cs > curr:
            wasted += ct - pt
            continue
        if cs - 1 != ps:
            continue
        inside = 0.0
        for a, b, k in customs:
            if pt <= a and b <= ct:
                inside += b - a
                custom[k] = custom.get(k, 0.0) + b - a
        adj = max(0.0, ct - pt - inside)
        total += adj
        if ps == lo:
            first = adj
        else:
            times.append(adj)
        n, maxp = n + 1, ps
    if n == 0:
        return 0.0, {"WASTED_PROGRESS_FROM_DISRUPTION": wasted}, 0
    if not times:
        return first, {"WASTED_PROGRESS_FROM_DISRUPTION": wasted, "CUSTOM_BADPUT_EVENTS": custom,
                       "PROGRAM_STARTUP": 0.0}, maxp
    extra = max(0.0, first - (total - first) / len(times))
    return total - extra, {"PROGRAM_STARTUP": extra, "WASTED_PROGRESS_FROM_DISRUPTION": wasted,
                           "CUSTOM_BADPUT_EVENTS": custom}, maxp


def _add(into: dict[str, Any], seg: dict[str, Any]) -> None:
    for k, v in seg.items():
        if isinstance(v, dict):
            mine = into.setdefault(k, {})
            for s, x in v.items():
                mine[s] = mine.get(s, 0.0) + x
        else:
            into[k] = into.get(k, 0.0) + v


def _checkpoint_time(entries: list[dict[str, Any]], kind: str, key: str) -> float:
    """Save (or restore) time: per step and local/persistent directory the mean, summed."""
    per: dict[str, list[float]] = defaultdict(list)
    for e in entries:
        if e.get("event_type") in ((kind,) if kind == "save" else ("restore", "emergency_restore")):
            where = "persistent" if str(e["directory"]).startswith("gs://") else "local"
            per[f"{e['step']}-{where}"].append(float(e[key]))
    return sum(sum(v) / len(v) for v in per.values())


def _productive(entries: list[dict[str, Any]]) -> tuple[float, dict[str, Any], int, int, int]:
    """goodput.py L780-1252: productive time, badput, max productive and last step, and
    the disruptions (a step count recorded twice)."""
    customs = _pairs(entries, CUSTOM_START, CUSTOM_END, CUSTOM_TYPE)
    productive, bad = 0.0, {}
    steps: dict[int, float] = {}
    job_start = job_end = None
    disruptions = 0
    for e in entries:
        if JOB_START in e:
            job_start = e[JOB_START]
        if STEP_START in e:
            n = int(e[STEP_COUNT])
            if n not in steps:
                steps[n] = e[STEP_START]
            else:
                disruptions += 1
                at = steps[list(steps)[-1]]
                prod, seg, _ = _segment(steps, n, customs)
                productive += prod
                if job_start is not None and job_start > at:  # a restarted process
                    seg["INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION"] = (
                        seg.get("INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION", 0.0) + job_start - at)
                _add(bad, seg)
                steps = {n: e[STEP_START]}
        if JOB_END in e:
            job_end = e[JOB_END]
    bad["TPU_INITIALIZATION"] = sum((b - a for a, b, _ in _pairs(entries, TPU_START, TPU_END)), 0.0)
    bad["TRAINING_PREP"] = sum((b - a for a, b, _ in _pairs(entries, PREP_START, PREP_END)), 0.0)
    bad["DATA_LOADING_ASYNC"] = 0.0  # the feed records no data loading
    save = _checkpoint_time(entries, "save", "checkpoint_manager_blocking_duration_secs")
    bad["UNPRODUCTIVE_CHECKPOINT_SAVE_TIME"] = save
    bad["UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME"] = _checkpoint_time(
        entries, "restore", "checkpoint_manager_duration_secs")
    if not steps:
        return 0.0, bad, 0, 0, disruptions
    last = max(steps)
    prod, seg, maxp = _segment(steps, last, customs)
    productive += prod
    _add(bad, seg)
    if job_end is not None:  # the last step counts only when the job ended
        productive += job_end - steps[last]
        maxp = last
    return productive - save, bad, maxp, last, disruptions


def _elastic(entries: list[dict[str, Any]], bad: dict[str, Any]) -> None:
    """goodput_elastic.py L237-283: waits and re-initialisation, init spans inside the latter
    discounted."""
    for a, b, kind in _pairs(entries, WAIT_START, WAIT_END, WAIT_TYPE):
        key = "ELASTIC_SCALE_UP" if "scale_up" in kind.lower() else "ELASTIC_SLICE_DOWN"
        bad[key] = bad.get(key, 0.0) + b - a
    reinit = [(a, b) for a, b, _ in _pairs(entries, REINIT_START, REINIT_END)]
    for a, b in reinit:
        bad["ELASTIC_REINITIALIZATION"] = bad.get("ELASTIC_REINITIALIZATION", 0.0) + b - a
    if reinit:
        for key, (s, e) in (("TPU_INITIALIZATION", (TPU_START, TPU_END)),
                            ("TRAINING_PREP", (PREP_START, PREP_END))):
            over = sum(max(0.0, min(b, rb) - max(a, ra)) for a, b, _ in _pairs(entries, s, e)
                       for ra, rb in reinit)
            if over > 0 and key in bad:
                bad[key] = max(0.0, bad[key] - over)


def _efficiency(entries: list[dict[str, Any]], lo: float,
                hi: float) -> tuple[float | None, float | None]:
    """goodput_elastic.py L198-235: time-weighted stepping and available slices over total."""
    recs = sorted(((e[SLICES_AT], e.get("active_slices", 0), e.get("available_slices", 0),
                    max(e.get("total_slices", 1), 1)) for e in entries if SLICES_AT in e),
                  key=lambda r: r[0])
    if not recs:
        return None, None
    if hi <= lo:
        return 0.0, 0.0
    before = [r for r in recs if r[0] <= lo]
    line = ([(lo,) + before[-1][1:]] if before else []) + [r for r in recs if lo < r[0] < hi]
    if not line:
        return 0.0, 0.0
    step = avail = 0.0
    for i, (t, s, a, n) in enumerate(line):
        dur = (line[i + 1][0] if i + 1 < len(line) else hi) - t
        step, avail = step + s / n * dur, avail + a / n * dur
    return step / (hi - lo), avail / (hi - lo)


class NotComputable(ValueError):
    """The library would refuse these entries (no job start, or productive time outside
    the job's time)."""


def calculate(entries: list[dict[str, Any]], now: float) -> MlGoodputReport:
    """The library's ``ElasticGoodputCalculator.get_job_goodput`` and slice efficiency over
    ``entries``; ``now`` (seconds since the epoch) ends a job with no ``job_end_time``.

    Raises:
        NotComputable: where the library raises ValueError.
    """
    starts = [e[JOB_START] for e in entries if JOB_START in e]
    ends = [e[JOB_END] for e in entries if JOB_END in e]
    if not starts:
        raise NotComputable("no job start: total job time is zero")
    total = (ends[-1] if ends else now) - starts[0]
    if total == 0:
        raise NotComputable("total job time is zero")
    productive, bad, maxp, last, disruptions = _productive(entries)
    _elastic(entries, bad)
    if productive < 0 or productive > total:
        raise NotComputable(f"productive time {productive:.3f} s is outside the job's "
                            f"{total:.3f} s")
    for k, v in bad.items():  # _sanitize_unproductive_times
        if isinstance(v, dict):
            bad[k] = {s: (x if 0 <= x <= total else 0.0) for s, x in v.items()}
        elif v < 0 or v > total:
            bad[k] = 0.0
    flat = sum(sum(v.values()) if isinstance(v, dict) else v for k, v in bad.items()
               if k not in ("DATA_LOADING_ASYNC", "OTHER"))
    bad["OTHER"] = max(0.0, total - productive - flat)
    out = {k: bad.get(k, {} if k == "CUSTOM_BADPUT_EVENTS" else 0.0) for k in CATEGORIES}
    step_eff, avail_eff = _efficiency(entries, starts[0], starts[0] + total)
    return MlGoodputReport(total, productive, out, maxp, last, disruptions, bool(ends),
                           step_eff, avail_eff)
