"""Checkpoints and events on gs:// through the fake-gcs-server emulator (real HTTP, loopback)."""

from __future__ import annotations

import json

import pytest
from fake_gcs import emulator_env
from trainer_helpers import losses, make_cfg, make_trainer, run_elastic, shards_on_gcs

from elastix_trainer.obs.events import EventLog
from elastix_trainer.state.checkpoint import COMMIT_MARKER, Checkpointer


@pytest.fixture
def gcs_env(gcs, monkeypatch):
    for k, v in emulator_env(gcs).items():
        monkeypatch.setenv(k, v)
    return gcs


def test_gcs_checkpoints_resume_and_events(gcs_env, reference):
    path = "gs://ckpts/run1"
    cfg = make_cfg(checkpoint_dir=path)
    events = EventLog(path + "/events.jsonl")
    trainer = make_trainer(cfg, events)
    assert trainer.train(trainer.start(range(4)), until=4) == "completed"  # stop at step 4
    trainer.finish()
    events.close()
    ck = Checkpointer(path, 4, EventLog(None))
    assert ck.committed_steps() == [4]
    from elastix_trainer.storage import epath

    assert (epath(path) / "4" / COMMIT_MARKER).exists()
    # An uncommitted GCS step (no commit marker) is never restored and gets cleaned up.
    (epath(path) / "6" / "state").mkdir(parents=True)
    (epath(path) / "6" / "state" / "junk").write_text("half-written")
    assert ck.committed_steps() == [4] and ck.uncommitted() == ["6"]

    resumed_cfg = make_cfg(checkpoint_dir=path, checkpoint_period=0)
    outcome, resumed, _ = run_elastic(resumed_cfg)
    assert outcome.status == "completed"
    assert resumed.events.of("restore")[0]["step"] == 4
    assert ck.uncommitted() == []
    got = losses(resumed.events)
    assert got == {s: reference["losses"][s] for s in range(5, 9)}
    events = epath(path + "/events.jsonl").read_text().splitlines()
    names = [json.loads(line)["event"] for line in events]
    assert names.count("step") == 4 and names[-1] == "checkpoint_committed"


def test_training_data_from_gcs_matches_local(gcs_env, tmp_path, monkeypatch):
    """ArrayRecord shards under gs:// give the same batches as the same shards on disk; each
    is copied once into the cache and reused; a path with no shards is one clear error."""
    import numpy as np

    from elastix.errors import UsageError
    from elastix_trainer.data import make_iterator

    local = shards_on_gcs(tmp_path, "gs://ckpts/data", 3)
    monkeypatch.setenv("ELASTIX_DATA_CACHE", str(tmp_path / "cache"))
    a = make_iterator(str(local), 16, 256, seed=3)
    b = make_iterator("gs://ckpts/data", 16, 256, seed=3)
    for _ in range(5):
        np.testing.assert_array_equal(a.next_batch(8), b.next_batch(8))
    cached = sorted((tmp_path / "cache").rglob("*.array_record"))
    assert [p.name for p in cached] == sorted(p.name for p in local.iterdir())
    stamps = [p.stat().st_mtime_ns for p in cached]
    make_iterator("gs://ckpts/data", 16, 256, seed=3)  # a second start reuses the copies
    assert [p.stat().st_mtime_ns for p in cached] == stamps
    with pytest.raises(UsageError, match="no ArrayRecord shards at 'gs://ckpts/nothing'"):
        make_iterator("gs://ckpts/nothing", 16, 256, seed=3)


def test_tensorboard_scalars_upload_to_gcs(gcs_env, tmp_path):
    """A gs:// --tensorboard-dir: written locally, uploaded off the training thread, whole on
    close; the object reads back as the same scalars."""
    from test_tensorboard import read_scalars

    from elastix_trainer.obs.tboard import TensorBoardSink
    from elastix_trainer.storage import epath

    events = EventLog(None)
    board = TensorBoardSink("gs://ckpts/tb", upload_every=0.1).attach(events)
    for step in (1, 2, 3):
        events.emit("step", step=step, seconds=0.1, loss=4.0 - step, live_slices=2,
                    tflops_per_device=0.5, global_batch=8)
    board.close()
    (obj,) = [p for p in epath("gs://ckpts/tb").iterdir()]
    (tmp_path / obj.name).write_bytes(obj.read_bytes())
    assert read_scalars(tmp_path)["learning/loss"] == {1: 3.0, 2: 2.0, 3: 1.0}
