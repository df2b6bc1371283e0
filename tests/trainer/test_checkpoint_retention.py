"""What ``--max-to-keep`` may delete, and what a new process may restore.

Retention counts intact committed steps only: a damaged step (kept for inspection until its
step is saved again, as ``docs/events.md`` promises) and a void one are neither counted nor
deleted, so they never push out the intact step a restore falls back to. A void step (one
completed after a slice was gone, already reported committed) is marked so on storage, so a
restarted head - a new process reading the directory - never restores it either.

Real Orbax checkpoints on a real filesystem (and on fake-gcs-server), real trainer processes.
"""

from __future__ import annotations

import json
import os
import shutil

import jax.numpy as jnp
import pytest
from test_garbled_checkpoint import _garble, _largest
from test_loss_race import DatedHealth, _kill_right_after, _run, checkpoint_dir
from trainer_helpers import make_cfg, run_cli, run_elastic

from elastix_trainer.obs.events import EventLog
from elastix_trainer.state import manifest
from elastix_trainer.state.checkpoint import Checkpointer
from elastix_trainer.state.store import VOID_MARKER

STATE = {"w": jnp.arange(1024.0)}


def _save(ck: Checkpointer, step: int) -> None:
    ck.save(step, STATE, {"next_index": step})
    assert ck.settle() is True, ck.last_error()


@pytest.fixture
def ck(reference, tmp_path):
    ck = tmp_path / "ck"
    shutil.copytree(reference["ckpt"], ck)  # committed steps 4 and 8
    return ck


def test_retention_keeps_the_damaged_step_and_the_newest_intact_one(ck):
    """Steps 4 and 8, 8 garbled; a run to step 6 with --max-to-keep 1 restores 4 and commits 6.
    Orbax's own retention counted the damaged 8 and deleted it with 4."""
    _garble(_largest(ck / "8"))
    outcome, trainer, _ = run_elastic(make_cfg(checkpoint_dir=str(ck), steps=6, max_to_keep=1))
    assert outcome.status == "completed", outcome
    assert [r["step"] for r in trainer.events.of("checkpoint_damaged")] == [8]
    assert trainer.events.of("restore")[0]["step"] == 4
    assert 6 in [r["step"] for r in trainer.events.of("checkpoint_committed")]
    steps = Checkpointer(str(ck), 4, EventLog(None)).committed_steps()
    assert steps == [6, 8]  # 4 retired behind the intact 6; the damaged 8 kept as it was
    assert manifest.verify(str(ck / "6")) is True
    with pytest.raises(manifest.ChecksumMismatch):
        manifest.verify(str(ck / "8"))


@pytest.mark.parametrize("where", ["disk", "gcs"])
def test_a_void_step_is_never_restored_by_a_new_checkpointer(where, tmp_path, request,
                                                             monkeypatch):
    directory = checkpoint_dir(where, "void", tmp_path, request, monkeypatch)
    ck = Checkpointer(directory, 4, EventLog(None))
    _save(ck, 4)
    _save(ck, 8)  # reported committed, then found to hold a step completed after a loss
    assert ck.void_newer(4, since=0.0) == [8]
    assert ck.latest_committed() == 4
    ck.close()
    fresh = Checkpointer(directory, 4, EventLog(None))  # a restarted head's view
    assert fresh.committed_steps() == [4, 8]  # kept on storage
    assert fresh.latest_committed() == 4
    _save(fresh, 8)  # saved again: the void directory is moved aside, never deleted
    assert fresh.latest_committed() == 8 and fresh.committed_steps() == [4, 8]
    fresh.close()
    if where == "disk":
        assert [n for n in os.listdir(directory) if n.startswith("8.void-")]


def test_retention_never_counts_or_deletes_a_void_step(tmp_path):
    directory = str(tmp_path / "ck")
    ck = Checkpointer(directory, 4, EventLog(None), max_to_keep=1)
    _save(ck, 4)
    _save(ck, 8)
    ck.retire()  # as the next save or the run's end does
    assert ck.committed_steps() == [8]  # retention itself still works
    assert ck.void_newer(4, since=0.0) == [8]
    _save(ck, 6)  # the run went back to 4 and saved 6: 8 is void, 6 the newest intact step
    ck.retire()
    assert ck.committed_steps() == [6, 8] and ck.latest_committed() == 6
    ck.close()
    assert Checkpointer(directory, 4, EventLog(None)).latest_committed() == 6


def test_a_restarted_trainer_does_not_restore_a_void_step(tmp_path):
    """A hung host's loss is dated after step 3 but found at step 5: checkpoint 4, already
    reported committed, is void, and the run ends there (its slice-loss budget is 0). A new
    trainer process on the same directory - a restarted head - restores 2, not the void 4,
    and moves 4 aside when it saves 4 again."""
    ck = tmp_path / "ck"
    health = DatedHealth(4)
    cfg = make_cfg(checkpoint_dir=str(ck), checkpoint_period=2, async_checkpoint=False,
                   max_slice_losses=0)
    outcome, trainer, _ = _run(cfg, health, *_kill_right_after(health, 3, exact=False, down_at=5))
    assert outcome.status == "failed", outcome
    assert [r["step"] for r in trainer.events.of("checkpoint_committed")] == [2, 4]
    assert (ck / "4" / VOID_MARKER).exists()
    args = ["--preset", "tiny", "--steps", "6", "--batch-per-device", "1", "--seq-len", "32",
            "--num-slices", "4", "--checkpoint-period", "2", "--checkpoint-dir", str(ck),
            "--events-file", str(tmp_path / "restarted.jsonl")]
    proc = run_cli(args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = [json.loads(ln) for ln in (tmp_path / "restarted.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "restore"] == [2]
    assert [n for n in os.listdir(ck) if n.startswith("4.void-")]
    assert not (ck / "4" / VOID_MARKER).exists()
