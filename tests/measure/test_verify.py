"""``chaos run --verify``'s comparison: the run's losses, the last logged for each step, against
an uninterrupted reference's; equal, within a tolerance, or the first step that differs; and
its place in the one chaos report (JSON, JUnit, Markdown, exit code)."""

from __future__ import annotations

import json

from test_chaos_report import _kill, _report, validate_junit

from elastix.backends.base import EVENTS_FILE, HEAD_LOG, TrainerEvents
from elastix.errors import ExitCode
from elastix.measure.report import Bounds
from elastix.measure.verify import attach, check_tolerance, compare, trajectory
from elastix.views.report import junit_xml, summary_markdown

LOSSES = [3.399472236633301, 3.3112869262695312, 3.2500991821289062, 3.1874027252197266,
          3.101309299468994, 3.0445289611816406]


def _step(n: int, loss: float) -> dict:
    return {"ts": f"2026-11-29T09:50:{n:02d}.000000Z", "event": "step", "pid": 7, "step": n,
            "seconds": 0.05, "loss": loss, "live_slices": 2, "tflops_per_device": 0.01,
            "global_batch": 8}


def _events(losses, *extra) -> TrainerEvents:
    recs = [{"ts": "2026-11-29T09:49:59.000000Z", "event": "run_start", "pid": 7,
             "num_slices": 2, "devices": 4, "config": {}}]
    recs += [_step(n, v) for n, v in enumerate(losses, 1)]
    return TrainerEvents(EVENTS_FILE, True, records=recs + list(extra))


def _log(losses, digits: int = 4, first: int = 1) -> TrainerEvents:
    lines = [f"2026-11-29T09:50:{n:02d}.000Z completed step: {n}, seconds: 0.050, live slice "
             f"count: 2, TFLOP/s/device: 0.010, loss: {v:.{digits}f}"
             for n, v in enumerate(losses, first)]
    return TrainerEvents(HEAD_LOG, True, lines=lines)


def _redo(recs: TrainerEvents, from_step: int, losses) -> TrainerEvents:
    """The run's records, then a recovery that restored ``from_step`` and redid the steps
    after it with ``losses``."""
    t = "2026-11-29T09:51:00.000000Z"
    more = [{"ts": t, "event": "elastic_detected", "pid": 7, "recovery": 1, "kind": "slice_lost",
             "error": "slice 0 lost", "last_step": len(recs.records) - 1, "live_slices": 1,
             "lost_slices": [0]},
            {"ts": t, "event": "elastic_restored", "pid": 7, "recovery": 1,
             "source": "snapshot", "step": from_step, "bytes": 10, "seconds": 0.01}]
    redone = [dict(_step(n, v), ts=t) for n, v in enumerate(losses, from_step + 1)]
    return TrainerEvents(EVENTS_FILE, True, records=recs.records + more + redone)


def test_equal_losses_are_verified_bitwise():
    v = compare(trajectory(_events(LOSSES)), trajectory(_events(LOSSES + [2.9])), 0.0, "r")
    assert v.ok and v.steps_compared == 6 and v.last_step == 6  # steps 1..the run's last
    assert v.first_mismatch is None and v.max_abs_diff == 0.0 and v.source == "events"
    assert v.text() == "verify: losses bitwise equal to reference r's at all 6 steps up to 6 " \
                       "(events)"
    # A log that lost its first lines (GKE: a replaced head pod's): the steps both logged are
    # compared, the others named, and the gap fails unless allowed (issue 74).
    some = compare(trajectory(_log(LOSSES[2:], first=3)), trajectory(_events(LOSSES)), 1e-4, "r")
    assert not some.ok and some.steps_compared == 4 and some.not_logged == (1, 2)
    assert some.text() == ("verify: compared 4 of the 6 steps with reference r: steps 1-2 not "
                           "logged by the run (--allow-unverified-steps accepts that)")
    allowed = compare(trajectory(_log(LOSSES[2:], first=3)), trajectory(_events(LOSSES)), 1e-4,
                      "r", allow_gaps=True)
    assert allowed.ok and "at 4 steps up to 6 (log (4 decimals)); not compared: steps 1-2 " \
                          "not logged by the run" in allowed.text()


def test_a_difference_within_the_tolerance_passes_and_is_reported():
    ref = [x + (1e-7 if i == 3 else 0.0) for i, x in enumerate(LOSSES)]
    v = compare(trajectory(_events(LOSSES)), trajectory(_events(ref)), 1e-6, "r")
    assert v.ok and abs(v.max_abs_diff - 1e-7) < 1e-12
    assert "within 1e-06 (max |diff| 1e-07) of reference r's" in v.text()
    assert not compare(trajectory(_events(LOSSES)), trajectory(_events(ref)), 0.0, "r").ok


