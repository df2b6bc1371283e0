"""``--snapshot-copy staged``: a host copy of the state is copied on the devices at the step
boundary and read to host memory by a thread while the next steps run; it counts once the
read has ended whole. On 8 CPU devices (4 slices x 2), against the boundary copy and the
uninterrupted run: the same steps saved with the same bytes, an exact recovery from such a
copy, a copy still being read when a step fails is waited for and kept (so the step a recovery
returns to does not depend on the read's pace), and a read that failed is never kept."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import pytest
from test_elastic import _coming_back, assert_matches, down_once_at
from test_overlap_copies import _run, same_saves_as_boundary_copies
from trainer_helpers import losses, on, run_elastic

from elastix_trainer.state.hostcopy import HostCopy


def test_staged_copies_save_the_same_states_as_boundary_copies(reference, tmp_path):
    taken = same_saves_as_boundary_copies(tmp_path, "staged", reference)
    assert all(0 <= e["seconds"] and 0 < e["copy_seconds"] for e in taken[:3])


@pytest.mark.parametrize(("period", "down_at", "down", "restored"), [
    (2, 8, 3, 6),  # the snapshot of 6, staged and landed before the loss: restored exactly
    # Step 3's state was complete when it was staged, so its read ends whole though step 4
    # fails: the recovery waits for it and restores it, however far the read had got when the
    # step failed (with overlap, step 4 took that copy and it is lost).
    (3, 4, 1, 3),
])
def test_a_recovery_restores_a_staged_snapshot_exactly(reference, tmp_path, period, down_at,
                                                       down, restored):
    health, cfg = _coming_back(tmp_path, snapshot_period=period, snapshot_copy="staged")
    outcome, trainer, _ = run_elastic(
        cfg, health,
        setup=lambda tr, rt: on(tr, before_dispatch=down_once_at(health, down_at, down)))
    assert outcome.status == "completed", outcome
    back = trainer.events.of("elastic_restored")[0]
    assert (back["source"], back["step"]) == ("snapshot", restored)
    assert_matches(losses(trainer.events), reference["losses"])


def test_a_staged_copy_whose_read_failed_is_never_kept(tmp_path):
    trainer = _run(tmp_path, "staged")
    kept = trainer.snapshots.latest
    assert kept is not None and kept.step == 8
    gone = jnp.ones((4,))
    gone.delete()  # its buffer is gone: reading it fails, as a read from a lost host does
    copy = HostCopy(9, {"next_index": 0}, True, False, time.monotonic())
    copy.fetch({"w": gone}, jnp.array(True), lambda: None)
    assert copy.done.wait(60)
    assert copy.error is not None and copy.host is None
    trainer._staged = copy
    trainer.settle_copy()
    assert trainer.snapshots.latest is kept  # the failed copy of step 9 replaced nothing
    assert [e["step"] for e in trainer.events.of("snapshot_taken")] == [2, 4, 6, 8]


def test_the_hosts_verdict_on_a_staged_copy_comes_after_its_read(tmp_path):
    """The verdict (the local stand-in's question to the hosts) runs once the read has ended,
    and a verdict that fails drops the copy."""
    order = []
    copy = HostCopy(3, {}, True, False, time.monotonic())

    def verdict():
        order.append(("verdict", copy.host is not None, copy.ended is not None))
        raise jax.errors.JaxRuntimeError("DATA_LOSS: a host of the mesh went")

    copy.fetch({"w": jnp.arange(4.0)}, jnp.array(True), verdict)
    assert copy.done.wait(60)
    assert order == [("verdict", True, True)]
    assert isinstance(copy.error, jax.errors.JaxRuntimeError)
