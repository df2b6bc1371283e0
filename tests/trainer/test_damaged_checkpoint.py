"""A damaged newest checkpoint is skipped for the next older readable one; none readable is one
clear error. Damage is real: files of a real Orbax checkpoint truncated or removed on disk."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from trainer_helpers import REPO, cli_env, losses, make_cfg, make_trainer, run_elastic

from elastix_trainer.obs.events import EventLog
from elastix_trainer.state.checkpoint import Checkpointer


def _copy(reference, tmp_path):
    ck = tmp_path / "ck"
    shutil.copytree(reference["ckpt"], ck)
    return ck


def _truncate_largest(step_dir):
    files = [os.path.join(d, f) for d, _, fs in os.walk(step_dir / "state") for f in fs]
    largest = max(files, key=os.path.getsize)
    with open(largest, "r+b") as f:
        f.truncate(os.path.getsize(largest) // 2)


def _resume(ck):
    cfg = make_cfg(checkpoint_dir=str(ck))
    return run_elastic(cfg)


def test_truncated_newest_step_falls_back_to_the_older_one(reference, tmp_path):
    ck = _copy(reference, tmp_path)
    _truncate_largest(ck / "8")
    outcome, trainer, _ = _resume(ck)
    assert outcome.status == "completed", outcome
    (damaged,) = trainer.events.of("checkpoint_damaged")
    assert damaged["step"] == 8 and damaged["error"]
    # The checksum manifest catches it before Orbax reads: the file and its sizes, one line.
    assert "were written" in damaged["error"] and "\n" not in damaged["error"]


def test_truncated_step_without_a_manifest_says_orbaxs_reason_in_one_line(reference, tmp_path):
    """An older checkpoint (no checksum manifest) is caught by Orbax's own read: the line says
    its reason, not the repr of the pybind11 method it points at."""
    ck = _copy(reference, tmp_path)
    (ck / "8" / "elastix-manifest.json").unlink()
    _truncate_largest(ck / "8")
    outcome, trainer, _ = _resume(ck)
    assert outcome.status == "completed", outcome
    (damaged,) = trainer.events.of("checkpoint_damaged")
    assert damaged["step"] == 8
    assert "bound method" not in damaged["error"] and "TensorStore(" not in damaged["error"]
    assert "OUT_OF_RANGE" in damaged["error"]
    assert trainer.events.of("restore")[0]["step"] == 4
    got = losses(trainer.events)
    assert {s: got[s] for s in range(5, 9)} == {s: reference["losses"][s] for s in range(5, 9)}
    # Step 8 saved anew; the damaged files kept beside it, never deleted.
    assert Checkpointer(str(ck), 4, EventLog(None)).committed_steps() == [4, 8]
    assert [n for n in os.listdir(ck) if n.startswith("8.damaged-")]


def test_missing_metadata_is_found_before_training(reference, tmp_path):
    ck = _copy(reference, tmp_path)
    os.remove(ck / "8" / "state" / "_METADATA")
    cfg = make_cfg(checkpoint_dir=str(ck))

    trainer = make_trainer(cfg, EventLog(None))
    trainer.check_resume()  # used to fail with Orbax's raw text and a "re-run" hint
    assert list(trainer.ckpt.damaged) == [8]
    assert trainer.restore_candidate() == ("checkpoint", 4)


def test_nothing_readable_is_one_clear_error(reference, tmp_path):
    ck = _copy(reference, tmp_path)
    for step in ("4", "8"):
        _truncate_largest(ck / step)
        os.remove(ck / step / "state" / "_METADATA")
    args = ["--preset", "tiny", "--steps", "8", "--batch-per-device", "1", "--seq-len", "32",
            "--num-slices", "4", "--checkpoint-dir", str(ck)]
    proc = subprocess.run([sys.executable, "-m", "elastix_trainer", *args], env=cli_env(),
                          cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 1
    err = [ln for ln in proc.stderr.splitlines() if ln.startswith(("error:", "hint:"))]
    assert err[0].startswith(f"error: no committed checkpoint in {ck} can be read (steps 8, 4; ")
    assert err[1] == ("hint: restore the files from a copy, or move the directory aside to "
                      "start over")
    assert "Traceback" not in proc.stderr
    # Nothing was deleted or overwritten.
    assert sorted(n for n in os.listdir(ck) if n.isdigit()) == ["4", "8"]