def test_the_first_differing_step_is_named_with_both_losses():
    ref = list(LOSSES)
    ref[3] += 1e-3
    ref[5] += 2e-3
    v = compare(trajectory(_events(LOSSES)), trajectory(_events(ref)), 0.0, "demo-reference")
    assert not v.ok and v.mismatches == 2 and v.steps_compared == 6
    m = v.first_mismatch
    assert (m.step, m.run, m.reference) == (4, LOSSES[3], ref[3])
    assert v.text().startswith(f"verify: step 4 differs from reference demo-reference: loss "
                               f"{LOSSES[3]!r} (run) vs {ref[3]!r} (reference demo-reference)")
    viol = v.violation()
    assert viol.to_json() == {"kill": 0, "bound": "verify", "limit": 0.0,
                              "value": m.diff}
    assert viol.text() == v.text()


def test_a_redone_step_counts_with_its_last_value():
    # Logged 3.9 first, then redone after the recovery with the right loss: verified.
    first = list(LOSSES[:5])
    first[4] = 3.9
    run = trajectory(_redo(_events(first), 4, LOSSES[4:]))
    assert run.losses[5] == LOSSES[4] and run.redone == (5,)
    assert compare(run, trajectory(_events(LOSSES)), 0.0, "r").ok
    # Right the first time, wrong when redone: the redone value is the run's.
    wrong = trajectory(_redo(_events(LOSSES[:5]), 4, [LOSSES[4] + 1e-3, LOSSES[5]]))
    v = compare(wrong, trajectory(_events(LOSSES)), 0.0, "r")
    assert not v.ok and v.first_mismatch.step == 5


def test_log_losses_have_four_decimals_and_need_a_tolerance_of_half_the_last():
    run, ref = trajectory(_log(LOSSES)), trajectory(_log(LOSSES))
    assert run.source == "log" and run.decimals == 4 and run.losses[1] == 3.3995
    v = compare(run, ref, 0.0, "r")
    assert not v.ok and "print 4 decimals: a difference under 5e-05 cannot be told from " \
                        "rounding" in v.reason
    assert check_tolerance(0.0, run) and check_tolerance(5e-5, run) is None
    v = compare(run, ref, 5e-5, "r")
    assert v.ok and v.source == "log (4 decimals)" and v.steps_compared == 6
    off = trajectory(_log([x + 1e-4 if i == 2 else x for i, x in enumerate(LOSSES)]))
    v = compare(run, off, 5e-5, "r")
    assert not v.ok and v.first_mismatch.step == 3 and v.first_mismatch.diff == 1e-4
    assert compare(run, off, 1e-4, "r").ok  # the difference as printed, not 1.00000000005e-4
    # Against an events file, the log's digits still decide.
    assert not compare(trajectory(_events(LOSSES)), ref, 0.0, "r").ok


def test_a_maxtext_log_has_three_decimals():
    lines = [f"2026-12-02T06:29:56.{n:03d}Z I1202 metric_logger.py:265] completed step: {n}, "
             f"seconds: 0.017, TFLOP/s/device: 0.002, Tokens/s/device: 3791.694, "
             f"total_weights: 128, loss: 6.06{n}, lm_loss: 6.06{n}, perplexity: 428.168"
             for n in range(3)]
    t = trajectory(TrainerEvents(HEAD_LOG, True, lines=lines))
    assert t.losses == {0: 6.060, 1: 6.061, 2: 6.062} and t.decimals == 3
    assert t.resolution == 5e-4 and check_tolerance(5e-5, t)


def test_a_reference_short_of_the_last_step_or_interrupted_cannot_be_compared():
    run = trajectory(_events(LOSSES))
    v = compare(run, trajectory(_events(LOSSES[:4])), 0.0, "r")
    assert not v.ok and v.reason == "it reached step 4, not the run's last step 6"
    assert v.text() == "verify: could not compare with reference r: it reached step 4, not " \
                       "the run's last step 6"
    assert v.violation().to_json()["value"] is None
    broken = trajectory(_redo(_events(LOSSES[:3]), 2, LOSSES[2:]))
    v = compare(run, broken, 0.0, "r")
    assert not v.ok and "not uninterrupted: it restored step 2 from snapshot" in v.reason
    # A recovery after the steps compared changes none of them.
    later = trajectory(_redo(_events(LOSSES + [2.9, 2.8]), 7, [2.8]))
    assert compare(run, later, 0.0, "r").ok
    assert not compare(trajectory(_events([])), run, 0.0, "r").ok


def test_nan_losses_match_only_nan():
    nan = float("nan")
    a = trajectory(_events([1.0, nan]))
    assert compare(a, trajectory(_events([1.0, nan])), 0.0, "r").ok
    v = compare(a, trajectory(_events([1.0, 2.0])), 1.0, "r")
    assert not v.ok and v.first_mismatch.step == 2
    json.dumps(v.to_json(), allow_nan=False)  # JSON without NaN: "nan" as a string


