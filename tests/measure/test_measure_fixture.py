"""Exact numbers on a recorded real run: the real trainer (tiny preset, 2 slices of 2 CPU devices)
on the local backend, two workers SIGKILLed by `elastix chaos kill-worker --measure`.

Recorded before the trainer logged `run start` and checkpoint lines (docs/events.md asks for
them), so the head log here carries less than the events file: the recovery numbers agree; the
start-up and checkpoint-stall parts of goodput need the events (or a newer log).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from elastix.measure.events import events_from_jsonl, events_from_log, recoveries
from elastix.measure.goodput import goodput

FIX = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def events():
    return events_from_jsonl((FIX / "real_run.events.jsonl").read_text())


@pytest.fixture(scope="module")
def log_events():
    return events_from_log((FIX / "real_run.head.log").read_text().splitlines())


def test_recoveries_from_events(events):
    r1, r2 = recoveries(events)
    assert r1.phase_seconds() == {"detection": 0.054, "cleanup": 0.001,
                                  "waiting for slices": 0.0, "restore": 0.138, "first step": 0.065}
    assert (r1.last_step, r1.restored_step, r1.steps_lost, r1.first_step) == (56, 50, 6, 51)
    assert (r1.restore_source, r1.restore_bytes, r1.restore_load_seconds) == ("checkpoint", 1229129,
                                                                          0.137)
    assert r1.downtime == 0.204 and r1.pid_same  # no kill time here: from detection
    assert r1.lost_slices == [1] and r2.lost_slices == [0]
    assert (r2.last_step, r2.restored_step, r2.steps_lost, r2.downtime) == (168, 160, 8, 0.284)


def test_goodput_from_events(events):
    g = goodput(events)
    assert g.wall_seconds == 45.895 and g.last_step == 175 and g.steps_redone == 14
    assert round(g.productive_seconds, 3) == 12.911
    assert {k: round(v, 3) for k, v in g.badput.items()} == {
        "detection": 0.107, "cleanup": 0.006, "waiting for slices": 0.0, "restore": 0.342,
        "reinitialisation": 0.002, "recompile": 0.138, "restart": 0.0, "checkpoint stall": 3.714,
        "snapshot stall": 0.0,
        "steps re-done": 1.307,
        "startup": 27.315, "failed saves": 0.0, "final save": 0.0, "teardown": 0.0,
        "other": 0.053}
    assert round(g.productive_seconds + sum(g.badput.values()), 6) == g.wall_seconds


def test_the_head_log_gives_the_same_recoveries(events, log_events):
    from_events, from_log = recoveries(events), recoveries(log_events)
    assert len(from_log) == 2
    for a, b in zip(from_events, from_log, strict=True):
        for key in ("restored_step", "last_step", "steps_lost", "restore_source", "restore_bytes",
                    "restore_load_seconds", "first_step", "first_step_time_seconds", "first_step_at",
                    "restored", "slices_ready", "cleanup_done", "lost_slices", "downtime"):
            assert getattr(a, key) == getattr(b, key), key
        # this recording's log line and event were stamped by two calls: 1 ms apart at most
        assert abs(a.start - b.start) <= 1


def test_a_run_with_every_log_line_gives_identical_numbers_from_either_source():
    """A newer recording (tiny preset, 2 slices, one SIGKILLed worker, snapshots every 5 steps):
    the trainer now logs every event in the same call, so the head log alone gives exactly the
    numbers the events file gives: recoveries and the whole goodput breakdown."""
    ev = events_from_jsonl((FIX / "real_run2.events.jsonl").read_text())
    lg = events_from_log((FIX / "real_run2.head.log").read_text().splitlines())
    assert recoveries(ev) == recoveries(lg)
    (r,) = recoveries(ev)
    assert r.restore_source == "snapshot" and r.steps_lost == r.last_step - r.restored_step
    assert r.pid_same
    assert goodput(ev) == goodput(lg)
    assert goodput(ev).last_step == 400
