"""A recovery cut short by a second loss (``--during restore``: the opener's recovery, then a
fault in its restore) is measured as the first recovery after it that steps again, timed from
the first fault, as docs/chaos.md says; ``--max-downtime`` checks that time (issue 60)."""

from __future__ import annotations

import datetime as dt

from measure_helpers import T0, _step, ts

from elastix.backends.base import KillRecord, TrainerEvents, WorkloadStatus
from elastix.measure.aim import Aim
from elastix.measure.chaos import measure_kill
from elastix.measure.report import Bounds, check_bounds


def _ev(s: float, name: str, **kw) -> dict:
    return {"ts": ts(s), "event": name, "pid": 4242, **kw}


BEFORE = [{"ts": ts(0), "event": "run_start", "pid": 4242, "num_slices": 2, "devices": 8,
           "config": {"d": 64}}]
for _k in range(1, 15):
    BEFORE.append(_step(1.0 + _k * 0.5, _k, 0.4))
    if _k == 10:
        BEFORE.append(_ev(6.05, "snapshot_taken", step=10, bytes=100, seconds=0.01))
# The opener (a kill at 8.0 s): recovery 1, its loss dated 8.05 s; the aimed kill lands in its
# restore (9.25 s) and opens recovery 2 (loss 9.3 s), which steps again at 10.6 s.
FIRST = [_ev(8.1, "elastic_detected", recovery=1, kind="slice_lost", error="gone",
             last_step=14, live_slices=1, lost_slices=[1], since_loss=0.05),
         _ev(8.15, "elastic_cleanup_done", recovery=1, seconds=0.05),
         _ev(9.2, "elastic_slices_ready", recovery=1, live_slices=2, required_slices=2,
             seconds=1.05)]
SECOND = [_ev(9.4, "elastic_detected", recovery=2, kind="slice_lost", error="gone again",
              last_step=14, live_slices=1, lost_slices=[0], since_loss=0.1),
          _ev(9.45, "elastic_cleanup_done", recovery=2, seconds=0.05),
          _ev(10.4, "elastic_slices_ready", recovery=2, live_slices=2, required_slices=2,
              seconds=0.95),
          _ev(10.45, "elastic_restored", recovery=2, source="snapshot", step=10, bytes=100,
              seconds=0.01),
          _step(10.6, 11, 0.15), _ev(10.6, "elastic_first_step", recovery=2, step=11,
                                     seconds=0.15)]


class _Stand:
    """A backend's reading side over records the test writes: the trainer's events and a
    running status."""

    def __init__(self) -> None:
        self.records = BEFORE + FIRST

    def events_path(self, name: str) -> None:
        return None  # read whole at each poll, as a head's log is

    def trainer_events(self, name: str) -> TrainerEvents:
        return TrainerEvents(source="events", from_start=True, records=list(self.records))

    def status(self, name: str) -> WorkloadStatus:
        return WorkloadStatus(name, "default", "local", "Running", None, 2)

    def resume(self, name: str, rec: KillRecord) -> bool:
        return False


def _kill(s: float, slice_: int) -> KillRecord:
    return KillRecord("demo", f"demo-worker-{slice_}-0", slice_, 0, "localhost",
                      T0 + dt.timedelta(seconds=s), pid=40 + slice_)


def test_a_restore_cut_short_is_timed_from_the_first_fault():
    stand = _Stand()

    def aimed() -> list[KillRecord]:
        stand.records = stand.records + SECOND
        return [_kill(9.25, 0)]

    # since: the events before the opener (the restore aimed at opens after them)
    m = measure_kill(stand, "demo", aimed, opened=[_kill(8.0, 1)], baseline=0, timeout=5,
                     poll=0.0, sleep=lambda s: None, aim=Aim(during="restore"),
                     since=len(BEFORE))
    r = m.recovery
    assert m.cut_short == [1] and r.index == 2 and r.complete
    # from the first fault's loss (8.05 s) to the first step after (10.6 s): 2.55 s, not the
    # 1.3 s from the second loss
    assert r.downtime == 2.55
    assert r.to_json()["first_fault"] == ts(8.05)[:23] + "Z"
    # its phases stay its own (goodput books recovery 1's from its own events)
    assert r.phase_seconds()["detection"] == 0.1
    (v,) = check_bounds(m, 1, Bounds(max_downtime=2.0))
    assert v.bound == "max_downtime" and v.value == 2.55
    assert check_bounds(m, 1, Bounds(max_downtime=3.0)) == []
