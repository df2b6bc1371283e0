"""`elastix workload goodput` on a recorded run: same numbers from the events and from the log."""

from __future__ import annotations

import json

from measure_helpers import recorded_run, to_jsonl, to_log

from elastix.main import main


def _files(tmp_path):
    recs, _ = recorded_run()
    ev = tmp_path / "events.jsonl"
    ev.write_text(to_jsonl(recs))
    log = tmp_path / "head.log"
    log.write_text("\n".join(to_log(recs)) + "\n")
    return ev, log


def test_json_same_from_events_and_log(tmp_path, capsys):
    ev, log = _files(tmp_path)
    out = []
    for flag, path in (("--events", ev), ("--log", log)):
        assert main(["workload", "goodput", flag, str(path), "-o", "json", "--window", "5"]) == 0
        d = json.loads(capsys.readouterr().out)
        assert d.pop("source").startswith(flag[2:])
        out.append(d)
    assert out[0] == out[1]
    d = out[0]
    assert d["wall_seconds"] == 18.7 and round(d["goodput"], 4) == round(7.2 / 18.7, 4)
    assert round(d["badput_seconds"]["waiting_for_slices"], 3) == 2.251
    assert [round(s["seconds"], 1) for s in d["series"]] == [5.0, 10.0, 15.0, 18.7]
    (rec,) = d["recoveries"]
    assert rec["steps_lost"] == 4 and rec["kind"] == "in-process"
    # no kill time here: detection counts from the last event, and the output says so
    assert rec["detection_from"] == "last event"


def test_table_and_plot(tmp_path, capsys):
    ev, _ = _files(tmp_path)
    png = tmp_path / "g.png"
    assert main(["workload", "goodput", "--events", str(ev), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "goodput 38.5%" in out and "badput: waiting for slices" in out and "2.251" in out
    assert "detection counted from: last event" in out
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    ev, log = _files(tmp_path)
    assert main(["workload", "goodput", "--events", str(ev), "--log", str(log)]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["workload", "goodput", "--events", str(tmp_path / "nope.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "cannot read" in err and "Traceback" not in err
    assert main(["workload", "goodput", "--events", str(ev), "-o", "yaml"]) == 2
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    assert main(["workload", "goodput", "--log", str(empty)]) == 2
    assert "no trainer events" in capsys.readouterr().err
