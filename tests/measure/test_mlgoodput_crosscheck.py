"""elastix's ml-goodput view against Google's own calculator, on real recorded runs.

The same entries (:func:`elastix.measure.mlgoodput.entries` of a run's events) go to the real
``ElasticGoodputCalculator`` of ml-goodput-measurement 0.2.3 (the test extra's pin) and to
:func:`elastix.measure.mlgoodput.calculate`; they must agree to 0.5 points of goodput and, per
category, to 1 % of the wall time. Offline: any connection beyond loopback fails the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from goodput_library import library_report, refuse_network

from elastix.measure import mlgoodput
from elastix.measure.events import events_from_jsonl

FIX = Path(__file__).parent / "fixtures"
RUNS = ("clean_run", "replica_resize_run", "replica_resize_down_run", "real_run", "real_run2")


@pytest.fixture
def no_network(monkeypatch):
    refuse_network(monkeypatch)


def _run(name: str):
    events = events_from_jsonl((FIX / f"{name}.events.jsonl").read_text())
    return events, mlgoodput.entries(events)


@pytest.mark.parametrize("name", RUNS)
def test_same_goodput_and_categories_as_the_library(name, tmp_path, monkeypatch, no_network):
    pytest.importorskip("ml_goodput_measurement", reason="pip install -e '.[test]' (.ci/setup)")
    events, entries = _run(name)
    ours = mlgoodput.measure(events)
    lib = library_report(entries, events[-1].t / 1000, tmp_path, monkeypatch)
    assert abs(ours.goodput_percent - lib["goodput"]) <= 0.5, (ours.goodput_percent, lib)
    mine = ours.badput_percent()
    assert set(lib["breakdown"]) <= set(mine)
    for cat, theirs in lib["breakdown"].items():
        if isinstance(theirs, dict):
            assert set(theirs) == set(mine[cat]), cat
            for sub, v in theirs.items():
                assert abs(mine[cat][sub] - v) <= 1.0, (cat, sub, mine[cat][sub], v)
        else:
            assert abs(mine[cat] - theirs) <= 1.0, (cat, mine[cat], theirs)
    d = lib["details"]
    assert abs(ours.total_elapsed_time - d["total_elapsed_time"]) < 1e-3
    assert ours.max_productive_step == lib["max_step"]
    assert ours.disruption_count == d["disruption_count"]
    assert abs(ours.stepping_slice_efficiency - d["stepping_slice_efficiency"]) <= 0.01
    assert abs(ours.available_slice_efficiency - d["available_slice_efficiency"]) <= 0.01


def test_the_runs_reach_the_categories_they_are_here_for():
    """A feed that silently stopped mapping an event would still agree with the library:
    each run must land time in what it is in the suite for."""
    got = {n: mlgoodput.measure(_run(n)[0]) for n in RUNS}
    clean = got["clean_run"]
    assert clean.disruption_count == 0 and clean.ended
    assert clean.badput_seconds["TRAINING_PREP"] > 0
    assert clean.badput_seconds["UNPRODUCTIVE_CHECKPOINT_SAVE_TIME"] > 0
    up = got["replica_resize_run"]
    assert up.badput_seconds["ELASTIC_SCALE_UP"] > 0
    assert up.badput_seconds["ELASTIC_REINITIALIZATION"] > 0
    assert up.badput_seconds["CUSTOM_BADPUT_EVENTS"][mlgoodput.SNAPSHOT] > 0
    down = got["replica_resize_down_run"]
    assert down.stepping_slice_efficiency < 0.75  # most of the run on 1 of 2 slices
    assert got["real_run"].badput_seconds["WASTED_PROGRESS_FROM_DISRUPTION"] > 0
    assert not got["real_run"].ended  # no run_end: measured to its last event
