"""Goodput and badput over a run, from a normalised event stream (:mod:`elastix.measure.events`).

The run's wall time (first event to last) is painted with intervals, each with a cause; where
intervals overlap the higher-priority cause wins, and time no event accounts for is "other". So
the causes partition the wall time exactly and goodput = productive / wall.

- productive: ``step`` intervals whose result was kept: ``[end - seconds, end]``, ``end`` the
  event's time less its ``read_lag`` (elastix since issue 74 dates a step by when its result
  was ready on the devices, ``clock: device``: the intervals are then the devices' time,
  contiguous, however late or in what bursts the loop read them);
- steps re-done: step intervals rolled back by a later restore to an earlier step;
- detection, cleanup, waiting for slices, restore, recompile (first step after recovery), restart:
  the recovery phases (:meth:`Recovery.phases`); detection starts at the kill when known, else at
  the last event before the failure surfaced;
- reinitialisation: the part of a restore phase before the checkpoint's own load (a restarted
  process's start-up, or an in-process rebuild of mesh and state: :meth:`Recovery.restore_split`),
  the load staying restore;
- checkpoint stall, snapshot stall: with device-clocked steps, what the copy added to the
  steps' pace (:func:`_copy_costs`: the excess of the next step's interval over the median
  step). Otherwise (the rules before issue 74): a save's ``blocking_seconds``, a host
  snapshot's ``seconds``
  (apart since issue 58: on a chip a 7 GB snapshot copied at the boundary blocks for seconds
  while the save beside it blocks for under a millisecond). Each is placed right after
  the ``step`` event of the saved step, or right before the save's own event when that step's
  event comes later: then from when the save began (its commit less its ``seconds``), so an
  asynchronous save (MaxText: committed after its step's late line) stalls where it blocked;
- startup: a run's start to the end of its first step (compile), minus any start-up restore;
- final save, teardown: after a run's last step, until its ``run_end``: the saves it finished
  then (the final checkpoint, a copy still being read), then the rest;
- failed saves: a save that did not commit (``checkpoint_save_failed``), from its
  ``checkpoint_save_started`` to its failure, where no step ran meanwhile (an asynchronous
  save's steps stay productive): the time a save blocked for nothing.

Slice-weighted goodput weighs each productive piece by the live slices of its step over the
slices of the full mesh (:func:`full_mesh_slices`), as ml-goodput-measurement's
``stepping_slice_efficiency`` weighs time (``goodput_elastic.py`` L198-235): a replica-resized
step on 2 of 3 slices is 2/3 productive there, fully productive in plain goodput.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Any

from elastix.measure.events import (
    Event,
    Recovery,
    assign_kills,
    parse_ts,
    recoveries,
    snake,
    time_goes_back,
)

# Highest priority first.
CAUSES = ("detection", "cleanup", "waiting for slices", "restore", "reinitialisation",
          "recompile", "restart", "checkpoint stall", "snapshot stall", "steps re-done",
          "productive",
          "failed saves", "startup", "final save", "teardown")
BADPUT = tuple(c for c in CAUSES if c != "productive") + ("other",)
_PHASE_CAUSE = {"first step": "recompile"}


_NICE = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)


def auto_window(wall_seconds: float) -> float:
    """A goodput window giving about 20 windows over the run, on a round number of seconds
    (a fixed minute is one flat block for a short smoke run)."""
    target = max(wall_seconds / 20, 1)
    return float(next((n for n in _NICE if n >= target), _NICE[-1]))


@dataclasses.dataclass
class GoodputReport:
    """Goodput of a run and where the rest of the wall time went."""

    start: int  # ms since the epoch
    end: int
    productive_seconds: float
    badput: dict[str, float]  # cause -> seconds, every cause in BADPUT
    last_step: int | None
    steps_redone: int  # step executions whose result was rolled back
    recoveries: list[Recovery]
    segments: list[tuple[str, int, int]]  # (cause, start ms, end ms), contiguous, in order
    problem: str | None = None  # why nothing could be computed (time going backwards)
    failed_saves: int = 0  # checkpoint saves that did not commit
    last_save_error: str | None = None  # the newest one's "step N: error'
    full_mesh_slices: int | None = None  # None: no event says how many slices the mesh has
    slice_weighted_productive_seconds: float | None = None
    clock: str = "loop"
    """``device``: the steps' times were read on the devices' side and a copy's cost is what it
    added to them; ``loop``: an older events file, a log or MaxText, read with the rules from
    before issue 74 (a copy's cost is the loop's wait)."""

    @property
    def wall_seconds(self) -> float:
        return (self.end - self.start) / 1000

    @property
    def goodput(self) -> float | None:
        """Productive time over wall time (None for an empty run)."""
        return self.productive_seconds / self.wall_seconds if self.end > self.start else None

    @property
    def slice_weighted_goodput(self) -> float | None:
        """Productive time weighted by live slices over the full mesh's, over wall time (None
        for an empty run or when the mesh's slice count is unknown)."""
        if self.slice_weighted_productive_seconds is None or self.end <= self.start:
            return None
        return self.slice_weighted_productive_seconds / self.wall_seconds

    def series(self, window_seconds: float) -> list[tuple[float, float, float]]:
        """Goodput over time: (seconds since start, goodput in the window, cumulative goodput)."""
        win = max(1, int(window_seconds * 1000))
        out = []
        total = self.end - self.start
        edges = list(range(self.start + win, self.end, win)) + [self.end] if total > 0 else []
        cum = 0
        lo = self.start
        for hi in edges:
            prod = sum(max(0, min(b, hi) - max(a, lo)) for c, a, b in self.segments
                       if c == "productive" and b > lo and a < hi)
            cum += prod
            out.append(((hi - self.start) / 1000, prod / (hi - lo), cum / (hi - self.start)))
            lo = hi
        return out

    def between(self, lo: int, hi: int) -> float | None:
        """Goodput over ``[lo, hi]`` (ms) only: its productive time over its length (None for
        an empty window). A chaos run's bound reads it from its first fault on, so the start-up
        before the soak began neither helps nor hurts it."""
        lo, hi = max(lo, self.start), min(hi, self.end)
        if hi <= lo:
            return None
        prod = sum(max(0, min(b, hi) - max(a, lo)) for c, a, b in self.segments
                   if c == "productive" and b > lo and a < hi)
        return prod / (hi - lo)

    def to_json(self) -> dict[str, Any]:
        from elastix.measure.events import fmt_ms

        return {
            "start": fmt_ms(self.start), "end": fmt_ms(self.end),
            "wall_seconds": self.wall_seconds, "productive_seconds": self.productive_seconds,
            "goodput": self.goodput,
            "slice_weighted_goodput": self.slice_weighted_goodput,
            "slice_weighted_productive_seconds": self.slice_weighted_productive_seconds,
            "full_mesh_slices": self.full_mesh_slices,
            "badput_seconds": {snake(c): v for c, v in self.badput.items()},
            "last_step": self.last_step, "steps_redone": self.steps_redone,
            "failed_saves": self.failed_saves, "last_save_error": self.last_save_error,
            "recoveries": [r.to_json() for r in self.recoveries],
            "problem": self.problem, "clock": self.clock,
        }


