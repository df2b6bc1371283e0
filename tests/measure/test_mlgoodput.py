"""`workload goodput --categories ml-goodput` and slice-weighted goodput."""

from __future__ import annotations

import json
from pathlib import Path

from measure_helpers import ts

from elastix.main import main
from elastix.measure.events import events_from_records
from elastix.measure.goodput import goodput
from elastix.measure.mlgoodput import measure

FIX = Path(__file__).parent / "fixtures"


def _stream(live: list[int]) -> list[dict]:
    """A 2-slice run: a 1 s compile step, then 1 s steps on ``live`` slices each, completed."""
    recs = [{"ts": ts(0), "event": "run_start", "pid": 1, "num_slices": 2, "devices": 4}]
    recs += [{"ts": ts(i + 1), "event": "step", "pid": 1, "step": i + 1, "seconds": 1.0,
              "live_slices": n} for i, n in enumerate([2] + live)]
    recs.append({"ts": ts(len(live) + 1), "event": "run_end", "pid": 1, "status": "completed",
                 "step": len(live) + 1})
    return recs


def test_a_step_on_half_the_mesh_is_half_productive_slice_weighted():
    rep = goodput(events_from_records(_stream([2, 1, 1])))
    assert rep.wall_seconds == 4 and rep.productive_seconds == 3
    assert rep.goodput == 0.75 and rep.full_mesh_slices == 2
    assert rep.slice_weighted_productive_seconds == 2.0 and rep.slice_weighted_goodput == 0.5
    d = rep.to_json()
    assert d["slice_weighted_goodput"] == 0.5 and d["goodput"] == 0.75


def test_the_library_counts_the_same_steps_fully_and_reports_slice_efficiency():
    ml = measure(events_from_records(_stream([2, 1, 1])))
    # steps 1-3 by their next start, the last to the job's end; the first step is as long
    # as the mean, so no PROGRAM_STARTUP: all 4 s productive
    assert ml.total_elapsed_time == 4 and ml.productive_seconds == 4
    assert ml.badput_seconds["PROGRAM_STARTUP"] == 0 and ml.badput_seconds["OTHER"] == 0
    # stepping: 2 of 2 slices for 2 s, 1 of 2 for 2 s
    assert ml.stepping_slice_efficiency == 0.75


def test_no_slice_count_anywhere_means_no_slice_weighted_goodput():
    recs = [r for r in _stream([2]) if r["event"] != "run_start"]
    for r in recs:
        r.pop("live_slices", None)
    rep = goodput(events_from_records(recs))
    assert rep.full_mesh_slices is None and rep.slice_weighted_goodput is None


def test_replica_resize_run_slice_weighted_is_lower(capsys):
    ev = FIX / "replica_resize_down_run.events.jsonl"
    assert main(["workload", "goodput", "--events", str(ev), "-o", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    # 290 of its 400 steps ran on 1 of 2 slices: about a third of the goodput is lost
    assert d["full_mesh_slices"] == 2
    assert 0.5 < d["slice_weighted_goodput"] / d["goodput"] < 0.75
    assert main(["workload", "goodput", "--events", str(ev)]) == 0
    assert "slice-weighted goodput 55.9% (productive time x live slices / 2" in \
        capsys.readouterr().out


def test_ml_goodput_json_and_table(capsys):
    ev = FIX / "replica_resize_run.events.jsonl"
    assert main(["workload", "goodput", "--events", str(ev), "--categories", "ml-goodput",
                 "-o", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["categories"] == "ml-goodput" and d["library"] == "ml-goodput-measurement 0.2.3"
    assert set(d["badput_seconds"]) >= {"TPU_INITIALIZATION", "TRAINING_PREP", "PROGRAM_STARTUP",
                                        "DATA_LOADING_SYNC", "CUSTOM_BADPUT_EVENTS", "OTHER",
                                        "UNPRODUCTIVE_CHECKPOINT_SAVE_TIME",
                                        "UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME",
                                        "WASTED_PROGRESS_FROM_DISRUPTION",
                                        "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION",
                                        "ELASTIC_SLICE_DOWN", "ELASTIC_SCALE_UP",
                                        "ELASTIC_REINITIALIZATION"}
    assert d["badput_seconds"]["ELASTIC_SCALE_UP"] > 0 and d["disruption_count"] == 1
    assert round(d["elastix"]["goodput"], 4) == 0.334 and d["elastix"]["full_mesh_slices"] == 2
    assert d["differences"].startswith("differs from elastix's own")
    assert main(["workload", "goodput", "--events", str(ev), "--categories", "ml-goodput"]) == 0
    out = capsys.readouterr().out
    assert "ml-goodput goodput 35.4%" in out and "ELASTIC_REINITIALIZATION" in out
    assert "elastix's own: goodput 33.4%" in out and "differs from elastix's own" in out


def test_unknown_categories_is_one_line_and_exit_2(capsys):
    ev = FIX / "clean_run.events.jsonl"
    assert main(["workload", "goodput", "--events", str(ev), "--categories", "google"]) == 2
    err = capsys.readouterr().err
    assert "--categories 'google' is not elastix or ml-goodput" in err
    assert "Traceback" not in err
