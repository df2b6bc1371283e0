"""The one chaos report: its JSON, its JUnit (valid against the vendored JUnit XSD), its Markdown,
the stepping condition that gates every kill, and the step a stopped run names."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from lxml import etree

from elastix.backends.base import KillRecord
from elastix.errors import ExitCode
from elastix.measure.events import Event, Recovery, events_from_records
from elastix.measure.goodput import goodput
from elastix.measure.report import Bounds, ChaosReport, KillMeasurement, Violation, check_bounds, trainer_step
from elastix.measure.wait import stepping
from elastix.views.report import junit_xml, summary_markdown

XSD = Path(__file__).resolve().parents[1] / "fixtures" / "junit" / "junit-10.xsd"
T0 = 1_764_000_000_000  # ms


def validate_junit(text: str) -> etree._Element:
    """Parse ``text`` and validate it against Jenkins' junit-10.xsd; the root on success."""
    schema = etree.XMLSchema(etree.parse(str(XSD)))
    doc = etree.fromstring(text.encode())
    schema.assertValid(doc)
    return doc


def _kill(i: int, downtime_ms: int = 1181, lost: int = 2) -> KillMeasurement:
    t = T0 + i * 60_000
    rec = Recovery(i, "in-process", kill=t, start=t + 41, cleanup_done=t + 42,
                   slices_ready=t + 1064, restored=t + 1072, first_step_at=t + downtime_ms,
                   last_step=100 * i + lost, restored_step=100 * i, restore_source="snapshot",
                   restore_bytes=1234, restore_load_seconds=0.003, first_step=100 * i + 1,
                   first_step_time_seconds=0.1, pid_before=7, pid_after=7)
    when = dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc)
    return KillMeasurement([KillRecord("demo", f"demo-worker-0-{i}", 0, 0, "localhost", when,
                                       pid=40 + i)], rec, "events", "Running", 0, 0, 7, 7, False)


def _report(measurements, bounds: Bounds, **kw) -> ChaosReport:
    violations = [v for i, m in enumerate(measurements, 1) for v in check_bounds(m, i, bounds)]
    return ChaosReport(measurements, goodput([]), violations, False, workload="demo",
                       bounds=bounds, **kw)


def test_a_missed_bound_is_structured_in_json_junit_and_markdown():
    res = _report([_kill(1), _kill(2, downtime_ms=300, lost=0)],
                  Bounds(max_downtime=0.5, max_steps_lost=1, timeout=60), stopped="all 2 kills done")
    d = json.loads(json.dumps(res.to_json()))
    assert d["ok"] is False and d["exit_code"] == ExitCode.BOUND_MISSED == 3
    assert d["violations"] == [
        {"kill": 1, "bound": "max_downtime", "limit": 0.5, "value": 1.181},
        {"kill": 1, "bound": "max_steps_lost", "limit": 1, "value": 2}]
    assert d["bounds"] == {"max_downtime_seconds": 0.5, "max_steps_lost": 1,
                           "timeout_seconds": 60, "min_goodput": None}
    assert [k["ok"] for k in d["kills"]] == [False, True]
    assert list(d["kills"][0]["recovery"]["phases"]) == [
        "detection", "cleanup", "waiting_for_slices", "restore", "first_step"]
    assert all(" " not in key for key in d["goodput"]["badput_seconds"])

    doc = validate_junit(junit_xml(res, planned=2))
    (suite,) = doc.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "2", "0")
    first, second = suite.findall("testcase")
    assert [f.get("type") for f in first.findall("failure")] == ["max_downtime",
                                                                 "max_steps_lost"]
    assert first.find("failure").get("message") == "kill 1: downtime 1.181 s > 0.5 s"
    assert second.findall("failure") == [] and second.get("time") == "0.300"
    assert "waiting for slices" in first.findtext("system-out")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["kill.1.downtime_seconds"] == "1.181" and props["kill.2.steps_lost"] == "0"
    assert props["kill.1.waiting_for_slices_seconds"] == "1.022" and props["exit_code"] == "3"

    md = summary_markdown(res, planned=2)
    assert md.startswith("### elastix chaos `demo`: failed (exit 3)")
    assert "- bound missed: kill 1: 2 steps lost > 1" in md
    assert "| 2 | kill | `demo-worker-0-2` | 0.041 s |" in md and "**missed**" in md


