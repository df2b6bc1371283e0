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
