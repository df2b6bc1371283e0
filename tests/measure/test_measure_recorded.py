"""Measurement from a recorded event stream and from the same run's log lines: exact numbers."""

from __future__ import annotations

import datetime as dt

import pytest
from measure_helpers import T0, recorded_run, to_jsonl, to_log, ts  # noqa: I001

from elastix.errors import UsageError
from elastix.measure.events import (
    assign_kills,
    events_from_jsonl,
    events_from_log,
    ms_of,
    parse_ts,
    recoveries,
)
from elastix.measure.goodput import goodput


def _kill_ms(seconds: float) -> int:
    return ms_of(T0 + dt.timedelta(seconds=seconds))


@pytest.fixture(params=["events", "log"])
def stream(request):
    recs, kill = recorded_run()
    if request.param == "events":
        return events_from_jsonl(to_jsonl(recs)), kill
    return events_from_log(to_log(recs)), kill


def test_both_sources_normalise_to_the_same_stream():
    recs, _ = recorded_run()
    a, b = events_from_jsonl(to_jsonl(recs)), events_from_log(to_log(recs))
    assert [e.name for e in a] == [r["event"] for r in recs]
    assert a == b


def test_recovery_timeline_exact(stream):
    events, kill = stream
    (rec,) = recoveries(events)
    assign_kills([rec], [_kill_ms(kill)])
    assert rec.kind == "in-process" and rec.complete
    assert rec.phase_seconds() == {"detection": 1.3, "cleanup": 0.049, "waiting for slices": 2.251,
                                   "restore": 0.2, "first step": 1.6}
    assert rec.downtime == 5.4
    assert (rec.last_step, rec.restored_step, rec.steps_lost) == (14, 10, 4)
    assert (rec.restore_source, rec.restore_bytes, rec.restore_load_seconds) == ("checkpoint",
                                                                              1234567, 0.2)
    assert (rec.first_step, rec.first_step_time_seconds) == (11, 1.6)
    assert rec.lost_slices == [2] and rec.live_slices == 4 and rec.required_slices == 4
    assert rec.pid_before == rec.pid_after == 4242 and rec.pid_same
    j = rec.to_json()
    assert j["kill"] == "2026-11-29T09:49:38.700Z" and j["steps_lost"] == 4


def test_without_kill_time_detection_counts_from_last_event(stream):
    events, _ = stream
    (rec,) = recoveries(events)
    assert rec.phase_seconds()["detection"] == 1.5  # from step 14 at 8.5 s
    assert rec.downtime == 4.1  # from detection, the only time the trainer knows


def test_goodput_breakdown_exact(stream):
    events, kill = stream
    rep = goodput(events, kills=[_kill_ms(kill)])
    assert rep.wall_seconds == 18.7
    assert rep.productive_seconds == pytest.approx(7.2, abs=1e-9)  # steps 2..10 and 12..20
    b = {k: round(v, 3) for k, v in rep.badput.items()}
    assert b == {"detection": 1.3, "cleanup": 0.049, "waiting for slices": 2.251,
                 "restore": 0.2, "reinitialisation": 0.0, "recompile": 1.6, "restart": 0.0,
                 "checkpoint stall": 0.01, "snapshot stall": 0.0,
                 "steps re-done": 1.6, "startup": 2.0, "failed saves": 0.0, "final save": 0.0,
                 "teardown": 0.1, "other": 2.39}  # the 0.1 s from the last step to run_end
    assert round(rep.productive_seconds + sum(rep.badput.values()), 6) == 18.7
    assert rep.goodput == pytest.approx(7.2 / 18.7)
    assert rep.last_step == 20 and rep.steps_redone == 4
    segs = rep.segments
    assert segs[0][1] == rep.start and segs[-1][2] == rep.end
    assert all(a[2] == b[1] for a, b in zip(segs, segs[1:], strict=False))


def test_goodput_without_kills_moves_time_to_other(stream):
    events, _ = stream
    rep = goodput(events)
    assert round(rep.badput["detection"], 3) == 1.5
    assert round(rep.badput["other"], 3) == 2.19  # and 0.1 s of teardown after the last step


