"""The slice-loss classifier, cell by cell beside pathwaysutils' own decision."""

from __future__ import annotations

import jax
import pytest
from pathwaysutils.elastic.elastic import is_error_due_to_slice_down

from elastix_trainer.elastic.classify import classify
from elastix_trainer.elastic.health import ManualHealth

MESH = {0, 1, 2, 3}
STATUSES = ["DATA_LOSS", "DEADLINE_EXCEEDED", "NOT_FOUND", "INTERNAL", "UNAVAILABLE",
            "RESOURCE_EXHAUSTED", "INVALID_ARGUMENT"]


class _CountingHealth(ManualHealth):
    """Slice 2's death is known only to a fresh probe; the cached view still says all live."""

    def __init__(self, down_on_probe: bool) -> None:
        super().__init__(4)
        self.down_on_probe, self.probes = down_on_probe, 0

    def probe(self):
        self.probes += 1
        if self.down_on_probe:
            self.set_down(2)
        return self.live_slices()


@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("slice_down", [True, False])
def test_classifier_matches_pathwaysutils_except_internal_with_all_live(status, slice_down):
    error = jax.errors.JaxRuntimeError(f"{status}: something failed at step 7")
    health = _CountingHealth(down_on_probe=slice_down)
    assert health.live_slices() == frozenset(MESH)  # stale: the loss is not in the cache
    got = classify(error, MESH, health)
    theirs = "slice_lost" if is_error_due_to_slice_down(error, log_traceback=False) else "other"
    if status == "INTERNAL" and not slice_down:
        # The one documented departure: a user-code callback error with every slice live.
        assert (theirs, got) == ("slice_lost", "other")
    else:
        assert got == theirs
    if status in ("DEADLINE_EXCEEDED", "NOT_FOUND", "INTERNAL"):
        assert health.probes == 1  # decided on a fresh probe, not the cached view


def test_not_a_runtime_error_is_never_slice_loss():
    assert classify(ValueError("DATA_LOSS in a user message"), MESH, ManualHealth(4)) == "other"


def test_a_callback_error_is_said_by_what_the_callback_raised():
    """A host callback that raises inside a jitted step: the line names its exception, not the
    traceback header XLA puts first (seen on a TPU machine, where that header was all the
    head's log said)."""
    from jax.experimental import io_callback

    from elastix_trainer.elastic.classify import error_line

    def callback(x):
        raise ValueError(f"the callback saw {int(x)}")

    f = jax.jit(lambda x: io_callback(callback, jax.ShapeDtypeStruct((), jax.numpy.int32), x))
    with pytest.raises(jax.errors.JaxRuntimeError) as caught:
        jax.block_until_ready(f(7))
    line = error_line(caught.value)
    assert "Traceback" not in line and line.endswith("ValueError: the callback saw 7"), line
    assert line.startswith("INTERNAL"), line
