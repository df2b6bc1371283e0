"""Goodput as Google's ml-goodput-measurement counts it, from a normalised event stream.

MaxText users' dashboards speak the categories of ``ml-goodput-measurement`` (PyPI, Apache-2.0);
this module shows an elastix run in them, offline, without the library (it needs Cloud Logging
and imports ``google.cloud.logging`` and ``google.cloud.monitoring_v3``). Two halves:

- :func:`entries`: the run as the library's log entries, which elastix event is which record
  (the feed; its choices are listed there);
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

LIBRARY = "ml-goodput-measurement 0.2.3"

# The library's BadputType names, in its enum's order (goodput_utils.py L81-95).
CATEGORIES = ("TPU_INITIALIZATION", "TRAINING_PREP", "PROGRAM_STARTUP", "DATA_LOADING_SYNC",
              "DATA_LOADING_ASYNC", "UNPRODUCTIVE_CHECKPOINT_SAVE_TIME",
              "UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME", "WASTED_PROGRESS_FROM_DISRUPTION",
              "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION", "CUSTOM_BADPUT_EVENTS", "OTHER",
              "ELASTIC_SLICE_DOWN", "ELASTIC_SCALE_UP", "ELASTIC_REINITIALIZATION")
SNAPSHOT = "HOST_SNAPSHOT"
"""The custom badput type a host snapshot is recorded as (the library would count it
productive otherwise)."""

DIFFERENCES = (
    "differs from elastix's own: host snapshots are CUSTOM_BADPUT_EVENTS (elastix: checkpoint "
    "stall); only the first step's excess over the mean step is PROGRAM_STARTUP; detection and a "
    "failed step fall in OTHER; the last step runs to the job's end; a step on fewer slices is "
    "fully productive (stepping_slice_efficiency says how full the mesh was)")

# Entry keys, as the library's recorders write them (goodput.py L41-57, goodput_elastic.py
# L10-19, checkpoint_badput_calculator.py L14-28).
_JOB_START, _JOB_END = "job_start_time", "job_end_time"
_STEP_COUNT, _STEP_START = "step_count", "step_start_time"
_PREP_START, _PREP_END = "training_prep_start_time", "training_prep_end_time"
_TPU_START, _TPU_END = "tpu_init_start_time", "tpu_init_end_time"
_CUSTOM_TYPE = "custom_badput_event_type"
_CUSTOM_START, _CUSTOM_END = "custom_badput_event_start_time", "custom_badput_event_end_time"
_WAIT_TYPE, _WAIT_START, _WAIT_END = ("elastic_wait_event_type", "elastic_wait_start_time",
                                      "elastic_wait_end_time")
_REINIT_START, _REINIT_END = "elastic_reinit_start_time", "elastic_reinit_end_time"
_SLICES_AT = "elastic_slice_counts_timestamp"


def entries(events: list[Event], job: str = "elastix") -> list[dict[str, Any]]:
    """The run as the library's log entries (what its recorders would have written), in order.

    - ``run_start``: ``job_start_time``, and a training-prep span to the first step's start
      (the trainer's state, data and restore set-up; JAX is up by then);
    - ``step`` N: ``step_count`` N - 1 started at its end less its ``seconds`` (the library
      records a step's start before it runs);
    - ``snapshot_taken``: a custom badput span (:data:`SNAPSHOT`) of its ``seconds``;
    - ``checkpoint_committed``: an Orbax ``save`` entry blocking for ``blocking_seconds``;
      ``restore``/``elastic_restored``: a ``restore`` entry of its ``seconds``;
    - ``elastic_detected`` to ``elastic_slices_ready``: an ELASTIC_SLICE_DOWN wait; then to
      ``elastic_restored`` the re-initialisation; a resize up outside a recovery: an
      ELASTIC_SCALE_UP wait to its restore (training stood still to take the slice back);
    - slice counts: stepping slices as the steps say (0 from a detection to the next step),
      available ones as the recovery says, of :func:`full_mesh_slices`;
    - ``run_end`` completed: ``job_end_time`` (any other end is a job still "running").
    """
    full = full_mesh_slices(events)
    out: list[dict[str, Any]] = []
    prep_open = scale_up_open = reinit_open = False
    active: int | None = None

    def slices(t: float, stepping: int, available: int) -> None:
        nonlocal active
        active = stepping
        if full:
            out.append({"job_name": job, "active_slices": stepping, "total_slices": full,
                        "available_slices": available, _SLICES_AT: t})

    for ev in events:
        t, d = ev.t / 1000, ev.data
        if ev.name == "run_start":
            out += [{"job_name": job, _JOB_START: t}, {"job_name": job, _PREP_START: t}]
            prep_open = True
            slices(t, 0, d.get("num_slices") or full or 0)
        elif ev.name == "step":
            start = (ev.t - round((d["seconds"] or 0.0) * 1000)) / 1000
            if prep_open:
                out.append({"job_name": job, _PREP_END: start})
                prep_open = False
            if reinit_open:  # the new mesh's compile and warm-up end where its step starts
                out.append({"job_name": job, _REINIT_END: start})
                reinit_open = False
            live = d.get("live_slices") or full or 0
            if active != live:
                slices(start, live, live)
            out.append({"job_name": job, _STEP_COUNT: d["step"] - 1, _STEP_START: start})
        elif ev.name == "snapshot_taken" and d["seconds"]:
            a = t - d["seconds"]
            out += [{"job_name": job, _CUSTOM_TYPE: SNAPSHOT, _CUSTOM_START: a},
                    {"job_name": job, _CUSTOM_TYPE: SNAPSHOT, _CUSTOM_END: t}]
        elif ev.name == "checkpoint_committed" and d["blocking_seconds"] is not None:
            b = d["blocking_seconds"]
            out.append({"job_name": job, "event_type": "save", "step": d["step"],
                        "directory": "elastix/checkpoint",
                        "checkpoint_manager_blocking_duration_secs": b,
                        "checkpointer_blocking_duration_secs": b,
                        "wait_for_prev_duration_secs": 0.0, "get_old_steps_duration_secs": 0.0})
        elif ev.name in ("restore", "elastic_restored"):
            if d["seconds"] is not None:
                out.append({"job_name": job, "event_type": "restore", "step": d["step"],
                            "directory": f"elastix/{d['source']}",
                            "checkpoint_manager_duration_secs": d["seconds"],
                            "checkpointer_duration_secs": d["seconds"]})
            if scale_up_open and ev.name == "restore":
                out.append({"job_name": job, _WAIT_TYPE: "elastic_scale_up", _WAIT_END: t})
                scale_up_open = False
        elif ev.name == "elastic_detected":
            out.append({"job_name": job, _WAIT_TYPE: "slice_down", _WAIT_START: t})
            slices(t, 0, d.get("live_slices") or 0)
        elif ev.name == "elastic_slices_ready":
            out += [{"job_name": job, _WAIT_TYPE: "slice_down", _WAIT_END: t},
                    {"job_name": job, _REINIT_START: t}]
            reinit_open = True
            slices(t, 0, d["live_slices"] or 0)
        elif ev.name == "elastic_resize" and active and (d.get("to_slices") or 0) > (
                d.get("from_slices") or 0):
            out.append({"job_name": job, _WAIT_TYPE: "elastic_scale_up", _WAIT_START: t})
            scale_up_open = True
        elif ev.name == "run_end" and d["status"] == "completed":
            out.append({"job_name": job, _JOB_END: t})
    return out


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
        k = str(e.get(kind, "")).upper() if kind == _CUSTOM_TYPE else e.get(kind, "unknown")
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
    customs = _pairs(entries, _CUSTOM_START, _CUSTOM_END, _CUSTOM_TYPE)
    productive, bad = 0.0, {}
    steps: dict[int, float] = {}
    job_start = job_end = None
    disruptions = 0
    for e in entries:
        if _JOB_START in e:
            job_start = e[_JOB_START]
        if _STEP_START in e:
            n = int(e[_STEP_COUNT])
            if n not in steps:
                steps[n] = e[_STEP_START]
            else:
                disruptions += 1
                at = steps[list(steps)[-1]]
                prod, seg, _ = _segment(steps, n, customs)
                productive += prod
                if job_start is not None and job_start > at:  # a restarted process
                    seg["INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION"] = (
                        seg.get("INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION", 0.0) + job_start - at)
                _add(bad, seg)
                steps = {n: e[_STEP_START]}
        if _JOB_END in e:
            job_end = e[_JOB_END]
    bad["TPU_INITIALIZATION"] = sum((b - a for a, b, _ in _pairs(entries, _TPU_START, _TPU_END)), 0.0)
    bad["TRAINING_PREP"] = sum((b - a for a, b, _ in _pairs(entries, _PREP_START, _PREP_END)), 0.0)
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
    for a, b, kind in _pairs(entries, _WAIT_START, _WAIT_END, _WAIT_TYPE):
        key = "ELASTIC_SCALE_UP" if "scale_up" in kind.lower() else "ELASTIC_SLICE_DOWN"
        bad[key] = bad.get(key, 0.0) + b - a
    reinit = [(a, b) for a, b, _ in _pairs(entries, _REINIT_START, _REINIT_END)]
    for a, b in reinit:
        bad["ELASTIC_REINITIALIZATION"] = bad.get("ELASTIC_REINITIALIZATION", 0.0) + b - a
    if reinit:
        for key, (s, e) in (("TPU_INITIALIZATION", (_TPU_START, _TPU_END)),
                            ("TRAINING_PREP", (_PREP_START, _PREP_END))):
            over = sum(max(0.0, min(b, rb) - max(a, ra)) for a, b, _ in _pairs(entries, s, e)
                       for ra, rb in reinit)
            if over > 0 and key in bad:
                bad[key] = max(0.0, bad[key] - over)


def _efficiency(entries: list[dict[str, Any]], lo: float,
                hi: float) -> tuple[float | None, float | None]:
    """goodput_elastic.py L198-235: time-weighted stepping and available slices over total."""
    recs = sorted(((e[_SLICES_AT], e.get("active_slices", 0), e.get("available_slices", 0),
                    max(e.get("total_slices", 1), 1)) for e in entries if _SLICES_AT in e),
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
    starts = [e[_JOB_START] for e in entries if _JOB_START in e]
    ends = [e[_JOB_END] for e in entries if _JOB_END in e]
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
