"""Failing saves are seen (issue 48 item 10): with every save failing and training going on,
``status``'s training line says how many failed since the newest commit and the last error,
and goodput books a failed save's blocking time as its own badput, ``failed saves``. (status
used to show only the recovery point, goodput nothing.)"""

from __future__ import annotations

import datetime as dt

from measure_helpers import T0, ts

from elastix.measure.events import events_from_records
from elastix.measure.goodput import goodput
from elastix.measure.progress import progress
from elastix.views.status import training_line

ERR = "RESOURCE_EXHAUSTED: No space left on device"


def _records(fail_from: int | None) -> list[dict]:
    """A run of 60 steps of 0.1 s, a save of every 20th step blocking 0.5 s: those from
    ``fail_from`` on fail after their 0.5 s instead of committing."""
    out = [{"ts": ts(0), "event": "run_start", "pid": 1, "num_slices": 2, "devices": 8}]
    t = 1.0
    for step in range(1, 61):
        t += 0.1
        out.append({"ts": ts(t), "event": "step", "step": step, "seconds": 0.1, "loss": 1.0,
                    "live_slices": 2})
        if step % 20 == 0:
            out.append({"ts": ts(t), "event": "checkpoint_save_started", "step": step})
            t += 0.5
            if fail_from is not None and step >= fail_from:
                out.append({"ts": ts(t), "event": "checkpoint_save_failed", "step": step,
                            "error": ERR})
            else:
                out.append({"ts": ts(t), "event": "checkpoint_committed", "step": step,
                            "seconds": 0.5, "bytes": 10, "blocking_seconds": 0.5})
    return out


def test_status_says_how_many_saves_failed_since_the_newest_commit():
    p = progress(events_from_records(_records(fail_from=40)))
    assert (p.failed_saves, p.last_committed) == (2, 20)
    line = training_line(p, T0 + dt.timedelta(seconds=10))
    assert line.endswith(f"; 2 checkpoint saves failed since the newest commit (step 20), "
                         f"last: step 60: {ERR}"), line
    none = progress(events_from_records(_records(fail_from=20)))
    assert "failed since the start (none committed)" in training_line(none)
    fine = progress(events_from_records(_records(fail_from=None)))
    assert fine.failed_saves == 0 and "failed" not in training_line(fine)


def test_goodput_books_a_failed_saves_blocking_time_as_its_own_badput():
    rep = goodput(events_from_records(_records(fail_from=40)))
    assert round(rep.badput["failed saves"], 3) == 1.0  # two saves of 0.5 s each
    assert round(rep.badput["checkpoint stall"], 3) == 0.5  # the one that committed
    assert rep.failed_saves == 2 and rep.last_save_error == f"step 60: {ERR}"
    assert rep.to_json()["badput_seconds"]["failed_saves"] == rep.badput["failed saves"]
    assert round(rep.productive_seconds + sum(rep.badput.values()), 6) == rep.wall_seconds


def test_an_async_failed_saves_steps_stay_productive():
    # The save fails while later steps run: only time no step covers is the failed save's.
    recs = _records(fail_from=None)[:1]
    t = 1.0
    for step in range(1, 11):
        t += 0.1
        recs.append({"ts": ts(t), "event": "step", "step": step, "seconds": 0.1, "loss": 1.0,
                     "live_slices": 2})
        if step == 2:
            recs.append({"ts": ts(t), "event": "checkpoint_save_started", "step": 2})
    recs.append({"ts": ts(t), "event": "checkpoint_save_failed", "step": 2, "error": ERR})
    rep = goodput(events_from_records(recs))
    assert rep.badput["failed saves"] == 0.0 and rep.failed_saves == 1


def test_the_goodput_command_says_the_failed_saves(tmp_path, capsys):
    import json

    from elastix.main import main

    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _records(fail_from=40)))
    assert main(["workload", "goodput", "--events", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "│ badput: failed saves │ 1.000 │" in out, out
    assert f"2 checkpoint saves failed (last: step 60: {ERR}); their blocking time is " \
           "badput: failed saves" in out


def test_goodput_books_a_snapshot_apart_from_a_save():
    """A host snapshot's copy is its own badput, ``snapshot stall``: on a chip a 7 GB
    snapshot copied at the step boundary blocks for seconds while the save that writes the
    same copy blocks for under a millisecond, and one row for both named the wrong one."""
    recs = _records(fail_from=None)
    at = next(i for i, r in enumerate(recs) if r["event"] == "step" and r["step"] == 10)
    t = 1.0 + 10 * 0.1  # step 10's time; the snapshot is taken right after it
    recs[at + 1:at + 1] = [{"ts": ts(t + 2.0), "event": "snapshot_taken", "step": 10,
                            "seconds": 2.0, "bytes": 10}]
    for r in recs[at + 2:]:  # the rest of the run 2 s later
        r["ts"] = ts((dt.datetime.fromisoformat(r["ts"].replace("Z", "+00:00")) - T0)
                     .total_seconds() + 2.0)
    rep = goodput(events_from_records(recs))
    assert round(rep.badput["snapshot stall"], 3) == 2.0
    assert round(rep.badput["checkpoint stall"], 3) == 1.5  # three saves of 0.5 s
    assert rep.to_json()["badput_seconds"]["snapshot_stall"] == rep.badput["snapshot stall"]
    assert round(rep.productive_seconds + sum(rep.badput.values()), 6) == rep.wall_seconds
