"""What ``--max-to-keep`` may delete, and what a new process may restore.

Retention counts intact committed steps only: a damaged step (kept for inspection until its
step is saved again, as ``docs/events.md`` promises) is neither counted nor deleted, so it
never pushes out the intact step a restore falls back to. A step an earlier elastix marked
void is moved aside by the next trainer on the directory, never restored.

Real Orbax checkpoints on a real filesystem (and on fake-gcs-server), real trainer processes.
"""

from __future__ import annotations

import json
import os
import shutil

import jax.numpy as jnp
import pytest
from test_garbled_checkpoint import _garble, _largest
from trainer_helpers import make_cfg, run_cli, run_elastic

from elastix_trainer.elastic.local import legacy
from elastix_trainer.obs.events import EventLog
from elastix_trainer.state import manifest
from elastix_trainer.state.checkpoint import Checkpointer

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


def test_retention_keeps_the_newest_intact_steps(tmp_path):
    """Every committed step holds a completed step (nothing committed is undone later), so
    ``--max-to-keep`` keeps the newest ones: a run that went back keeps what it saved last
    together with the newer steps of before, up to the count."""
    directory = str(tmp_path / "ck")
    ck = Checkpointer(directory, 4, EventLog(None), max_to_keep=2)
    for step in (4, 8, 12):
        _save(ck, step)
    ck.retire()  # as the next save or the run's end does
    assert ck.committed_steps() == [8, 12]
    _save(ck, 10)  # the run went back to 8 and saved 10
    ck.retire()
    assert ck.committed_steps() == [10, 12] and ck.latest_committed() == 12
    ck.close()


def test_a_step_an_earlier_elastix_marked_void_is_moved_aside_never_restored(ck, tmp_path):
    """Checkpoints 4 and 8, 8 marked ``elastix-void.txt`` as an earlier elastix marked the
    steps its stand-in devices completed after a slice was gone. A trainer process on the
    directory says so in one line, moves 8 aside (kept, no longer a step), restores 4 and goes
    on; nothing is deleted."""
    (ck / "8" / legacy.MARKER).write_text("this step completed after a slice was gone\n")
    args = ["--preset", "tiny", "--steps", "6", "--batch-per-device", "1", "--seq-len", "32",
            "--num-slices", "4", "--checkpoint-period", "2", "--checkpoint-dir", str(ck),
            "--events-file", str(tmp_path / "restarted.jsonl")]
    proc = run_cli(args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "checkpoint step 8 carries elastix-void.txt" in proc.stdout + proc.stderr
    events = [json.loads(ln) for ln in (tmp_path / "restarted.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "restore"] == [4]
    aside = [n for n in os.listdir(ck) if n.startswith("8.void-")]
    assert len(aside) == 1 and (ck / aside[0] / legacy.MARKER).exists()
    assert not (ck / "8").exists()
