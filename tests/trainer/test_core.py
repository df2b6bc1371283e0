"""Trainer core: learning, exact resume, restore onto fewer slices, committed-only restores."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import jax
import numpy as np
import pytest
from trainer_helpers import cli_env, losses, make_cfg, make_trainer, run_cli, run_elastic, wait_until

from elastix_trainer.obs.events import EventLog
from elastix_trainer.state.checkpoint import Checkpointer


def test_loss_goes_down(reference):
    ls = reference["losses"]
    assert sorted(ls) == list(range(1, 9))
    assert all(np.isfinite(v) for v in ls.values())
    assert np.mean([ls[7], ls[8]]) < ls[1] - 0.5, ls


def test_reference_logged_every_step_and_checkpoints(reference):
    ev = reference["events"]
    assert [r["step"] for r in ev.of("checkpoint_committed")] == [4, 8]
    assert all(r["live_slices"] == 4 and r["global_batch"] == 8 for r in ev.of("step"))
    assert Checkpointer(reference["ckpt"], 4, EventLog(None)).committed_steps() == [4, 8]


def test_stop_and_resume_matches_uninterrupted(reference, tmp_path):
    ckpt = tmp_path / "ckpt"
    cfg = make_cfg(checkpoint_dir=str(ckpt))
    events = EventLog(None)
    first = make_trainer(cfg, events)
    session = first.start(range(4))
    assert first.train(session, until=4) == "completed"  # stop after step 4 (saved)
    first.finish()
    del first, session

    second = make_trainer(cfg, EventLog(None))  # a new trainer: nothing shared but the directory
    session = second.start(range(4))
    assert session.restored["source"] == "checkpoint" and session.restored["step"] == 4
    assert second.train(session) == "completed"
    second.finish()
    resumed = losses(second.events)
    assert sorted(resumed) == [5, 6, 7, 8]
    for step, value in resumed.items():
        assert value == reference["losses"][step], (step, value, reference["losses"][step])
    assert second.events.of("restore")[0]["bytes"] > 0


def test_restore_onto_fewer_slices(reference, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(reference["ckpt"], ckpt, ignore=shutil.ignore_patterns("8"))
    cfg = make_cfg(checkpoint_dir=str(ckpt))
    four = make_trainer(cfg, EventLog(None)).start(range(4))
    three_tr = make_trainer(cfg, EventLog(None))
    three = three_tr.start([0, 1, 3])
    assert three.restored["step"] == 4 and three.mesh.devices.shape == (3, 2)
    for a, b in zip(jax.tree.leaves(four.state), jax.tree.leaves(three.state), strict=True):
        assert len(b.sharding.device_set) in (1, 6)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert three_tr.train(three) == "completed"
    rows = three_tr.events.of("step")
    assert [r["global_batch"] for r in rows] == [6] * 4 and all(r["live_slices"] == 3 for r in rows)
    assert all(np.isfinite(r["loss"]) for r in rows)
    three_tr.finish()


def _run_and_kill_mid_save(ckpt, events_file):
    """Start the CLI saving every step; SIGKILL it as soon as a step's tmp dir appears."""
    args = ["--preset", "tiny", "--steps", "8", "--batch-per-device", "1", "--seq-len", "32",
            "--lr", "1e-2", "--warmup-steps", "2", "--num-slices", "4", "--checkpoint-period", "1",
            "--max-to-keep", "10", "--checkpoint-dir", str(ckpt), "--events-file", str(events_file)]
    proc = subprocess.Popen([sys.executable, "-m", "elastix_trainer", *args], env=cli_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def tmp_after_a_commit():
            names = os.listdir(ckpt) if ckpt.exists() else []
            return (any(n.isdigit() for n in names)
                    and [n for n in names if "orbax-checkpoint-tmp" in n])
        tmp = wait_until(tmp_after_a_commit, 300, "a checkpoint being written")  # bound, not a wait
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        return tmp
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_killed_mid_save_never_restores_uncommitted(reference, tmp_path):
    for attempt in range(3):  # the kill can land just after a rename: then nothing to prove
        ckpt = tmp_path / f"ckpt{attempt}"
        _run_and_kill_mid_save(ckpt, tmp_path / f"events{attempt}.jsonl")
        left = [n for n in os.listdir(ckpt) if "orbax-checkpoint-tmp" in n]
        if left:
            break
    assert left, "never caught a save in flight"
    tmp_step = int(left[0].split(".")[0])
    ck = Checkpointer(str(ckpt), 1, EventLog(None))
    committed = ck.committed_steps()
    assert tmp_step not in committed and max(committed) < tmp_step

    cfg = make_cfg(checkpoint_dir=str(ckpt), checkpoint_period=0)
    outcome, trainer, _ = run_elastic(cfg)
    assert outcome.status == "completed"
    restore = trainer.events.of("restore")[0]
    assert restore["step"] == max(committed) and restore["source"] == "checkpoint"
    assert not [n for n in os.listdir(ckpt) if "orbax-checkpoint-tmp" in n]  # cleaned up
    # The killed process and the resumed one together match the uninterrupted run.
    killed = {}
    with open(tmp_path / f"events{attempt}.jsonl") as f:
        for line in f:
            rec = json.loads(line)
            if rec["event"] == "step":
                killed[rec["step"]] = rec["loss"]
    combined = {**killed, **losses(trainer.events)}
    for step in range(1, 9):
        assert combined[step] == reference["losses"][step], step


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--steps", "0"], "steps: must be at least 1"),
        (["--preset", "tinyy"], "did you mean tiny?"),
        (["--elastic-mode", "resize"], "unknown mode"),
        (["--lr", "abc"], "'abc' is not a valid float"),
        (["--min-slices", "2"], "only applies to --elastic-mode replica-resize"),
    ],
)
def test_bad_config_is_one_clear_error(args, fragment):
    import contextlib
    import io

    from elastix_trainer.__main__ import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(args)
    assert code == 2
    assert fragment in err.getvalue() and "Traceback" not in err.getvalue()