def test_goodput_series_ends_at_overall_goodput(stream):
    events, kill = stream
    rep = goodput(events, kills=[_kill_ms(kill)])
    s = rep.series(5.0)
    assert [round(x[0], 3) for x in s] == [5.0, 10.0, 15.0, 18.7]
    assert s[-1][2] == pytest.approx(rep.goodput)
    assert s[0][1] == pytest.approx(0.4 * 6 / 5)  # steps 2..7 end by 5.0 s, nothing re-done yet


def test_restart_recovery_from_second_run_start():
    recs, _ = recorded_run()
    recs = recs[:17]  # up to step 14, no in-process recovery
    recs += [
        {"ts": ts(20.0), "event": "run_start", "pid": 5151, "num_slices": 4, "devices": 8},
        {"ts": ts(21.0), "event": "restore", "pid": 5151, "source": "checkpoint", "step": 10,
         "bytes": 99, "seconds": 0.5, "path": "/ckpt/10"},
        {"ts": ts(23.0), "event": "step", "pid": 5151, "step": 11, "seconds": 1.9,
         "loss": 1.0, "live_slices": 4},
    ]
    for events in (events_from_jsonl(to_jsonl(recs)), events_from_log(to_log(recs))):
        (rec,) = recoveries(events)
        assign_kills([rec], [_kill_ms(8.7)])
        assert rec.kind == "restart" and rec.complete
        assert rec.phase_seconds() == {"restart": 11.3, "restore": 1.0, "first step": 2.0}
        assert rec.steps_lost == 4 and rec.pid_same is False
        rep = goodput(events, kills=[_kill_ms(8.7)])
        assert round(rep.badput["restart"], 3) == 11.3
        # The restore phase [20.0, 21.0] is the new process's: 0.5 s of re-initialisation
        # [20.0, 20.5], then its 0.5 s read [20.5, 21.0] (the start-up restore).
        assert rec.restore_split() == {"reinitialisation": 0.5, "load": 0.5}
        assert round(rep.badput["restore"], 3) == 0.5
        assert round(rep.badput["reinitialisation"], 3) == 0.5


def test_incomplete_recovery_and_torn_last_line():
    recs, _ = recorded_run()
    text = to_jsonl(recs[:19]) + '{"ts": "2026-11-29T09:'
    (rec,) = recoveries(events_from_jsonl(text))
    assert not rec.complete and rec.downtime is None and rec.steps_lost is None
    assert rec.phase_seconds()["waiting for slices"] is None


def test_bad_event_file_is_a_usage_error():
    with pytest.raises(UsageError, match=r"2 of 2 lines unreadable \(first: line 1, not JSON\)"):
        events_from_jsonl("nope\n{}\n")
    with pytest.raises(UsageError, match="no valid 'ts'"):
        events_from_jsonl('{"event": "step", "ts": "yesterday"}\n')


def test_parse_ts_truncates():
    assert parse_ts("1970-01-01T00:00:01.999999Z") == 1999
    assert parse_ts("1970-01-01T00:00:01.5Z") == 1500


def test_timed_out_kill_row_uses_the_millisecond_format():
    """With no recovery the kill time was printed as '...T11:17:06.516726+00:00'; every other
    time in the table (and in -o json) is '...T11:17:06.516Z'."""
    from elastix.backends.base import KillRecord
    from elastix.measure.report import KillMeasurement
    from elastix.views.measurement import recovery_rows

    at = dt.datetime(2026, 11, 29, 11, 17, 6, 516726, tzinfo=dt.timezone.utc)
    kill = KillRecord(workload="w", pod="w-worker-1-0-2", slice=1, host=0, node="n", time=at)
    m = KillMeasurement(kills=[kill], recovery=None, source="events", state_after="Running",
                        jobset_restarts=0, head_restarts=0, head_pid_before=1, head_pid_after=1,
                        timed_out=True)
    assert dict(recovery_rows(m))["kill"] == "2026-11-29T11:17:06.516Z  w-worker-1-0-2"