def test_a_passing_run_has_no_failure_and_exit_0():
    res = _report([_kill(1, downtime_ms=300, lost=0)], Bounds(max_downtime=3.0),
                  stopped="the one kill done")
    assert res.ok and res.to_json()["exit_code"] == 0
    suite = validate_junit(junit_xml(res, planned=1)).find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("1", "0")
    assert summary_markdown(res, 1).startswith("### elastix chaos `demo`: passed")


def test_kills_never_made_are_testcases_too():
    """Completed first: the kills not made are skipped; a kill that failed is an error."""
    early = _report([_kill(1)], Bounds(), completed_early=True,
                    stopped="the workload completed at step 300 before kill 2")
    assert early.outcome is ExitCode.COMPLETED
    suite = validate_junit(junit_xml(early, planned=3)).find("testsuite")
    assert (suite.get("tests"), suite.get("skipped"), suite.get("errors")) == ("3", "2", "0")
    assert suite.findall("testcase")[2].find("skipped").get("message").endswith("before kill 2")
    failed = _report([], Bounds(), error="kill 1 failed: no running worker",
                     stopped="kill 1 failed: no running worker")
    suite = validate_junit(junit_xml(failed, planned=1)).find("testsuite")
    assert suite.get("errors") == "1" and failed.to_json()["exit_code"] == 1


def test_no_recovery_within_the_timeout_is_a_violation():
    m = _kill(1)
    m.recovery.first_step_at = None
    (v,) = check_bounds(m, 1, Bounds(timeout=90))
    assert v == Violation(1, "recovery", 90, None, "Running")
    assert v.to_json() == {"kill": 1, "bound": "recovery", "limit": 90, "value": None}
    assert v.text() == "kill 1: no recovery within 90 s (state Running)"


def _stream(*names: str) -> list[Event]:
    """Events named ``names`` (``step`` numbered in order), one second apart."""
    recs, step = [], 0
    for i, name in enumerate(names):
        ts = dt.datetime.fromtimestamp(T0 / 1000 + i, dt.timezone.utc)
        rec = {"event": name, "ts": ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "pid": 1}
        if name in ("step", "elastic_first_step"):
            step += 1
            rec.update(step=step, seconds=0.1)
        elif name in ("snapshot_taken", "checkpoint_committed", "restore"):
            rec.update(step=step if name != "restore" else 20, source="checkpoint")
        elif name == "run_end":
            rec.update(step=2, status="failed", reason="x")
        recs.append(rec)
    return events_from_records(recs)


@pytest.mark.parametrize(("names", "expected"), [
    (("run_start", "step", "step"), False),  # stepping, but nothing saved: a kill restores init
    (("run_start", "step", "snapshot_taken"), False),  # saved, no step after it yet
    (("run_start", "step", "snapshot_taken", "step"), True),
    (("run_start", "step", "checkpoint_committed", "step"), True),
    (("run_start", "step", "snapshot_taken", "step", "run_start", "step"), False),  # restarted
    (("run_start", "restore", "step"), True),  # resumed from a committed checkpoint
    (("step", "step"), True),  # another trainer's log (no run_start): a step is all it says
    (("run_start", "step", "snapshot_taken", "step", "elastic_detected"), False),  # recovering
    # a recovery cut short by the next (its restore hit by a second fault) never completes
    # itself: the one that followed it stepping again is the end of both (a busy CI run's
    # wait for stepping after such a cut sat out its 200 s)
    (("run_start", "step", "snapshot_taken", "step", "elastic_detected", "elastic_detected",
      "elastic_first_step", "step"), True),
    (("run_start", "step", "snapshot_taken", "step", "elastic_detected", "elastic_detected",
      "elastic_first_step", "step", "elastic_detected"), False),
])
def test_stepping_means_a_step_after_the_first_committed_save(names, expected):
    assert stepping(_stream(*names)) is expected


def test_the_step_a_stopped_run_names_is_the_trainers_own():
    """Steps done after a loss are not kept: run_end's step, not the last step event, counts."""
    events = _stream("run_start", "step", "step", "step", "step", "run_end")
    assert events[-1].data["step"] == 2 and trainer_step(events) == 2
    assert trainer_step(_stream("run_start", "step", "step")) == 2
    assert trainer_step([]) is None


