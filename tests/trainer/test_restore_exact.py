"""A restore gives back the saved state bit for bit, on the shardings asked for.

The restore reads one replica per device shard (stored chunks that straddle a shard boundary
are read in part) and, over several slices, copies that replica device to device; checkpoints
written before the layout change (zstd, one chunk per array) go through the same path.
"""

from __future__ import annotations

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
import tensorstore as ts
from trainer_helpers import make_cfg, make_trainer

from elastix_trainer.obs.events import EventLog
from elastix_trainer.state import manager
from elastix_trainer.state.checkpoint import Checkpointer
from elastix_trainer.state.snapshot import host_copy


def _trained_like(num_slices: int):
    """(state, abstract): a tiny state with every float perturbed (fresh AdamW moments are zeros,
    which would hide a shard read from the wrong place)."""
    trainer = make_trainer(make_cfg(num_slices=num_slices), EventLog(None))
    session = trainer.start(frozenset(trainer.slices))
    leaves, tree = jax.tree.flatten(session.state)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    noisy = [x + jax.random.normal(k, x.shape, x.dtype) if jax.numpy.issubdtype(
        x.dtype, jax.numpy.floating) else x for x, k in zip(leaves, keys, strict=True)]
    state = jax.device_put(jax.tree.unflatten(tree, noisy),
                           jax.tree.map(lambda x: x.sharding, session.state))
    return state, session.fns.abstract


def _assert_same(restored, saved, abstract) -> None:
    got, want = jax.tree.leaves(restored), jax.tree.leaves(saved)
    assert jax.tree.structure(restored) == jax.tree.structure(saved)
    for a, b, target in zip(got, want, jax.tree.leaves(abstract), strict=True):
        assert a.sharding == target.sharding, (a.sharding, target.sharding)
        a, b = np.asarray(a), np.asarray(b)
        assert (a.dtype, a.shape) == (b.dtype, b.shape)
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("num_slices", [1, 4], ids=["one-slice", "four-slices"])
def test_restore_is_bit_exact_on_the_target_shardings(tmp_path, monkeypatch, num_slices):
    monkeypatch.setattr(manager, "CHUNK_BYTES", 16 << 10)  # chunks straddle shard edges
    state, abstract = _trained_like(num_slices)
    ck = Checkpointer(str(tmp_path / "ck"), 1, EventLog(None), async_save=False)
    ck.save(2, state, {"next_index": 5})
    restored, data, nbytes = ck.restore(2, abstract)
    ck.close()
    assert data == {"next_index": 5} and nbytes > 0
    _assert_same(restored, state, abstract)


def test_a_checkpoint_in_the_old_layout_restores_onto_four_slices(tmp_path):
    state, abstract = _trained_like(4)
    mgr = ocp.CheckpointManager(  # what a save wrote before: zstd, one chunk per host array
        tmp_path / "ck", item_handlers={"state": ocp.PyTreeCheckpointHandler(),
                                        "data": ocp.JsonCheckpointHandler()},
        options=ocp.CheckpointManagerOptions(create=True))
    mgr.save(3, args=ocp.args.Composite(state=ocp.args.PyTreeSave(host_copy(state)),
                                        data=ocp.args.JsonSave({"next_index": 3})))
    mgr.wait_until_finished()
    mgr.close()
    embed = ts.open({"driver": "zarr", "kvstore": {
        "driver": "ocdbt", "base": f"file://{tmp_path}/ck/3/state", "path": "params.embed"}}).result()
    assert embed.spec().to_json()["metadata"]["compressor"] is not None  # the old layout
    assert list(embed.chunk_layout.read_chunk.shape) == list(embed.shape)
    ck = Checkpointer(str(tmp_path / "ck"), 1, EventLog(None))
    restored, data, _ = ck.restore(3, abstract)
    ck.close()
    assert data == {"next_index": 3}
    _assert_same(restored, state, abstract)