def test_a_trainer_dated_loss_is_the_origin_with_or_without_a_kill_time():
    """The local trainer writes since_loss: detection and downtime count from the loss it
    dated (1.25 s before elastic_detected here), not from its last event before it, nor from
    a kill time (issue 39: the chaos table counted from the kill, goodput and TensorBoard from
    the loss, and one name showed two numbers)."""
    recs, kill = recorded_run()
    for r in recs:
        if r["event"] == "elastic_detected":
            r["since_loss"] = 1.25
    (rec,) = recoveries(events_from_jsonl(to_jsonl(recs)))
    assert rec.detection_from == "loss"
    assert rec.phase_seconds()["detection"] == 1.25
    assert rec.downtime == 4.1 + 1.25
    assign_kills([rec], [_kill_ms(kill)])  # a known kill time is named apart, in no phase
    assert rec.detection_from == "loss" and rec.phase_seconds()["detection"] == 1.25
    assert rec.kill_to_loss == 0.05 and rec.downtime == 4.1 + 1.25
    assert rec.to_json()["kill_to_loss_seconds"] == 0.05
    # The table says what the number is (issue 49: it stood unexplained), and a second kill
    # before the trainer saw the first is said so, not "during before detection".
    from elastix.backends.base import KillRecord
    from elastix.measure.report import KillMeasurement
    from elastix.views.measurement import recovery_rows

    rec.also_killed = [rec.kill + 10]
    k = KillRecord("demo", "demo-worker-2-0", 2, 0, None, T0 + dt.timedelta(seconds=kill))
    rows = dict(recovery_rows(KillMeasurement([k], rec, "events", "Running", 0, 0, None, None,
                                              False)))
    assert rows["kill to loss"] == ("0.050 s (from the kill until the trainer dated the loss; "
                                    "in no phase above)"), rows["kill to loss"]
    assert rows["also killed"].endswith("before the trainer detected the loss: replaced in "
                                        "this recovery"), rows["also killed"]
    assert rec.to_json()["also_killed"][0]["phase"] == "before_detection"  # JSON unchanged


def test_a_kill_during_a_recovery_is_that_recoverys_not_the_next_ones():
    """Issue 34: two kills at once, the second landing while the first recovery waited for
    slices, was named nowhere, and with a later kill it was taken as the next recovery's kill
    (that recovery's detection then counted from 18 s too early)."""
    recs, kill = recorded_run()
    recs = recs[:-1]  # no run_end: a second recovery follows
    ev = lambda s, name, **kw: {"ts": ts(s, 999), "event": name, "pid": 4242, **kw}  # noqa: E731
    recs += [
        {"ts": ts(25.0), "event": "step", "pid": 4242, "step": 30, "seconds": 0.4,
         "live_slices": 4},
        ev(30.0, "elastic_detected", recovery=2, kind="slice_lost", error="DATA_LOSS",
           last_step=30, live_slices=3, lost_slices=[1]),
        ev(30.05, "elastic_cleanup_done", recovery=2, seconds=0.05),
        ev(32.0, "elastic_slices_ready", recovery=2, live_slices=4, required_slices=4,
           seconds=1.95),
        ev(32.2, "elastic_restored", recovery=2, source="snapshot", step=30, bytes=10,
           seconds=0.2),
        ev(33.0, "elastic_first_step", recovery=2, step=31, seconds=0.8),
    ]
    first, second = recoveries(events_from_jsonl(to_jsonl(recs)))
    assign_kills([first, second], [_kill_ms(kill), _kill_ms(11.0), _kill_ms(29.0)])
    assert first.kill == _kill_ms(kill) and first.also_killed == [_kill_ms(11.0)]
    assert first.phase_at(_kill_ms(11.0)) == "waiting for slices"
    assert second.kill == _kill_ms(29.0) and second.also_killed == []
    assert second.phase_seconds()["detection"] == 1.0
    (also,) = first.to_json()["also_killed"]
    assert also["phase"] == "waiting_for_slices" and also["time"].endswith(":41.000Z")  # T0 + 11 s
    from elastix.backends.base import KillRecord
    from elastix.measure.report import KillMeasurement
    from elastix.views.measurement import recovery_rows

    k = KillRecord("demo", "demo-worker-2-0", 2, 0, None, T0 + dt.timedelta(seconds=kill))
    rows = dict(recovery_rows(KillMeasurement([k], first, "events", "Running", 0, 0, None, None,
                                              False)))
    assert rows["also killed"].endswith("41.000Z  during waiting for slices: replaced in this "
                                        "recovery"), rows["also killed"]