def test_the_verdict_is_in_the_report_json_junit_and_markdown():
    ref = list(LOSSES)
    ref[1] += 1e-3
    res = _report([_kill(1)], Bounds(timeout=60), stopped="the one kill done")
    attach(res, compare(trajectory(_events(LOSSES)), trajectory(_events(ref)), 0.0, "demo-ref"))
    d = json.loads(json.dumps(res.to_json()))
    assert d["ok"] is False and d["exit_code"] == ExitCode.BOUND_MISSED == 3
    assert d["kills"][0]["ok"] is True  # the kill met its bounds: the run as a whole did not
    v = d["verify"]
    assert v["ok"] is False and v["reference"] == "demo-ref" and v["steps_compared"] == 6
    assert v["first_mismatch"] == {"step": 2, "run": LOSSES[1], "reference": ref[1]}
    assert v["tolerance"] == 0.0 and v["source"] == "events" and v["reason"] is None
    assert d["violations"][0]["bound"] == "verify" and d["violations"][0]["kill"] == 0
    doc = validate_junit(junit_xml(res, planned=1))
    (suite,) = doc.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    case = suite.findall("testcase")[-1]
    assert case.get("name") == "verify"
    assert case.find("failure").get("message").startswith("verify: step 2 differs")
    md = summary_markdown(res, planned=1)
    assert "- bound missed: verify: step 2 differs from reference demo-ref" in md


def test_a_verified_run_passes_and_says_so():
    res = _report([_kill(1)], Bounds(timeout=60), stopped="the one kill done")
    attach(res, compare(trajectory(_events(LOSSES)), trajectory(_events(LOSSES)), 0.0, "r"))
    assert res.ok and res.exit_code == 0 and res.to_json()["verify"]["ok"] is True
    (suite,) = validate_junit(junit_xml(res, planned=1)).findall("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "0"
    assert "- verify: losses bitwise equal" in summary_markdown(res, planned=1)
    assert _report([_kill(1)], Bounds()).to_json()["verify"] is None  # not asked


def test_the_reference_wait_says_where_the_reference_is():
    # Issue 49: --verify spent most of its time on the reference run with no progress line.
    # A line a tenth of the target, not a line a poll.
    from elastix.measure.verify import reference_phase

    assert reference_phase(None, 1195) == "starting (the target is step 1195)"
    seen = {reference_phase(s, 1195) for s in range(0, 1300)}
    assert len(seen) == 11 and "past step 119 of 1195" in seen and "past step 0 of 1195" in seen
    assert reference_phase(1195, 1195) == "past step 1190 of 1195"
    assert reference_phase(7, 5) == "past step 5 of 5"


def test_a_recoverys_skipped_steps_are_named_and_fail_unless_allowed():
    """Staged copies with steps in flight: the trainer restored its copy of step 5 after logging
    step 3, so steps 4 and 5 were computed but never logged on the run's side (issue 74)."""
    recs = _events(LOSSES[:3])
    t = "2026-11-29T09:51:00.000000Z"
    more = [{"ts": t, "event": "elastic_detected", "pid": 7, "recovery": 1, "kind": "slice_lost",
             "error": "slice 0 lost", "last_step": 3, "live_slices": 1, "lost_slices": [0]},
            {"ts": t, "event": "steps_skipped", "pid": 7, "first": 4, "last": 5, "count": 2},
            {"ts": t, "event": "elastic_restored", "pid": 7, "recovery": 1,
             "source": "snapshot", "step": 5, "bytes": 10, "seconds": 0.01},
            dict(_step(6, LOSSES[5]), ts=t)]
    run = trajectory(TrainerEvents(EVENTS_FILE, True, records=recs.records + more))
    v = compare(run, trajectory(_events(LOSSES)), 0.0, "r")
    assert not v.ok and v.not_logged == (4, 5) and v.steps_compared == 4
    assert v.first_mismatch is None and "steps 4-5 not logged by the run" in v.text()
    assert v.violation().text().startswith("verify: compared 4 of the 6 steps")
    assert v.to_json()["not_logged"] == [4, 5]
    assert compare(run, trajectory(_events(LOSSES)), 0.0, "r", allow_gaps=True).ok
    # the reference's gaps are named too
    ref = _events(LOSSES)
    holed = TrainerEvents(EVENTS_FILE, True, records=[r for r in ref.records
                                                      if r.get("step") != 3])
    v = compare(trajectory(_events(LOSSES)), trajectory(holed), 0.0, "r")
    assert not v.ok and v.not_in_reference == (3,) and v.not_logged == ()
    assert "step 3 not logged by the reference" in v.text()
