"""The one definition of a recovery's phases (issue 39): the trainer's fold over raw records and
the launcher's measurement give the same numbers for the same events."""

from __future__ import annotations

from elastix.measure.events import assign_kills, events_from_records, recoveries
from elastix.protocol import phases

T = "2026-12-03T10:00:{:06.3f}Z"


def _records() -> list[dict]:
    ev = lambda s, name, **kw: {"ts": T.format(s), "event": name, "pid": 7, **kw}  # noqa: E731
    return [
        ev(0.0, "run_start", num_slices=2),
        ev(1.0, "step", step=1, seconds=1.0, loss=3.0, live_slices=2),
        ev(1.2, "step", step=2, seconds=0.2, loss=2.9, live_slices=2),
        ev(1.7, "elastic_detected", recovery=1, kind="slice_lost", error="gone", last_step=None,
           live_slices=1, lost_slices=[0], since_loss=0.4567),
        ev(1.701, "elastic_cleanup_done", recovery=1, seconds=0.001),
        ev(2.9, "elastic_slices_ready", recovery=1, live_slices=2, required_slices=2,
           seconds=1.19),
        ev(3.05, "elastic_restored", recovery=1, step=1, source="snapshot", bytes=10,
           seconds=0.068),
        ev(3.2, "elastic_first_step", recovery=1, step=2, seconds=0.11),
        ev(3.2, "step", step=2, seconds=0.11, loss=2.9, live_slices=2),
    ]


def test_the_trainers_fold_and_the_launchers_measurement_agree():
    fold = phases.InProcess()
    done = [m for r in _records() if (m := fold.add(r)) is not None]
    (one,) = done
    got = one.scalars()
    (rec,) = recoveries(events_from_records(_records()))
    assign_kills([rec], [phases.loss_ms(rec.start, 0.5)])  # a kill 43.3 ms before the loss
    want = {f"{phases.snake(n)}_seconds": v for n, v in rec.phase_seconds().items()}
    want.update(downtime_seconds=rec.downtime, steps_lost=float(rec.steps_lost))
    assert got == want
    assert got["detection_seconds"] == 0.457 and got["restore_seconds"] == 0.15
    assert got["downtime_seconds"] == 1.957 and got["steps_lost"] == 1.0
    assert rec.detection_from == "loss" and rec.kill_to_loss == 0.043


def test_no_dated_loss_counts_from_the_kill_else_the_detection():
    m = phases.Moments(start=10_000, cleanup_done=10_001, slices_ready=11_000, restored=11_100,
                       first_step_at=11_200)
    assert "detection" not in dict((n, a) for n, a, _ in phases.spans(m))
    assert phases.downtime(m) == 1.2 and m.origin_name is None
    m.kill = 9_900
    assert phases.seconds(m)["detection"] == 0.1 and phases.downtime(m) == 1.3
    assert m.origin_name == "kill" and phases.kill_to_loss(m) is None


def test_a_loss_dated_at_or_before_the_kill_came_with_it():
    """Both are kept to the ms, the loss as a detection less ``since_loss``: a CI run saw it
    1 ms before the kill. A hung host's loss is its last heartbeat, before the SIGSTOP."""
    assert phases.kill_to_loss(phases.Moments(kill=1000, loss=999, start=1200)) == 0
    assert phases.kill_to_loss(phases.Moments(kill=1000, loss=1043, start=1200)) == 0.043