def device_clocked(events: list[Event]) -> bool:
    """Whether the steps' times were read on the devices' side (``clock: device``, elastix
    since issue 74): their intervals are then contiguous device time, and a copy's cost is
    what it added to them; else (an older events file, a log, MaxText) the loop's."""
    return any(e.name == "step" and e.data.get("clock") == "device" for e in events)


def _step_end(ev: Event) -> int:
    """When a step's result was ready (ms): its event's time less the loop's ``read_lag``."""
    lag = ev.data.get("read_lag")
    ok = isinstance(lag, (int, float)) and not isinstance(lag, bool) and 0 <= lag < 86400
    return ev.t - round(lag * 1000) if ok else ev.t


def _step_intervals(events: list[Event]) -> tuple[list, list, dict[int, int]]:
    """Kept and rolled-back step intervals, and the time each step (last execution) ended."""
    kept: list[tuple[int, int, int]] = []  # (step, start, end)
    redone: list[tuple[int, int, int]] = []
    step_end: dict[int, int] = {}
    first_of_run = True  # the stream's first step compiles, even when no run_start was logged
    for ev in events:
        if ev.name == "run_start":
            first_of_run = True
        elif ev.name in ("restore", "elastic_restored") and ev.data["step"] is not None:
            r = ev.data["step"]
            redone += [k for k in kept if k[0] > r]
            kept = [k for k in kept if k[0] <= r]
        elif ev.name == "step":
            end = _step_end(ev)
            step_end[ev.data["step"]] = end
            if first_of_run:  # the compile step belongs to start-up
                first_of_run = False
                continue
            secs = ev.data["seconds"] or 0.0
            kept.append((ev.data["step"], end - round(secs * 1000), end))
    return kept, redone, step_end


