"""MaxText as the trainer, measured from its head log alone, on logs MaxText really printed.

``tests/fixtures/maxtext/*.log`` are maxtext 0.2.5 (pathwaysutils 0.1.13, orbax-checkpoint
0.12.8, jax 0.12.0.1) on CPU, each line led by the time it was read, RFC3339 with nanoseconds,
as the Kubernetes log API gives it with ``timestamps=true`` (PROVENANCE.md beside them says
how each was made; ``capture.py`` makes them again). What a number should be is read from the
log's own lines where the test can (``_at``, ``_step``), so a wrong parse cannot agree with it.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import tempfile
from pathlib import Path

import pytest

from elastix.backends.base import KillRecord
from elastix.main import main
from elastix.measure import maxtext
from elastix.measure.events import events_from_log, fmt_ms, log_note, parse_ts, recoveries
from elastix.measure.goodput import goodput
from elastix.measure.report import KillMeasurement
from elastix.views.measurement import recovery_rows

FIX = Path(__file__).parents[1] / "fixtures" / "maxtext"
FORMATS = json.loads((FIX / "formats.json").read_text())["formats"]


def _log(name: str) -> list[str]:
    return (FIX / f"{name}.log").read_text().splitlines()


def _ms(line: str) -> int:
    return parse_ts(line.split(" ", 1)[0][:26] + "Z")


def _at(lines: list[str], text: str, last: bool = False) -> int:
    """The time of the first (or last) line containing ``text``."""
    hits = [x for x in lines if text in x]
    return _ms(hits[-1] if last else hits[0])


def _steps(lines: list[str]) -> list[int]:
    return [int(m.group(1)) for x in lines if (m := re.search(r"completed step: (\d+),", x))]


def _render(key: str, *args, **kw) -> str:
    f = FORMATS[key]
    return f["text"] % args if f["style"] == "printf" else f["text"].format(*args, **kw)


def test_the_parser_reads_the_sources_formats():
    """Each format the reader relies on, rendered as its source does, is recognised."""
    assert maxtext.DETECTED.search(_render("detected"))
    assert maxtext.DETECTED.search(_render("detected_old"))
    assert maxtext.SCALE_UP.search(_render("scale_up"))
    assert maxtext.ATTEMPT.search(_render("attempt", 2)).group(1) == "2"
    m = maxtext.SLICES_READY.search(_render("slices_ready", 3, 3, "{0, 1, 2}"))
    assert m.groups() == ("3", "3")
    assert not maxtext.SLICES_READY.search(_render("slices_short", 2, 3, "{0, 1}"))
    assert maxtext.RESTORE_FROM.search(_render("restore_from", step=3300)).group(1) == "3300"
    assert maxtext.RESTORE_DONE.search(
        _render("orbax_restored_0_11", 5.39, "gs://b/c/3300")).group(1) == "5.39"
    prefix = "I1201 11:49:10.568778 139629102898048 event_tracking.py:184] "
    load = prefix + _render("orbax_done", 0, "sync", "load", "", 0.27, "gs://b/c/checkpoints/200")
    assert maxtext.LOAD_DONE.search(load).groups() == ("0.27", "gs://b/c/checkpoints/200")
    save = prefix + _render("orbax_done", 0, "async", "save", " (blocking + background)", 0.35,
                            "/d/checkpoints/10")
    assert maxtext.SAVE_DONE.search(save).group(1) == "0.35"
    assert not maxtext.LOAD_DONE.search(save) and not maxtext.SAVE_DONE.search(load)
    blocking = prefix + _render("orbax_blocking_done", 0, "async", "save", 0.07, "save",
                                "/d/checkpoints/10")
    assert maxtext.SAVE_BLOCKING.search(blocking).groups() == ("0.07", "/d/checkpoints/10")
    assert maxtext.SAVED.search(_render("saved", step=20)).group(1) == "20"
    assert maxtext.SAVE_ASYNC.search(_render("save_started", step=20)).group(1) == "20"
    start = "I1202 06:29:55.309798 140309166955392 checkpoint_manager.py:1527] "
    assert maxtext.SAVE_START.search(start + _render("orbax_save_start", 0, 20)).group(1) == "20"
    assert not maxtext.SAVE_START.search(
        start + _render("orbax_save_start", 0, 20) + " due to preemption.")
    for key in ("config_param", "system_info"):
        text = _render(key, "run_name", "r1") if key == "config_param" else _render(
            key, version="0.12.0.1")
        assert maxtext.START_UP.search(prefix + text)
    assert maxtext.ABSL.match(prefix).group(1) == "139629102898048"
    vals = dict(step=3301, seconds=0.2, tflops=43.0, tokens=1.0, total_weights=8, loss=1.0,
                lm_loss=1.0, perplexity=2.0)
    lines = [f"2026-11-29T10:00:00.123456789Z {FORMATS['step']['text'].format(**vals)}",
             f"2026-11-29T10:00:01.123456789Z {FORMATS['step_elastic']['text'].format(**vals, live=2)}"]
    ev = events_from_log(lines)
    assert [(e.name, e.data["step"], e.data["seconds"], e.data["live_slices"]) for e in ev] == \
        [("step", 3301, 0.2, None), ("step", 3301, 0.2, 2)]


def test_a_plain_run_counts_start_up_from_its_first_line_and_its_saves_as_stall():
    lines = _log("plain")
    events = events_from_log(lines)
    assert events.skipped == 0 and recoveries(events) == []
    (start,) = [e for e in events if e.name == "run_start"]
    assert start.t == _ms(lines[0])  # not step 0: MaxText spends its first ~20 s starting
    saves = [e for e in events if e.name == "checkpoint_committed"]
    saved = [int(m.group(1)) for x in lines if (m := maxtext.SAVED.search(x))]
    assert [e.data["step"] for e in saves] == saved == [0, 10, 20, 29]
    # async_checkpointing=false: MaxText waited for Orbax's whole save (its own line's time).
    assert [e.data["blocking_seconds"] for e in saves] == [0.36, 0.27, 0.25, 0.42]
    assert [e.t for e in saves] == [_ms(x) for x in lines if maxtext.SAVED.search(x)]
    rep = goodput(events)
    assert rep.start == _ms(lines[0]) and rep.end == _at(lines, "completed step: 29,")
    step0 = _at(lines, "completed step: 0,")
    # (less what the first save and the steps' own intervals claim of that span)
    assert 0 < (step0 - _ms(lines[0])) / 1000 - rep.badput["startup"] < 1.0
    assert rep.badput["checkpoint stall"] == pytest.approx(0.36 + 0.27 + 0.25 + 0.42)
    assert rep.last_step == 29 and rep.steps_redone == 0 and rep.productive_seconds > 0


def test_a_sigkill_and_restart_is_a_restart_with_its_steps_redone():
    lines = _log("restart")
    starts = [i for i, x in enumerate(lines) if "[DECOUPLED NO-OP] gcs_storage" in x]
    second = starts[2]  # each process prints this twice as it imports: the 3rd is the new one
    first_run, second_run = lines[:second], lines[second:]
    events = events_from_log(lines)
    assert events.skipped == 0
    (r,) = recoveries(events)
    restored = int(maxtext.RESTORE_FROM.search("\n".join(second_run)).group(1))
    assert r.kind == "restart" and r.complete
    assert (r.last_step, r.restored_step, r.first_step) == (_steps(first_run)[-1], restored,
                                                            restored + 1) == (25, 20, 21)
    assert r.steps_lost == 5 and r.restore_load_seconds == 0.29
    assert r.start == _ms(second_run[0])  # the new process's first line
    assert r.prev_event == _ms(first_run[-1])  # the killed process's last line (its step 25)
    assert r.restored == _at(second_run, "Finished load in")
    assert r.first_step_at == _at(second_run, "completed step: 21,")
    assert r.phase_seconds() == {"restore": 22.992, "first step": 7.892, "restart": 9.52}
    assert r.not_in_log == []
    rep = goodput(events)
    assert rep.steps_redone == 5 and rep.badput["restart"] == pytest.approx(9.52)
    assert rep.start == _ms(lines[0]) and rep.last_step == 49


def test_a_head_that_died_with_a_traceback_restarts_at_the_new_processs_first_line():
    """The local backend's failing head always prints its traceback (the stand-in's DATA_LOSS)
    before the workload restarts it: the traceback is the dying process's, and the new
    process begins at the line after it. Before, the restart was counted from the traceback's
    first line (0 s of restart, and its start-up booked as restore)."""
    lines = _log("restart_traceback")
    tb = next(i for i, x in enumerate(lines) if "Traceback (most recent call last):" in x)
    err = next(i for i in range(tb, len(lines)) if "JaxRuntimeError: DATA_LOSS" in lines[i])
    first_run, second_run = lines[:err + 1], lines[err + 1:]
    assert "local Pathways stand-in active" in second_run[0]  # the new process's first line
    events = events_from_log(lines)
    assert events.skipped == 0
    (r,) = recoveries(events)
    assert r.kind == "restart" and r.complete
    assert (r.last_step, r.restored_step, r.first_step) == (40, 40, 41)
    assert r.start == _ms(second_run[0])
    assert r.prev_event == _at(first_run, "completed step: 40,")  # its last event
    load_done = _at(second_run, "Finished load in")
    assert r.restored == load_done
    # What the log shows: the restart from the old process's last event to the new one's
    # first line, the restore from there to Orbax's load done, split into the process's
    # re-initialisation and Orbax's own load (0.12 s, its line's own number).
    assert r.phase_seconds()["restart"] == (_ms(second_run[0]) - r.prev_event) / 1000 > 4
    assert r.phase_seconds()["restore"] == (load_done - _ms(second_run[0])) / 1000
    split = r.restore_split()
    assert split == {"reinitialisation": round((load_done - _ms(second_run[0])) / 1000 - 0.12, 3),
                     "load": 0.12}
    assert r.to_json()["restore_split"] == split
    kill = KillRecord("mt", "mt-worker-0-0", 0, 0, None,
                      dt.datetime.fromtimestamp(r.prev_event / 1000, dt.timezone.utc))
    m = KillMeasurement([kill], r, "log", "Running", 1, 1, None, None, False)
    rows = dict(recovery_rows(m))
    assert rows["restore"] == f"{r.phase_seconds()['restore']:.3f} s"
    assert rows["of which"] == (f"re-initialisation {split['reinitialisation']:.3f} s, "
                                f"load {split['load']:.3f} s")
    rep = goodput(events)
    assert rep.badput["restart"] == pytest.approx(r.phase_seconds()["restart"])


def test_a_loss_during_start_up_is_not_detection():
    """A slice host killed while MaxText was still starting (the stand-in aimed it at the first
    step's entry): the failure surfaces 14 s after the head's first line, all of it ordinary
    start-up. Detection is not in the log (no kill time, no step before it), so it is not
    counted from the head's first line; goodput books that time as start-up."""
    lines = _log("startup_kill")
    events = events_from_log(lines)
    assert events.skipped == 0
    (r,) = recoveries(events)
    assert r.kind == "in-process" and r.complete and r.first_step == 0
    assert r.start == _at(lines, "Elastic event detected")
    assert r.prev_event is None and r.detection_from is None
    assert r.phase_seconds()["detection"] is None and "detection" in r.not_in_log
    assert r.phase_seconds()["waiting for slices"] == (
        _at(lines, "Sufficient slices active", last=True) - _at(lines, "Elastic attempt 2")) / 1000
    rep = goodput(events)
    assert rep.badput["detection"] == 0
    # Start-up: the head's first line to step 0's end, less the recovery's own phases.
    phases = sum(v for v in r.phase_seconds().values() if v)
    step0 = _at(lines, "completed step: 0,")
    assert rep.badput["startup"] >= (_at(lines, "Elastic event detected") - _ms(lines[0])) / 1000
    assert rep.badput["startup"] <= (step0 - _ms(lines[0])) / 1000 - phases + 1e-9


def test_an_asynchronous_saves_stall_is_placed_where_it_blocked():
    """With asynchronous saves MaxText logs a saved step's line an iteration after the save
    began, and Orbax commits later still: the stall (Orbax's blocking part) is placed where the
    loop blocked, ending at Orbax's "Finished blocking save" line, not after the step's line."""
    lines = _log("async_saves")
    events = events_from_log(lines)
    assert events.skipped == 0
    rep = goodput(events)
    blocked = [(_ms(x), float(m.group(1))) for x in lines
               if (m := re.search(r"Finished blocking save in (\d+\.\d+) seconds", x))]
    stalls = [(a, b) for cause, a, b in rep.segments if cause == "checkpoint stall"]
    assert len(stalls) == len(blocked) == 4
    for (a, b), (end, secs) in zip(stalls, blocked, strict=True):
        assert abs(b - end) <= 10 and abs((b - a) / 1000 - secs) <= 0.011  # 2 decimals logged
    assert rep.badput["checkpoint stall"] == pytest.approx(sum(s for _, s in blocked), abs=0.02)


def test_an_in_process_elastic_recovery_gives_every_phase():
    lines = _log("elastic")
    events = events_from_log(lines)
    assert events.skipped == 0
    names = [e.name for e in events if e.name not in ("step", "checkpoint_committed",
                                                  "checkpoint_save_started")]
    assert names == ["run_start", "elastic_detected", "elastic_cleanup_done",
                     "elastic_slices_ready", "elastic_restored", "elastic_first_step"]
    (r,) = recoveries(events)
    assert r.kind == "in-process" and r.complete
    assert r.start == _at(lines, "Elastic event detected")
    assert r.cleanup_done == _at(lines, "Elastic attempt 2")
    assert r.slices_ready == _at(lines, "Sufficient slices active", last=True)
    assert r.restored == _at(lines, "Finished load in")
    assert r.first_step_at == _at(lines, "completed step: 201,", last=True)
    assert r.phase_seconds() == {"detection": 0.0, "cleanup": 0.084,
                                 "waiting for slices": 10.116, "restore": 2.86,
                                 "first step": 4.576}
    assert (r.last_step, r.restored_step, r.first_step, r.steps_lost) == (249, 200, 201, 49)
    assert (r.live_slices, r.required_slices, r.slices_before, r.slices_after) == (1, 1, 1, 1)
    assert r.restore_load_seconds == 0.27
    # In-process too, MaxText's restore phase is mostly its re-initialisation (mesh, model and
    # state rebuilt on the slices that are back): 2.59 s of it, Orbax's own load 0.27 s.
    assert r.restore_split() == {"reinitialisation": 2.59, "load": 0.27}
    # MaxText logs neither the restore's size nor which slice was lost: unknown, not zero.
    assert r.not_in_log == ["restore_bytes", "lost_slices"]
    r.kill = _at(lines, "completed step: 249,")  # as chaos kill-worker --measure would know it
    assert r.downtime == pytest.approx((r.first_step_at - r.kill) / 1000)
    rep = goodput(events)
    assert rep.steps_redone == 49 and rep.badput["waiting for slices"] == pytest.approx(10.116)
    assert rep.badput["reinitialisation"] == pytest.approx(2.59)
    assert rep.badput["restore"] == pytest.approx(0.27)
    rows = dict(recovery_rows(_measurement(r)))
    assert rows["of which"] == "re-initialisation 2.590 s, load 0.270 s"


def test_a_scale_up_opens_a_recovery():
    lines = _log("scaleup")
    events = events_from_log(lines)
    assert events.skipped == 0
    (r,) = recoveries(events)
    assert r.kind == "in-process" and r.complete and r.error == "Scale up requested."
    assert r.start == _at(lines, "Scale up requested.")
    assert (r.live_slices, r.required_slices) == (2, 1)  # "Sufficient slices active: 2 >= 1"
    # MaxText 0.2.5 waits for a save in flight, then restores the last checkpoint (step 0).
    assert (r.last_step, r.restored_step, r.first_step, r.steps_lost) == (77, 0, 1, 77)
    assert all(v is not None for v in r.phase_seconds().values())


def _measurement(r) -> KillMeasurement:
    import datetime as dt

    from elastix.backends.base import KillRecord

    k = KillRecord(workload="demo", pod="demo-worker-1-0", slice=1, host=0, node=None,
                   time=dt.datetime(2026, 12, 1, 11, 48, 57, tzinfo=dt.timezone.utc))
    return KillMeasurement([k], r, "log", "Running", 0, 0, None, None, False)


def test_a_log_of_another_version_measures_what_it_can_and_says_what_it_skipped(tmp_path,
                                                                                capsys):
    """Orbax 0.11.30's restore wording reads the same; an unknown restore line leaves the
    restore "not in the log"; a step line worded otherwise is skipped and counted."""
    lines = _log("elastic")
    old = [re.sub(r"\[process=0\] \[sync\] Finished load in (\S+) seconds @ (\S+)",
                  r"Finished restoring checkpoint in \1 seconds from \2.", x) for x in lines]
    (r,) = recoveries(events_from_log(old))
    assert r.restore_load_seconds == 0.27 and r.phase_seconds()["restore"] == 2.86

    other = [x for x in lines if "Finished load in" not in x]
    other = [x.replace("completed step: 230, seconds:", "completed step: 230 seconds=")
             for x in other]
    events = events_from_log(other)
    # step 230 ran twice: before the failure and again after the restore of step 200
    assert events.skipped == 2 and "completed step: 230 " in events.first_skipped
    (r,) = recoveries(events)
    ph = r.phase_seconds()
    assert ph["restore"] is None and ph["first step"] is None  # their boundary was not logged
    assert ph["waiting for slices"] == 10.116 and r.downtime is not None
    assert r.not_in_log == ["restore", "first step", "restore_bytes", "lost_slices"]
    rows = dict(recovery_rows(_measurement(r)))
    assert rows["restore"] == rows["first step"] == "not in the log"
    assert rows["live slices (steps)"] == "1 -> 1"
    f = tmp_path / "head.log"
    f.write_text("\n".join(other) + "\n")
    assert main(["workload", "goodput", "--log", str(f), "-o", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert "skipped 2 lines" in d["source"]
    rec = d["recoveries"][0]
    assert (rec["last_step"], rec["first_step"], rec["restored_step"]) == (249, 201, None)
    assert main(["workload", "goodput", "--log", str(f)]) == 0
    out = capsys.readouterr().out
    assert "skipped 2 lines" in out and "not in the log" in out and "Traceback" not in out


def test_unreadable_lines_are_counted_and_reported_not_raised():
    bad = _log("elastic")
    bad.insert(600, "2026-12-01T11:48:57.000000000Z I1201 metric_logger.py:265] completed step: "
                    "x1, seconds: nan")
    bad.insert(700, "2026-12-01T11:49:00.000000000Z Sufficient slices active: three >= 3.")
    bad.insert(800, "completed step: 40, seconds: 0.160")  # no time at all
    events = events_from_log(bad)
    assert events.skipped == 3
    assert log_note(events).startswith("; skipped 3 lines elastix could not read (first: line 601")
    assert recoveries(events)[0].steps_lost == 49


def test_a_maxtext_log_without_times_is_a_clear_usage_error(tmp_path, capsys):
    """A log saved without the API's times (kubectl logs without --timestamps)."""
    f = tmp_path / "head.log"
    f.write_text("\n".join(x.partition(" ")[2] for x in _log("plain")) + "\n")
    assert main(["workload", "goodput", "--log", str(f)]) == 2
    err = capsys.readouterr().err
    assert "no trainer events found" in err and "no time" in err
    assert "Traceback" not in err and "unexpected" not in err


@pytest.mark.parametrize("own", ["2026-11-29T09:50:01.123Z", "2026-11-29T09:50:01.123456Z"])
def test_a_line_with_its_own_time_keeps_it(own):
    line = f"2026-11-29T10:00:00.999999999Z {own} completed step: 7, seconds: 0.100"
    (ev,) = events_from_log([line])
    assert fmt_ms(ev.t) == "2026-11-29T09:50:01.123Z"


def test_rfc3339_nano_times_are_truncated_to_the_millisecond():
    (ev,) = events_from_log(["2026-11-29T10:00:00.987654321Z completed step: 7, seconds: 0.100"])
    assert fmt_ms(ev.t) == "2026-11-29T10:00:00.987Z"
    assert re.fullmatch(r"\d{4}-.*Z", fmt_ms(ev.t))


def test_elastix_trainers_own_log_keeps_its_own_restore_and_save_lines():
    """Orbax's lines in the log of elastix's trainer (which logs its own restore and saves)
    add nothing, and never make it a MaxText log."""
    orbax = [x for x in _log("restart") if "Finished load in" in x or "Saved a checkpoint" in x
             or "Finished save (blocking" in x]
    lines = ["2026-12-01T11:00:00.000Z elastix: run start: pid 7, slices 1, devices 1",
             "2026-12-01T11:00:01.000Z completed step: 1, seconds: 0.100, live slice count: 1, "
             "TFLOP/s/device: 1.000, loss: 1.0000", *orbax]
    events = events_from_log(lines)
    assert [e.name for e in events] == ["run_start", "step"] and events.skipped == 0


@pytest.mark.parametrize("name", ["plain", "restart", "elastic", "scaleup", "restart_traceback",
                                  "startup_kill", "async_saves"])
def test_a_fixture_names_no_directory_of_the_machine_it_was_recorded_on(name):
    text = (FIX / f"{name}.log").read_text()
    # Where it was recorded (the repo, the user's home, pytest's temp dirs) is replaced away.
    machine = (str(Path(__file__).resolve().parents[2]), str(Path.home()),
               str(Path(tempfile.gettempdir()) / "pytest-of-"))
    assert [d for d in machine if d in text] == []
    # the run's directory, as capture.py (or capture_local.py) renames it
    assert "/tmp/maxtext-run/" in text or "/tmp/elastix-state/" in text


def test_a_fault_aims_at_a_maxtext_save_from_its_log():
    """Issue 35: MaxText writes no events file; Orbax's save-start line (before the copy) opens
    the window ``chaos --during save`` aims at, and the save's end closes it."""
    from elastix.measure.aim import Aim, find_open, landing

    lines = _log("async_saves")
    i = next(j for j, x in enumerate(lines) if "Saving checkpoint at step 20" in x)
    events = events_from_log(lines[:i + 1])
    w = find_open(events, Aim(during="save"))
    assert w is not None and w.step == 20 and w.opened == _ms(lines[i])
    whole = events_from_log(lines)
    got = landing(whole, Aim(during="save"), w, _ms(lines[i]) + 5)
    assert got.inside is True and got.closed is not None and got.closed > w.opened
    # every save MaxText made, the final one (step 59 of 60) included
    assert [e.data["step"] for e in whole if e.name == "checkpoint_save_started"] == [0, 20, 40,
                                                                                      59]
