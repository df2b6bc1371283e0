"""A head fault in words (issue 48, item 11): the head is on no slice, a dead head is no
controller that kept its PID, and a restart from init loaded nothing."""

from __future__ import annotations

import datetime as dt

from elastix.backends.base import KillRecord
from elastix.measure.events import Recovery
from elastix.measure.report import KillMeasurement
from elastix.views.measurement import fault_line, recovery_rows

WHEN = dt.datetime(2026, 12, 4, 21, 3, 45, 157000, tzinfo=dt.timezone.utc)
HEAD = KillRecord("demo", "demo-pathways-head-0-0-0", None, None, "localhost", WHEN, pid=28709,
                  fault="head")


def test_the_head_is_named_as_the_head_not_slice_none():
    assert fault_line(HEAD) == ("killed pod demo-pathways-head-0-0-0 (pid 28709) (the head) on "
                                "node localhost at 2026-12-04T21:03:45.157Z")
    worker = KillRecord("demo", "demo-worker-1-0", 1, 0, "localhost", WHEN, pid=7)
    assert "(slice 1, host 0)" in fault_line(worker)


def test_a_dead_head_is_no_controller_that_kept_its_pid():
    # --max-restarts 0: the workload failed; the status still records the dead head's PID
    m = KillMeasurement([HEAD], None, "events", "Failed", 0, 0, 28709, 28709, False,
                        fault="head")
    assert m.pid_same is False
    assert dict(recovery_rows(m))["controller PID same"] == "no"


def test_a_restart_from_init_says_nothing_was_loaded():
    t = 1_764_000_000_000
    r = Recovery(1, "restart", kill=t, start=t, restored=t + 300, first_step_at=t + 600,
                 first_step=1, last_step=26, restored_step=0, restore_source="init",
                 pid_before=1, pid_after=2)
    m = KillMeasurement([HEAD], r, "events", "Running", 1, 0, 1, 2, False, fault="head")
    assert dict(recovery_rows(m))["restored"] == "step 0 from init (nothing saved was loaded)"
