"""Goodput on the devices' clock (issue 74): a step's time runs from the previous result being
ready on the devices to its own, however late and in what bursts the loop read it, and a copy
costs what it added to the steps' pace, never the loop's wait for it. An events file from before
(no ``clock``) reads with the old rules, and says so."""

from __future__ import annotations

import datetime as dt

import pytest

from elastix.backends.base import EVENTS_FILE, TrainerEvents
from elastix.measure.events import events_of
from elastix.measure.goodput import goodput

T0 = dt.datetime(2026, 12, 8, 1, 0, 0, tzinfo=dt.timezone.utc)


def _ts(seconds: float) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _run(paces: dict[int, float], *, steps: int = 30, device: bool = True,
         snapshot_at: int = 10, copy_from: float | None = None, copy_seconds: float = 0.0,
         loop_wait: float = 0.4) -> list[dict]:
    """A run whose step ``n`` took ``paces.get(n, 0.1)`` s on the devices. The loop waited
    ``loop_wait`` s for the snapshot of ``snapshot_at`` and then read the steps queued meanwhile
    in a burst: each step's event comes late (``read_lag``), never its result."""
    recs = [{"ts": _ts(0.0), "event": "run_start", "pid": 7, "num_slices": 1, "devices": 1,
             "config": {}}]
    t, read = 1.0, 1.0  # step 1 (compile) ends at 1.0
    for n in range(1, steps + 1):
        if n > 1:
            t += paces.get(n, 0.1)
        read = max(read, t)
        if n == snapshot_at + 1:
            read = t + loop_wait  # the loop waited for the copy; the devices did not
        rec = {"ts": _ts(read), "event": "step", "pid": 7, "step": n,
               "seconds": 1.0 if n == 1 else paces.get(n, 0.1), "loss": 2.0,
               "live_slices": 1, "tflops_per_device": 1.0, "global_batch": 8}
        if device:
            rec.update(clock="device", read_lag=round(read - t, 6))
        else:
            rec["ts"] = _ts(t)
        recs.append(rec)
        if n == snapshot_at + 3:  # the staged copy lands a few steps later
            snap = {"ts": _ts(read), "event": "snapshot_taken", "pid": 7, "step": snapshot_at,
                    "seconds": loop_wait, "bytes": 100}
            if copy_from is not None:
                snap.update(copy_began=_ts(copy_from), copy_seconds=copy_seconds)
            recs.append(snap)
    recs.append({"ts": _ts(t), "event": "run_end", "pid": 7, "status": "completed",
                 "reason": "all steps done", "step": steps})
    return recs


def _goodput(recs):
    events, _ = events_of(TrainerEvents(EVENTS_FILE, True, records=recs))
    return goodput(events)


def test_a_copy_costs_what_it_added_to_the_steps_not_the_loops_wait():
    # The copy of step 10 ran beside steps 11 and 12 (from 2.0 s for 0.25 s) and slowed them
    # by 0.05 and 0.02 s; the loop waited 0.4 s for it meanwhile.
    recs = _run({11: 0.15, 12: 0.12}, copy_from=2.0, copy_seconds=0.25)
    g = _goodput(recs)
    assert g.clock == "device"
    assert g.badput["snapshot stall"] == pytest.approx(0.07, abs=0.002)
    # productive: 29 steps at 0.1 s on the devices (the compile step is start-up)
    assert g.productive_seconds == pytest.approx(29 * 0.1, abs=0.003)
    assert sum(g.badput.values()) + g.productive_seconds == pytest.approx(g.wall_seconds)


def test_steps_read_in_a_burst_keep_their_time():
    # No copy cost at all: the loop's 0.4 s wait and the burst of reads after it change nothing.
    g = _goodput(_run({}, copy_from=2.0, copy_seconds=0.05))
    assert g.badput["snapshot stall"] == pytest.approx(0.0, abs=0.001)
    assert g.productive_seconds == pytest.approx(2.9, abs=0.003)


def test_an_events_file_from_before_reads_with_the_old_rules():
    g = _goodput(_run({}, device=False))
    assert g.clock == "loop"
    assert g.badput["snapshot stall"] == pytest.approx(0.4, abs=0.002)  # the loop's wait
    assert g.to_json()["clock"] == "loop"
