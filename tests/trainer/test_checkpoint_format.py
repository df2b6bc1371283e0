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
import pytest
import tensorstore as ts
from trainer_helpers import assert_restores

from elastix_trainer.obs.events import EventLog
from elastix_trainer.state import manager
from elastix_trainer.state.checkpoint import Checkpointer
from elastix_trainer.state.snapshot import host_copy


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


def _peak_traced_during(fn) -> int:
    """Peak bytes numpy (and Python) allocated while ``fn`` ran, on any thread; numpy reports
    its arrays' buffers to ``tracemalloc``, tensorstore's own buffers are not counted."""
    import tracemalloc

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _save_peak(tmp_path, host: dict) -> int:
    """Peak bytes numpy allocated while ``host`` was saved through the checkpointer's manager,
    which then restores it."""
    mgr = manager.new_manager(str(tmp_path / "ck"), async_save=False)

    def save():
        mgr.save(1, args=manager.save_args(host, {"i": 1}), force=True)
        mgr.wait_until_finished()

    peak = _peak_traced_during(save)
    mgr.close()
    assert_restores(Checkpointer(str(tmp_path / "ck"), 1, EventLog(None)), 1,
                    {"w": np.ones((4096, 2048), np.float32)}, {"i": 1})
    return peak


def test_a_host_copy_is_written_without_copying_it_again(tmp_path):
    """Orbax deep-copies each host array before writing it; a host copy of the state is
    read-only, so that copy only doubled the host memory a save holds (issue 58)."""
    host = {"w": np.ones((4096, 2048), np.float32)}  # 32 MiB
    host["w"].flags.writeable = False  # as numpy hands out a JAX array's host copy
    peak = _save_peak(tmp_path, host)
    assert peak < 8 << 20, f"{peak / 2**20:.1f} MiB allocated writing a 32 MiB host copy"


def test_a_writeable_host_array_is_still_copied_before_it_is_written(tmp_path):
    host = {"w": np.ones((4096, 2048), np.float32)}  # writeable: its owner may change it
    peak = _save_peak(tmp_path, host)
    assert peak >= 32 << 20, f"{peak / 2**20:.1f} MiB: the writeable array was not copied"


def test_the_state_host_copy_is_read_only():
    """What makes skipping the copy safe: the host copy a checkpoint writes cannot be
    written through, and a step that donates the device state leaves it as it was."""
    x = jnp.ones((256, 256))
    host = host_copy({"w": x})["w"]
    assert not host.flags.writeable
    y = jax.jit(lambda v: v * 3, donate_argnums=0)(x)
    jax.block_until_ready(y)
    np.testing.assert_array_equal(host, np.ones((256, 256), np.float32))


def test_a_read_only_view_of_a_writeable_array_is_not_read_only():
    base = np.ones(8)
    view = base[:4]
    view.flags.writeable = False
    assert not manager.read_only(view)
    base.flags.writeable = False
    assert manager.read_only(view)


@pytest.mark.parametrize(("window", "most"), [(1 << 20, 1 << 20), (None, 8 * (512 << 10))])
def test_a_save_writes_at_most_a_window_of_host_arrays_at_once(tmp_path, monkeypatch,
                                                               window, most):
    """Orbax starts every array's write at once, and tensorstore holds a copy of each chunk
    that is not contiguous in its array while it writes it: the window bounds those copies."""
    import asyncio

    seen = {"now": 0, "max": 0}
    write = ocp.type_handlers.NumpyHandler._open_and_write

    async def counted(self, value, tspec, ts_context):  # the real write, its bytes counted
        seen["now"] += value.nbytes
        seen["max"] = max(seen["max"], seen["now"])
        try:
            await asyncio.sleep(0.02)  # long enough for every other write to start, unbounded
            return await write(self, value, tspec, ts_context)
        finally:
            seen["now"] -= value.nbytes

    monkeypatch.setattr(ocp.type_handlers.NumpyHandler, "_open_and_write", counted)
    monkeypatch.setattr(manager, "WRITE_WINDOW_BYTES", window)
    host = {f"w{i}": np.full((128, 1024), i, np.float32) for i in range(8)}  # 8 x 512 KiB
    for x in host.values():
        x.flags.writeable = False
    mgr = manager.new_manager(str(tmp_path / "ck"), async_save=False)
    mgr.save(1, args=manager.save_args(host, {"i": 1}), force=True)
    mgr.wait_until_finished()
    mgr.close()
    assert seen["max"] == most, seen
    assert_restores(Checkpointer(str(tmp_path / "ck"), 1, EventLog(None)), 1,
                    {k: np.asarray(v) for k, v in host.items()}, {"i": 1})
