"""``--snapshot-copy overlap``: the next step copies the state it was given to pinned host
memory while it computes. On 8 CPU devices (4 slices x 2), against the boundary copy and the
uninterrupted run: the same steps saved with the same bytes, an exact recovery from such a
copy, and a copy whose step failed is never kept."""

from __future__ import annotations

import jax
import numpy as np
from test_elastic import _coming_back, assert_matches, down_once_at
from trainer_helpers import losses, make_cfg, on, run_elastic

from elastix_trainer.mesh import build_mesh
from elastix_trainer.step import abstract_state


def _run(tmp_path, copy, **cfg):
    config = make_cfg(checkpoint_dir=str(tmp_path / copy), snapshot_period=2,
                      snapshot_copy=copy, **cfg)
    outcome, trainer, _ = run_elastic(config)
    assert outcome.status == "completed", outcome
    return trainer


def same_saves_as_boundary_copies(tmp_path, copy, reference):
    """Run ``copy`` and ``sync`` alike: the same losses, checkpoints at 4 and 8 holding the same
    bytes, snapshots at 2, 4, 6, 8, the first three taken while later steps ran (the last is
    the final step's, copied at the boundary). Returns that run's ``snapshot_taken`` records."""
    sync, other = _run(tmp_path, "sync"), _run(tmp_path, copy)
    assert_matches(losses(other.events), reference["losses"])
    assert [e["step"] for e in other.events.of("checkpoint_committed")] == \
        [e["step"] for e in sync.events.of("checkpoint_committed")] == [4, 8]
    taken = other.events.of("snapshot_taken")
    assert [e["step"] for e in taken] == [2, 4, 6, 8]
    assert [e["step"] for e in taken if "copy_seconds" in e] == [2, 4, 6]
    abstract = abstract_state(other.model, other.opt, build_mesh(other.slices, range(4)), 0)
    for step in (4, 8):
        a, _, _ = sync.ckpt.restore(step, abstract)
        b, _, _ = other.ckpt.restore(step, abstract)
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    return taken


def test_overlapped_copies_save_the_same_states_as_boundary_copies(reference, tmp_path):
    taken = same_saves_as_boundary_copies(tmp_path, "overlap", reference)
    assert all(e["seconds"] == 0.0 for e in taken[:3])


def test_a_recovery_restores_an_overlapped_snapshot_exactly(reference, tmp_path):
    health, cfg = _coming_back(tmp_path, snapshot_period=2, snapshot_copy="overlap")
    outcome, trainer, _ = run_elastic(
        cfg, health, setup=lambda tr, rt: on(tr, before_dispatch=down_once_at(health, 8, 3)))
    assert outcome.status == "completed", outcome
    restored = trainer.events.of("elastic_restored")[0]
    # step 6's copy was taken by step 7, which completed: it is the snapshot restored
    assert (restored["source"], restored["step"]) == ("snapshot", 6)
    assert_matches(losses(trainer.events), reference["losses"])


def test_a_copy_whose_step_failed_is_never_kept(reference, tmp_path):
    """The copy of step 3 is taken by step 4; a slice lost before step 4 fails it, so that
    copy never counts: the recovery starts from scratch, as nothing else was saved."""
    health, cfg = _coming_back(tmp_path, snapshot_period=3, snapshot_copy="overlap")
    outcome, trainer, _ = run_elastic(
        cfg, health, setup=lambda tr, rt: on(tr, before_dispatch=down_once_at(health, 4, 1)))
    assert outcome.status == "completed", outcome
    restored = trainer.events.of("elastic_restored")[0]
    assert (restored["source"], restored["step"]) == ("init", 0)
    records = trainer.events.records
    before = records[:records.index(restored)]
    assert not [r for r in before if r["event"] == "snapshot_taken"], before
    assert_matches(losses(trainer.events), reference["losses"])