def test_config_file_and_flags(tmp_path):
    from elastix_trainer.config import ConfigError, parse_args

    (tmp_path / "c.yaml").write_text("preset: tiny\nsteps: 7\nbatch-per-device: 3\n")
    cfg = parse_args(["--config", str(tmp_path / "c.yaml"), "--steps", "9"])
    assert (cfg.steps, cfg.batch_per_device) == (9, 3)
    (tmp_path / "bad.json").write_text(json.dumps({"stepz": 3, "seq_len": -1}))
    with pytest.raises(ConfigError) as e:
        parse_args(["--config", str(tmp_path / "bad.json")])
    assert [p[0] for p in e.value.problems] == ["stepz"]
    assert "did you mean steps?" in e.value.problems[0][2]


def test_the_workloads_slice_loss_budget_is_the_default(tmp_path, monkeypatch):
    """Under elastix workload create the head's env carries the JobSet's budget (restarts x
    slices): the trainer's default, so the two run out together; a flag or a config file
    still wins."""
    from elastix_trainer.config import parse_args

    assert parse_args([]).max_slice_losses == 10
    monkeypatch.setenv("ELASTIX_MAX_SLICE_LOSSES", "20")
    assert parse_args([]).max_slice_losses == 20
    assert parse_args(["--max-slice-losses", "3"]).max_slice_losses == 3
    (tmp_path / "c.yaml").write_text("max-slice-losses: 4\n")
    assert parse_args(["--config", str(tmp_path / "c.yaml")]).max_slice_losses == 4


def test_config_file_not_utf8(tmp_path):
    from elastix_trainer.config import ConfigError, parse_args

    (tmp_path / "c.yaml").write_bytes(b"\xffsteps: 3\n")  # was UnicodeDecodeError, exit 1
    with pytest.raises(ConfigError) as e:
        parse_args(["--config", str(tmp_path / "c.yaml")])
    assert e.value.problems[0][:2] == ("config", f"cannot parse {tmp_path / 'c.yaml'}: not UTF-8 "
                                                 "text (byte 0)")


def test_cli_bad_value_exit_code_and_no_traceback():
    proc = run_cli(["--batch-per-device", "-1", "--elastic-mode", "nope"], timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: 2 problems") and "Traceback" not in proc.stderr
