"""How a checkpoint is stored: restores run at the speed of the storage.

zstd decoding, not the disk, bounded a restore, and a host copy written as one chunk per array
made every device read and decode the whole array for its shard. A save now writes uncompressed
chunks of at most ``CHUNK_BYTES``; checkpoints written the old way still restore.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import tensorstore as ts
from trainer_helpers import assert_restores

from elastix_trainer.obs.events import EventLog
from elastix_trainer.state import manager
from elastix_trainer.state.checkpoint import Checkpointer


def _zarr(step_dir, name: str) -> dict:
    spec = {"driver": "zarr", "kvstore": {"driver": "ocdbt", "base": f"file://{step_dir}/state",
                                          "path": name}}
    return ts.open(spec).result().spec().to_json()["metadata"]


def test_saved_uncompressed_in_chunks_no_larger_than_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(manager, "CHUNK_BYTES", 64 << 10)  # a 256 KiB array: 4+ chunks
    ck = Checkpointer(str(tmp_path / "ck"), 1, EventLog(None))
    ck.save(1, {"w": jnp.ones((64, 1024))}, {"i": 1})
    assert ck.settle(timeout=60) is True
    ck.close()
    meta = _zarr(tmp_path / "ck" / "1", "w")
    assert meta["compressor"] is None
    assert math.prod(meta["chunks"]) * 4 <= 64 << 10, meta["chunks"]


def test_a_checkpoint_written_compressed_still_restores(tmp_path):
    want = {"w": np.arange(32.0).reshape(4, 8), "step": np.int32(7)}
    mgr = ocp.CheckpointManager(tmp_path / "ck", options=ocp.CheckpointManagerOptions(create=True))
    mgr.save(3, args=ocp.args.Composite(state=ocp.args.StandardSave(jax.tree.map(jnp.asarray,
                                                                                want)),
                                        data=ocp.args.JsonSave({"next_index": 3})))
    mgr.wait_until_finished()
    mgr.close()
    assert _zarr(tmp_path / "ck" / "3", "w")["compressor"] is not None  # the old format
    ck = Checkpointer(str(tmp_path / "ck"), 1, EventLog(None))
    assert_restores(ck, 3, want, {"next_index": 3})
