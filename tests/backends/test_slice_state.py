"""Per-slice state from pod phases (shared by the GKE and local backends)."""

import pytest

from elastix.backends.base import PodInfo, SliceStatus


def _slice(*phases: str, hosts: int = 2) -> SliceStatus:
    pods = [PodInfo(name=f"p{i}", role="worker", phase=ph, slice=0, host=i)
            for i, ph in enumerate(phases)]
    return SliceStatus(index=0, hosts=hosts, pods=pods)


@pytest.mark.parametrize(("phases", "state"), [
    (("Running", "Running"), "Ready"),
    (("Running", "Pending"), "Degraded"),
    (("Running", "Failed"), "Degraded"),
    ((), "Pending"),  # a deleted pod before its replacement exists
    (("Pending", "Pending"), "Pending"),
    (("Failed", "Pending"), "Pending"),  # one is being replaced
    (("Failed", "Failed"), "Failed"),
    (("Unknown", "Failed"), "Failed"),
    (("Succeeded", "Succeeded"), "Completed"),
])
def test_slice_state(phases, state):
    assert _slice(*phases).state == state


@pytest.mark.parametrize(("phases", "state"), [
    (("Running", "Stopped"), "Stopped"),  # a hung host: its process exists, the slice is down
    (("Stopped", "Stopped"), "Stopped"),
    (("Stopped", "Pending"), "Stopped"),
])
def test_a_stopped_host_makes_its_slice_not_ready(phases, state):
    assert _slice(*phases).state == state


def test_a_slice_the_controller_lost_is_lost_whatever_its_pods_say():
    s = _slice("Running", "Running")
    s.lost = "the trainer declared it lost at ..."
    assert s.state == "Lost" and s.ready == 2
    done = _slice("Succeeded", "Succeeded")
    done.lost = "a stale recovery"
    assert done.state == "Completed"


@pytest.mark.parametrize(("failures", "limit", "restarts", "budget"), [
    (0, 2, 0, 1), (2, 2, 1, 1), (3, 2, 1, 1), (4, 40, 2, 20), (0, None, 0, None)])
def test_slice_restarts_count_whole_slices(failures, limit, restarts, budget):
    """backoffLimit = restarts x hosts: one slice restart costs every host's pod."""
    s = SliceStatus(index=0, hosts=2, pods=[], job_failures=failures, backoff_limit=limit)
    assert (s.slice_restarts, s.max_slice_restarts) == (restarts, budget)
