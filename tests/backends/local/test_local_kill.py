"""``kill_worker`` fails like the GKE backend's: same error types, same range check."""

from __future__ import annotations

import pytest
from local_records import recorded_workload

from elastix.backends.local.state import PodRecord, SliceState
from elastix.errors import BackendError, NotFoundError, UsageError


@pytest.fixture
def stopped(state_dir):
    """A workload of 2 slices whose one recorded worker is no longer running (no processes)."""
    gone = PodRecord("stopped-worker-0-0-1", "worker", 0, 0, pid=2**22 + 1, phase="Failed")
    recorded_workload(state_dir, "stopped", "Failed", created="2026-11-29T09:50:01.123456Z",
                      slices=[SliceState(0, 2, 1, [gone]), SliceState(1, 0, 1, [])])
    return "stopped"


def test_no_running_worker_is_a_backend_error_not_not_found(backend, stopped):
    with pytest.raises(BackendError) as err:
        backend.kill_worker(stopped, slice=1)
    assert not isinstance(err.value, NotFoundError)  # the workload exists: GKE says the same
    assert err.value.message == "no running worker pod of stopped slice 1 to kill"
    assert "elastix workload status stopped" in err.value.hint


def test_slice_out_of_range_is_a_usage_error(backend, stopped):
    with pytest.raises(UsageError, match=r"--slice 2 is out of range: stopped has 2 slices \(0-1\)"):
        backend.kill_worker(stopped, slice=2)
    with pytest.raises(UsageError, match="out of range"):
        backend.kill_worker(stopped, slice=-1)


def test_host_out_of_range_is_a_usage_error(backend, stopped):
    """It was "no running worker pod ... host 3" (exit 1): a typo read as a missing pod."""
    with pytest.raises(UsageError) as err:
        backend.kill_worker(stopped, slice=0, host=3)
    assert err.value.message == "--host 3 is out of range: stopped has 1 hosts per slice (0-0)"
    with pytest.raises(UsageError, match="out of range"):
        backend.kill_worker(stopped, slice=0, host=-1)


def test_missing_workload_is_still_not_found(backend):
    with pytest.raises(NotFoundError):
        backend.kill_worker("nothing-here")
