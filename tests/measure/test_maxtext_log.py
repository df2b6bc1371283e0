"""MaxText as the trainer, measured from its head log alone (issue #16).

The fixture ``tests/fixtures/maxtext/head.log`` is written by ``make_head_log.py`` from the
format strings vendored in ``formats.json`` (MaxText, pathwaysutils, Orbax, absl; see
tests/fixtures/PROVENANCE.md), each line led by the Kubernetes log API's time as
``timestamps=true`` returns it. The kill itself is not in any log: it happened at 10:01:00.000.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from elastix.main import main
from elastix.measure import maxtext
from elastix.measure.chaos import KillMeasurement
from elastix.measure.events import events_from_log, fmt_ms, log_note, parse_ts, recoveries
from elastix.measure.goodput import goodput
from elastix.views.measurement import recovery_rows

FIX = Path(__file__).parents[1] / "fixtures" / "maxtext"
LINES = (FIX / "head.log").read_text().splitlines()
FORMATS = json.loads((FIX / "formats.json").read_text())["formats"]
ORBAX_DONE = "Finished restoring checkpoint in"


def _render(key: str, *args) -> str:
    f = FORMATS[key]
    return f["text"] % args if f["style"] == "printf" else f["text"].format(*args, step=args[0])


def test_the_parser_reads_the_sources_formats():
    """Each format the reader relies on, rendered as its source does, is recognised."""
    assert maxtext.DETECTED.search(_render("detected"))
    assert maxtext.DETECTED.search(_render("detected_old"))
    assert maxtext.ATTEMPT.search(_render("attempt", 2)).group(1) == "2"
    m = maxtext.SLICES_READY.search(_render("slices_ready", 3, 3, "{0, 1, 2}"))
    assert m.groups() == ("3", "3")
    assert not maxtext.SLICES_READY.search(_render("slices_short", 2, 3, "{0, 1}"))
    assert maxtext.RESTORE_FROM.search(_render("restore_from", 3300)).group(1) == "3300"
    assert maxtext.RESTORE_DONE.search(_render("orbax_restored", 5.39, "gs://b/c/3300")).group(1) \
        == "5.39"
    step = FORMATS["step"]["text"].format(step=3301, seconds=0.2, tflops=43.0, tokens=1.0,
                                          total_weights=8, loss=1.0, lm_loss=1.0, perplexity=2.0)
    ev = events_from_log([f"2026-11-29T10:00:00.123456789Z {step}"])
    assert [(e.name, e.data["step"], e.data["seconds"]) for e in ev] == [("step", 3301, 0.2)]


def test_fixture_gives_every_phase_the_log_supports():
    events = events_from_log(LINES)
    assert events.skipped == 0
    names = [e.name for e in events if e.name != "step"]
    assert names == ["elastic_detected", "elastic_cleanup_done", "elastic_slices_ready",
                     "elastic_restored", "elastic_first_step"]
    (r,) = recoveries(events)
    assert r.kind == "in-process" and r.complete
    # Times are the log API's (its nanoseconds truncated to the millisecond).
    assert fmt_ms(r.start) == "2026-11-29T10:01:13.000Z"
    assert r.phase_seconds() == {"detection": 12.92, "cleanup": 1.0, "waiting for slices": 50.0,
                                 "restore": 5.99, "first step": 12.7}
    assert (r.detection_from, r.last_step, r.restored_step, r.first_step) == \
        ("last event", 188, 100, 101)
    assert r.steps_lost == 88 and r.restore_seconds == 5.39
    assert (r.live_slices, r.required_slices) == (3, 3)
    # MaxText logs neither the restore's size nor which slice was lost: unknown, not zero.
    assert r.restore_bytes is None and r.lost_slices is None
    assert r.not_in_log == ["restore_bytes", "lost_slices"]
    r.kill = parse_ts("2026-11-29T10:01:00.000Z")  # as chaos kill-worker --measure knows it
    assert r.phase_seconds()["detection"] == 13.0 and r.downtime == 82.69


def _without_orbax() -> list[str]:
    return [x for x in LINES if ORBAX_DONE not in x]


def test_a_phase_missing_from_the_log_is_not_in_the_log_never_a_number():
    (r,) = recoveries(events_from_log(_without_orbax()))
    ph = r.phase_seconds()
    assert ph["restore"] is None and ph["first step"] is None  # their boundary was not logged
    assert ph["waiting for slices"] == 50.0 and r.downtime is not None
    assert r.not_in_log == ["restore", "first step", "restore_bytes", "lost_slices"]
    d = r.to_json()
    assert d["phases"]["restore"] is None and d["restore_bytes"] is None
    assert d["not_in_log"] == ["restore", "first_step", "restore_bytes", "lost_slices"]
    rows = dict(recovery_rows(_measurement(r)))
    assert rows["restore"] == rows["first step"] == "not in the log"
    assert rows["slices lost"] == "not in the log"
    assert rows["waiting for slices"] == "50.000 s"
    # goodput paints no made-up restore: the span no line bounds is "other"; the first step
    # after the recovery is not productive: its own line says how long it took (12.7 s)
    rep = goodput(events_from_log(_without_orbax()))
    assert rep.badput["restore"] == 0 and rep.badput["recompile"] == pytest.approx(12.7)
    assert rep.badput["other"] == pytest.approx(5.99, abs=0.002)


def _measurement(r) -> KillMeasurement:
    import datetime as dt

    from elastix.backends.base import KillRecord

    k = KillRecord(workload="demo", pod="demo-worker-1-0", slice=1, host=0, node=None,
                   time=dt.datetime(2026, 11, 29, 10, 1, tzinfo=dt.timezone.utc))
    return KillMeasurement([k], r, "log", "Running", 0, 0, None, None, False)


def test_unreadable_lines_are_counted_and_reported_not_raised(tmp_path, capsys):
    bad = list(LINES)
    bad.insert(20, "2026-11-29T10:00:31.000000000Z I1129 metric_logger.py:224] completed step: "
                   "x1, seconds: nan")
    bad.insert(30, "2026-11-29T10:00:32.000000000Z Sufficient slices active: three >= 3.")
    bad.insert(40, "completed step: 40, seconds: 0.160")  # no time at all
    events = events_from_log(bad)
    assert events.skipped == 3
    assert log_note(events).startswith("; skipped 3 lines elastix could not read (first: line 21")
    f = tmp_path / "head.log"
    f.write_text("\n".join(bad) + "\n")
    assert main(["workload", "goodput", "--log", str(f), "-o", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert "skipped 3 lines" in d["source"]
    assert d["recoveries"][0]["steps_lost"] == 88
    assert main(["workload", "goodput", "--log", str(f)]) == 0
    out = capsys.readouterr().out
    assert "skipped 3 lines" in out and "not in the log: recovery 1: restore_bytes" in out


def test_a_maxtext_log_without_times_is_a_clear_usage_error(tmp_path, capsys):
    """A log saved without the API's times (kubectl logs without --timestamps)."""
    f = tmp_path / "head.log"
    f.write_text("\n".join(x.partition(" ")[2] for x in LINES) + "\n")
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