def test_a_stopped_run_reports_the_step_of_run_end():
    """`chaos run` said "failed at step 31" where the trainer's run_end said 24."""
    from elastix.backends.base import WorkloadStatus
    from elastix.measure.soak import _why_stopped

    events = _stream("run_start", "step", "step", "step", "step", "run_end")
    res = ChaosReport([], goodput(events), [], False, events=events, workload="demo")
    st = WorkloadStatus("demo", "local", "local", "Failed", None, 2)
    assert _why_stopped(res, (st, "during kill 1"), 1, 3, False, False, None) == \
        "the workload failed at step 2 during kill 1"
    assert res.died and res.outcome is ExitCode.DIED


def test_the_chaos_summary_and_goodput_tables_fit_80_columns_whole():
    """Headers whole (no "dete…"), values on one line, the goodput caption unbroken."""
    from rich.console import Console

    from elastix.views.measurement import SOAK_COLUMNS, print_goodput, print_soak

    res = _report([_kill(1), _kill(2, downtime_ms=61_234, lost=120)],
                  Bounds(max_downtime=None, max_steps_lost=None, timeout=60),
                  stopped="all 2 kills done")
    c = Console(width=80, record=True, highlight=False)
    with c.capture() as cap:
        print_soak(c, res)
    out = cap.get()
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= 80, out
    header = next(ln for ln in lines if ln.lstrip().startswith("kill"))
    assert header.split() == " ".join(SOAK_COLUMNS).split(), out
    assert "…" not in out
    row2 = next(ln for ln in lines if ln.lstrip().startswith("2 "))
    assert "61.234" in row2 and " 120 " in row2 and "0/0" in row2
    events = events_from_records([
        {"ts": "2026-12-01T10:00:00.000Z", "event": "run_start", "pid": 1, "num_slices": 2,
         "devices": 4, "config": {}},
        *({"ts": f"2026-12-01T10:00:{s:02d}.000Z", "event": "step", "pid": 1, "step": s,
           "seconds": 1.0, "live_slices": 2} for s in range(1, 30))])
    with c.capture() as cap:
        print_goodput(c, goodput(events), "events")
    caption, source = cap.get().splitlines()[:2]
    # 29 s of run: the seconds first, the share named as one of a short span (issue 49)
    assert caption == "goodput 28.0 s of 29.0 s productive (96.6%, under a minute)", cap.get()
    assert source == "(events; 0 recoveries, last step 29)"


def test_a_fault_and_where_it_landed_are_in_junit_markdown_and_the_table():
    """Issue 35: every report names the fault kind and the moment an aimed one landed in."""
    from elastix.measure.aim import Landing
    from elastix.views.measurement import recovery_rows

    m = _kill(1, downtime_ms=900, lost=0)
    m.kills[0].fault, m.kills[0].grace = "term", 30.0
    m.fault = "term (grace 30 s)"
    m.landing = Landing("during save", "the checkpoint save of step 100", T0 + 59_990, T0 + 60_400,
                        T0 + 60_000, True, "the save failed: DATA_LOSS")
    res = _report([m], Bounds(timeout=60), stopped="the one kill done")
    d = res.to_json()
    k = d["kills"][0]
    assert k["fault"] == "term (grace 30 s)" and k["kills"][0]["grace_seconds"] == 30.0
    assert k["aim"]["window"] == "the checkpoint save of step 100" and k["aim"]["inside"] is True
    assert k["aim"]["offset_seconds"] == pytest.approx(0.01)
    suite = validate_junit(junit_xml(res, planned=1)).find("testsuite")
    (case,) = suite.findall("testcase")
    assert case.get("name") == "kill 1 (term (grace 30 s), during save): demo-worker-0-1"
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["kill.1.fault"] == "term (grace 30 s)" and props["kill.1.aimed_inside"] == "True"
    assert props["kill.1.aimed_window"] == "the checkpoint save of step 100"
    md = summary_markdown(res, planned=1)
    assert "| 1 | term (grace 30 s), during save | `demo-worker-0-1` |" in md
    assert ("- kill 1 aimed during save: the checkpoint save of step 100; landed 0.010 s after "
            "it opened, inside (the save failed: DATA_LOSS)") in md
    rows = dict(recovery_rows(m))
    assert rows["term"].endswith("demo-worker-0-1") and rows["fault"] == "term (grace 30 s)"
    assert rows["aimed"] == ("during save: 0.010 s into the checkpoint save of step 100 (the "
                             "save failed: DATA_LOSS)")


