"""Health sources, continuous checkpointing and the CLI's exit codes on failure."""

from __future__ import annotations

import json
import shutil
import socket
import sys

import pytest
from trainer_helpers import losses, make_cfg, run_cli, run_elastic

from elastix.protocol.heartbeat import new_key
from elastix_trainer.elastic.health import (
    HealthSource,
    ManualHealth,
    PathwaysHealth,
    SliceWaitTimeout,
    StaticHealth,
)
from elastix_trainer.mesh import slice_devices
from elastix_trainer.program import health_from_env


def test_health_from_env_defaults_to_static_and_never_imports_local(monkeypatch):
    monkeypatch.delenv("ELASTIX_LOCAL_HEALTH", raising=False)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    sys.modules.pop("elastix_trainer.elastic.local.health", None)
    h = health_from_env(4)
    assert isinstance(h, StaticHealth) and isinstance(h, HealthSource)
    assert h.live_slices() == frozenset(range(4))
    assert "elastix_trainer.elastic.local.health" not in sys.modules
    with pytest.raises(SliceWaitTimeout):
        h.wait_for(5, 1)


def test_pathways_health_probe_on_cpu_slices():
    """pathwaysutils' own probe (a pmap per slice) over our CPU slice mapping."""
    h = PathwaysHealth(slice_devices(4), poll=3600)
    try:
        assert isinstance(h, HealthSource)
        assert h.live_slices() == frozenset(range(4))
        assert h.probe() == frozenset(range(4))  # the classifier's fresh check
        assert h.wait_for(4, 30) == frozenset(range(4))
        with pytest.raises(SliceWaitTimeout):
            h.wait_for(5, 0.01)
    finally:
        h.close()


def test_manual_health_wait_times_out_and_wakes():
    h = ManualHealth(3)
    h.set_down(1)
    with pytest.raises(SliceWaitTimeout, match="2 of 3"):
        h.wait_for(3, 0.01)
    h.on_wait = lambda health, required: health.set_up(1)
    assert h.wait_for(3, 5) == frozenset(range(3)) and h.waits == [3, 3]


def test_continuous_checkpointing_matches_reference(reference, tmp_path):
    cfg = make_cfg(checkpoint_dir=str(tmp_path / "ck"), continuous_checkpointing=True)
    outcome, trainer, _ = run_elastic(cfg)
    assert outcome.status == "completed"
    steps = [r["step"] for r in trainer.events.of("checkpoint_committed")]
    assert len(steps) >= 2 and steps == sorted(steps) and steps[-1] == 8
    assert losses(trainer.events) == reference["losses"]


def test_cli_runtime_failure_exits_1_with_a_clear_line(tmp_path):
    """Nothing sends heartbeats to the local health address: the start-up wait times out."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    events = tmp_path / "events.jsonl"
    proc = run_cli(["--preset", "tiny", "--steps", "3", "--num-slices", "4", "--seq-len", "16",
                    "--slice-wait-timeout", "0.3", "--checkpoint-dir", str(tmp_path / "ck")],
                   ELASTIX_LOCAL_HEALTH=f"udp:127.0.0.1:{port}", ELASTIX_HEARTBEAT_KEY=new_key(),
                   ELASTIX_EVENTS_FILE=str(events))
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr.strip().splitlines()
    assert err[0].startswith("error: not enough slices to start: only 0 of 4"), err
    assert "Traceback" not in proc.stderr
    last = json.loads(events.read_text().splitlines()[-1])
    assert last["event"] == "run_end" and last["status"] == "failed"
    # Every log line starts with the UTC time to the millisecond.
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert lines and all(len(ln) > 24 and ln[23] == "Z" and ln[10] == "T" for ln in lines)


def test_cli_checkpoint_dir_that_is_a_file(tmp_path):
    (tmp_path / "file").write_text("in the way")
    proc = run_cli(["--num-slices", "4", "--checkpoint-dir", str(tmp_path / "file")], timeout=120)
    assert proc.returncode == 2 and "is a file, not a directory" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_min_slices_above_slice_count_is_usage_error():
    proc = run_cli(["--num-slices", "4", "--elastic-mode", "replica-resize", "--min-slices", "5"],
                   timeout=120)
    assert proc.returncode == 2 and "exceeds the 4 slices" in proc.stderr


def test_cli_resume_with_another_model_is_usage_error(reference, tmp_path):
    """A checkpoint of another model was restored, failed deep in Orbax, was retried as a user
    error and ended with 'checkpoints are intact; re-run with the same --checkpoint-dir'."""
    ck = tmp_path / "ck"
    shutil.copytree(reference["ckpt"], ck)
    proc = run_cli(["--preset", "small", "--steps", "12", "--num-slices", "4", "--seq-len", "32",
                    "--checkpoint-dir", str(ck)], timeout=120)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip().splitlines()
    assert err[0].startswith(f"error: the checkpoint at step 8 in {ck} holds a different model"), err
    assert "--preset" in err[1] and "Traceback" not in proc.stderr
    assert "not a slice loss" not in proc.stdout  # not retried
    assert sorted(p.name for p in ck.iterdir() if p.name.isdigit()) == ["4", "8"]  # untouched