def _copy_windows(events: list[Event]) -> list[tuple[str, int, int]]:
    """When each host copy ran (ms): a staged or overlapped snapshot's from its
    ``copy_began`` for its ``copy_seconds``; a boundary snapshot's the loop's wait before its
    event; a checkpoint's from its save's start to its commit (its copy and its write)."""
    out = []
    for ev in events:
        d = ev.data
        if ev.name == "snapshot_taken":
            began, secs = d.get("copy_began"), d.get("copy_seconds")
            if isinstance(began, str) and isinstance(secs, (int, float)) and secs >= 0:
                try:
                    a = parse_ts(began)
                except (TypeError, ValueError, OverflowError):
                    a = None
                if a is not None:
                    out.append(("snapshot stall", a, a + round(secs * 1000)))
                    continue
            if d.get("seconds"):
                out.append(("snapshot stall", ev.t - round(d["seconds"] * 1000), ev.t))
        elif ev.name == "checkpoint_committed" and d.get("seconds"):
            out.append(("checkpoint stall", ev.t - round(d["seconds"] * 1000), ev.t))
    return out


def _copy_costs(events: list[Event], kept: list[tuple[int, int, int]]
                ) -> list[tuple[str, int, int]]:
    """Device-clocked steps: what the copies added to the steps' pace, measured. The steps whose
    interval overlaps a copy (:func:`_copy_windows`: a staged copy's device copy and its read
    while the steps ran, a boundary copy's wait, a checkpoint's copy and write) are compared
    with the median interval of the steps no copy touched: their time beyond as many median
    steps is the copy's stall, never more. It is booked at the ends of the steps that ran over
    the median, in proportion to how far each did (a step of a copy's that ran under it makes
    up for one that ran over: noise, not cost). Never the loop's wait: the devices go on
    computing the steps queued while the loop waits for a copy (issue 74)."""
    windows = sorted(_copy_windows(events), key=lambda w: w[1])
    touched: dict[int, int] = {}  # step -> the first window it overlaps
    for s, a, b in kept:
        for i, (_, wa, wb) in enumerate(windows):
            if wa < b and a < wb:
                touched.setdefault(s, i)
                break
    plain = sorted(b - a for s, a, b in kept if s not in touched)
    if not plain:
        return []
    base = plain[len(plain) // 2]
    out = []
    for i, (cause, _, _) in enumerate(windows):
        steps = [(a, b) for s, a, b in kept if touched.get(s) == i]
        net = sum(b - a - base for a, b in steps)
        over = sum(max(0, b - a - base) for a, b in steps)
        if net <= 0 or over <= 0:
            continue
        for a, b in steps:
            excess = max(0, b - a - base) * net / over
            if excess >= 1:
                out.append((cause, b - round(excess), b))
    return out


def _intervals(events: list[Event], recs: list[Recovery]) -> list[tuple[str, int, int]]:
    kept, redone, _ = _step_intervals(events)
    device = device_clocked(events)
    out = [("productive", a, b) for _, a, b in kept] + [("steps re-done", a, b)
                                                        for _, a, b in redone]
    for rec in recs:
        for n, a, b in rec.phases():
            split = rec.restore_split() if n == "restore" else None
            if split is not None and split["reinitialisation"] > 0:
                # The restore phase of a restarted (or re-initialising) process is mostly not
                # the checkpoint's read: book that part as re-initialisation, the load as restore.
                cut = b - round(split["load"] * 1000)
                out += [("reinitialisation", a, cut), ("restore", cut, b)]
            else:
                out.append((_PHASE_CAUSE.get(n, n), a, b))
    run_start = None
    last_step_t: dict[int, int] = {}
    stall_cursor: dict[int, int] = {}
    save_began: dict[int, int] = {}  # step -> its save's start, until it commits or fails
    recovering = False
    for ev in events:
        if ev.name == "elastic_detected":
            recovering = True
        elif ev.name == "step" and recovering:
            # The first step after a recovery compiles or warms up, whether or not the log said
            # when the restore ended (MaxText's may not): never productive time.
            recovering = False
            secs = ev.data["seconds"] or 0.0
            out.append(("recompile", _step_end(ev) - round(secs * 1000), _step_end(ev)))
        if ev.name == "run_start":
            run_start = ev.t
        elif ev.name == "step":
            end = _step_end(ev)
            last_step_t[ev.data["step"]] = end
            if not last_step_t.keys() - {ev.data["step"]} and run_start is None:
                run_start = end - round((ev.data["seconds"] or 0.0) * 1000)  # no run_start
            if run_start is not None:
                out.append(("startup", run_start, end))
                run_start = None
        elif ev.name == "restore" and ev.data["seconds"] is not None:
            out.append(("restore", ev.t - round(ev.data["seconds"] * 1000), ev.t))
        if ev.name in ("restore", "elastic_restored") and ev.data["step"] is not None:
            for s in [s for s in last_step_t if s > ev.data["step"]]:
                del last_step_t[s]  # rolled back: a later save of that step is a new one
        elif ev.name == "checkpoint_save_started":
            save_began[ev.data["step"]] = ev.t
        elif ev.name == "checkpoint_save_failed" and ev.data["step"] in save_began:
            out.append(("failed saves", save_began.pop(ev.data["step"]), ev.t))
        elif ev.name in ("checkpoint_committed", "snapshot_taken") and device:
            if ev.name == "checkpoint_committed":
                save_began.pop(ev.data["step"], None)
        elif ev.name in ("checkpoint_committed", "snapshot_taken"):
            if ev.name == "checkpoint_committed":
                save_began.pop(ev.data["step"], None)
            stall = "checkpoint stall" if ev.name == "checkpoint_committed" else "snapshot stall"
            secs = ev.data["blocking_seconds" if ev.name == "checkpoint_committed" else "seconds"]
            at = last_step_t.get(ev.data["step"])
            total = ev.data["seconds"] if ev.name == "checkpoint_committed" else None
            began = ev.t - round(total * 1000) if total else None
            if secs and began is not None and (at is None or at > began):
                # The saved step's line came after the save began, or not yet: MaxText logs a
                # step's line an iteration late, and an asynchronous save commits later still.
                # The stall is the save's blocking part, from when it began.
                out.append((stall, began, began + round(secs * 1000)))
            elif at is not None and secs:
                a = stall_cursor.get(at, at)
                b = a + round(secs * 1000)
                stall_cursor[at] = b
                out.append((stall, a, b))
            elif secs:
                out.append((stall, ev.t - round(secs * 1000), ev.t))
    if device:
        out += _copy_costs(events, kept)
    return out + _after_the_last_step(events)


def _after_the_last_step(events: list[Event]) -> list[tuple[str, int, int]]:
    """A run that ended (``run_end``) after its last step: the saves it finished then (its
    final checkpoint, a staged copy still being read) are ``final save``, from the last step's
    end to the last of them; the rest up to ``run_end`` is ``teardown``."""
    if not events or events[-1].name != "run_end":
        return []
    ends = [_step_end(e) for e in events if e.name == "step"]
    if not ends:
        return []
    last = max(ends)
    saves = [e.t for e in events if e.t > last and e.name in (
        "checkpoint_save_started", "checkpoint_committed", "checkpoint_save_failed",
        "snapshot_taken")]
    out = []
    if saves:
        out.append(("final save", last, max(saves)))
    out.append(("teardown", max(saves) if saves else last, events[-1].t))
    return out


def _paint(intervals: list[tuple[str, int, int]], lo: int, hi: int) -> list[tuple[str, int, int]]:
    """Sweep the intervals over [lo, hi]; each elementary piece gets its highest-priority cause."""
    rank = {c: i for i, c in enumerate(CAUSES)}
    marks: list[tuple[int, int, int]] = []
    for cause, a, b in intervals:
        a, b = max(a, lo), min(b, hi)
        if b > a:
            marks += [(a, 1, rank[cause]), (b, -1, rank[cause])]
    marks.sort()
    counts = [0] * len(CAUSES)
    segs: list[tuple[str, int, int]] = []
    t = lo
    i = 0
    while t < hi:
        while i < len(marks) and marks[i][0] <= t:
            counts[marks[i][2]] += marks[i][1]
            i += 1
        nxt = marks[i][0] if i < len(marks) else hi
        top = next((CAUSES[k] for k in range(len(CAUSES)) if counts[k] > 0), "other")
        if segs and segs[-1][0] == top:
            segs[-1] = (top, segs[-1][1], nxt)
        else:
            segs.append((top, t, nxt))
        t = nxt
    return segs


def goodput(events: list[Event], kills: list[int] | None = None) -> GoodputReport:
    """Goodput and badput by cause over the run in ``events``.

    Args:
        events: a normalised stream (``events_from_jsonl`` / ``events_from_log``).
        kills: kill times (ms) when known: detection counts from each kill where the trainer
            dated no loss (:class:`elastix.protocol.phases.Moments`).
    """
    recs = recoveries(events)
    if kills:
        assign_kills(recs, kills)
    last = next((e.data["step"] for e in reversed(events) if e.name == "step"), None)
    back = time_goes_back(events)
    if not events or back:
        return GoodputReport(0, 0, 0.0, dict.fromkeys(BADPUT, 0.0), last, 0, recs, [], back)
    # A log without its run_start line begins at the first step's end: start at its beginning.
    first = next((e for e in events if e.name == "step"), None)
    lo = events[0].t if first is None else min(events[0].t, first.t - round(
        (first.data["seconds"] or 0.0) * 1000))
    hi = events[-1].t
    segs = _paint(_intervals(events, recs), lo, hi)
    totals = dict.fromkeys(CAUSES + ("other",), 0)
    for cause, a, b in segs:
        totals[cause] += b - a
    kept, redone, _ = _step_intervals(events)
    full = full_mesh_slices(events)
    weighted = _slice_weighted(segs, kept, events, full) if full else None
    failed = [e for e in events if e.name == "checkpoint_save_failed"]
    return GoodputReport(lo, hi, totals["productive"] / 1000,
                         {c: totals[c] / 1000 for c in BADPUT}, last, len(redone), recs, segs,
                         full_mesh_slices=full, slice_weighted_productive_seconds=weighted,
                         failed_saves=len(failed), last_save_error=_save_error(failed[-1])
                         if failed else None,
                         clock="device" if device_clocked(events) else "loop")


def _save_error(ev: Event) -> str:
    """``step 440: RESOURCE_EXHAUSTED: ...`` of a failed save (its error's first line)."""
    return f"step {ev.data.get('step')}: {ev.data.get('error') or 'unknown error'}"


def full_mesh_slices(events: list[Event]) -> int | None:
    """Slices of the full mesh: the largest of run_start's ``num_slices`` and the steps' live
    slice counts (a MaxText log has only the latter); None when no event says."""
    counts = [e.data.get("num_slices") if e.name == "run_start" else e.data.get("live_slices")
              for e in events if e.name in ("run_start", "step")]
    known = [c for c in counts if isinstance(c, int) and c > 0]
    return max(known) if known else None


def _slice_weighted(segs: list[tuple[str, int, int]], kept: list[tuple[int, int, int]],
                    events: list[Event], full: int) -> float:
    """Productive seconds, each piece weighted by its step's live slices over ``full`` (a step
    whose line has no slice count ran on the full mesh)."""
    live = {_step_end(e): e.data.get("live_slices") for e in events if e.name == "step"}
    steps = sorted((a, b, (live.get(b) or full) / full) for _, a, b in kept)
    ends = [b for _, b, _ in steps]
    total = 0
    for cause, a, b in segs:
        if cause != "productive":
            continue
        i = bisect.bisect_right(ends, a)
        cursor = a  # step intervals may overlap (a step's seconds can reach into the last's)
        while i < len(steps) and steps[i][0] < b:
            sa, sb, w = steps[i]
            lo, hi = max(cursor, sa), min(b, sb)
            if hi > lo:
                total += (hi - lo) * w
                cursor = hi
            i += 1
    return total / 1000