def test_min_goodput_is_a_bound_over_the_chaos_window():
    """Issue 36: goodput from the first fault to the last event, under --min-goodput, is a
    missed bound (exit 3) with a JUnit testcase of its own; above it, none."""
    from elastix.measure.goodput import GoodputReport

    m = _kill(1, downtime_ms=1000, lost=0)
    t = T0 + 60_000
    # 10 s before the fault all productive (outside the window), then 1 s down, 9 s productive
    segs = [("productive", t - 10_000, t), ("detection", t, t + 1000),
            ("productive", t + 1000, t + 10_000)]
    rep = GoodputReport(t - 10_000, t + 10_000, 19.0, {}, 100, 0, [], segs)
    assert rep.between(t, t + 10_000) == pytest.approx(0.9)
    assert rep.goodput == pytest.approx(0.95)  # the whole run: the window is what is bounded
    for bound, ok in ((0.95, False), (0.9, True)):
        res = ChaosReport([m], rep, [], False, workload="demo", window=(t, t + 10_000),
                          bounds=Bounds(timeout=60, min_goodput=bound), stopped="the one kill done")
        res.check_goodput()
        d = res.to_json()
        assert d["chaos_window"]["goodput"] == pytest.approx(0.9)
        assert d["ok"] is ok and d["exit_code"] == (0 if ok else 3)
        suite = validate_junit(junit_xml(res, planned=1)).find("testsuite")
        case = next(c for c in suite.findall("testcase") if c.get("name").startswith("goodput"))
        assert case.get("name") == f"goodput >= {bound:.1%} (chaos window)"
        assert (case.find("failure") is None) is ok
        if not ok:
            assert d["violations"] == [{"kill": 0, "bound": "min_goodput", "limit": 0.95,
                                        "value": pytest.approx(0.9)}]
            assert case.find("failure").get("message") == (
                "goodput 90.0% over the chaos window (first fault to the last event) < 95.0%")
            md = summary_markdown(res, planned=1)
            assert "min goodput 95.0% (chaos window)" in md and "- bound missed: goodput 90.0%" \
                in md
    none = ChaosReport([], rep, [], False, bounds=Bounds(min_goodput=0.5))
    none.check_goodput()  # no fault made: no window, and the bound cannot be said met
    assert none.violations[0].value is None and not none.ok


def test_the_markdown_summary_gives_goodput_as_a_percentage():
    """Issue 39: every other view says 13.9%; the summary said 0.139. The JSON and the JUnit
    properties keep the fraction they document."""
    from elastix.measure.goodput import GoodputReport

    t = T0 + 60_000
    segs = [("startup", t - 100_000, t - 13_900), ("productive", t - 13_900, t)]
    rep = GoodputReport(t - 100_000, t, 13.9, {"startup": 86.1}, 100, 0, [], segs)
    res = ChaosReport([_kill(1, downtime_ms=300, lost=0)], rep, [], False, workload="demo",
                      bounds=Bounds(timeout=60), stopped="the one kill done",
                      window=(t - 20_000, t))
    md = summary_markdown(res, planned=1)
    # Seconds first where start-up dominates or the window is under a minute (issue 49).
    assert ("; goodput 13.9 s of 1 min 40 s productive (13.9%, mostly start-up) (chaos window: "
            "13.9 s of 20.0 s productive (69.5%, under a minute))") in md, md
    assert "0.139" not in md and "0.695" not in md
    assert res.to_json()["totals"]["goodput"] == pytest.approx(0.139)
    props = {p.get("name"): p.get("value")
             for p in validate_junit(junit_xml(res, planned=1)).iter("property")}
    assert props["goodput"] == "0.139" and props["chaos_window_goodput"] == "0.695"
