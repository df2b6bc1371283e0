"""The fit check from the launcher (``elastix workload fit-check``, and ``workload create`` on
GKE): the trainer's step compiled for the workload's TPU slices without a chip, through the real
CLI, a report per mesh, a refusal in one line, the report reused, and every skip said (issue
73). The seed's own run is the slow tier's (it compiles for 48 chips twice)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tiers

from elastix.backends.gke import fitcheck
from elastix.workload.render import render
from elastix.workload.resolve import resolve_spec

ROOT = Path(__file__).resolve().parents[2]
TINY = "elastix-train --preset tiny --batch-per-device 2 --seq-len 128"


@pytest.fixture
@tiers.process
def libtpu() -> None:
    """JAX's TPU compiler (``elastix[tpu]``, which .ci/setup installs); skips without it, fails
    in CI."""
    if importlib.util.find_spec("libtpu") is None:
        why = "libtpu is not installed: pip install 'elastix[tpu]' (.ci/setup installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(why + "; CI must compile for TPU")
        pytest.skip(why)


def _cli(tmp_path, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    """The CLI in a cache of its own. ``timeout`` only guards against a hang: a compile's
    time is the machine's (the seed's two meshes took 114 s on 2 quiet cores and 812 s with
    two busy loops a core beside the whole suite)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "elastix", *args], env=env, text=True,
                          capture_output=True, timeout=timeout, cwd=tmp_path)


def _fit(tmp_path, command: str, *extra: str, tpu: str = "v5litepod-4", slices: int = 2):
    return _cli(tmp_path, "workload", "fit-check", "--tpu-type", tpu, "--num-slices",
                str(slices), "--elastic-slices", str(slices), "--docker-image", "img:1",
                "--command", command, *extra)


def test_each_mesh_of_the_elastic_policy_is_reported(libtpu, tmp_path):
    out = _fit(tmp_path, TINY + " --elastic-mode replica-resize --min-slices 1")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "tiny" in text and "on 2 x v5litepod-4 (v5e:2x2, 4 chips a slice)" in text
    assert "2 slices (8 chips)" in text and "1 slice (4 chips)" in text
    assert "compiled without a chip in" in text and "predicted" in text
    assert "15.75 GiB" in text and "minimal_with_context" in text
    assert "fits: every mesh the run can train on holds its step" in text
    # the progress said, mesh by mesh
    assert "fit check: 2 slices (8 chips): compiled in" in text


def test_the_json_report_and_its_reuse(libtpu, tmp_path):
    out = _fit(tmp_path, TINY, "-o", "json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["tpu_type"] == "v5litepod-4" and len(report["meshes"]) == 1
    m = report["meshes"][0]
    assert m["fits"] and m["chips"] == 8 and m["hbm"] <= report["chip"]["limit"]
    kept = list((tmp_path / "cache" / "elastix" / "fit-check").glob("*.json"))
    assert len(kept) == 1 and oct(kept[0].stat().st_mode & 0o777) == "0o600"
    again = _fit(tmp_path, TINY)
    assert again.returncode == 0 and ", reused" in again.stdout
    assert "compiling" not in again.stderr + again.stdout
    changed = _fit(tmp_path, TINY.replace("--seq-len 128", "--seq-len 256"))
    assert changed.returncode == 0 and ", reused" not in changed.stdout


def test_a_run_that_cannot_fit_is_refused_in_one_line(libtpu, tmp_path):
    out = _fit(tmp_path, "elastix-train --preset qwen3-8b --seq-len 2048")
    assert out.returncode == 2
    err = out.stderr.strip().splitlines()
    assert err[-2].startswith("error: qwen3-8b does not fit 2 slices of v5litepod-4: ")
    assert err[-1].startswith("hint: a --tpu-type with more chips a slice")
    assert "Traceback" not in out.stderr


def test_create_dry_run_on_gke_checks_and_a_real_create_reuses(libtpu, tmp_path):
    create = ["workload", "create", "demo", "--tpu-type", "v5litepod-4", "--num-slices", "2",
              "--elastic-slices", "2", "--docker-image", "img:1", "--command", TINY,
              "--backend", "gke", "--dry-run"]
    out = _cli(tmp_path, *create)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("apiVersion: jobset.x-k8s.io/") and "fit check" not in out.stdout
    assert "fit check: compiling the step for 2 x v5litepod-4 without a chip" in out.stderr
    assert "2 slices (8 chips)" in out.stderr
    again = _cli(tmp_path, *create)
    assert ", reused" in again.stderr and again.stdout == out.stdout
    skipped = _cli(tmp_path, *create, "--no-fit-check")
    assert "note: fit check skipped (--no-fit-check)" in skipped.stderr
    assert "2 slices (8 chips)" not in skipped.stderr
    refused = _cli(tmp_path, *[w if w != TINY else "elastix-train --preset qwen3-8b"
                               for w in create])
    assert refused.returncode == 2 and refused.stdout == ""  # no manifest: nothing to create
    assert "does not fit" in refused.stderr


def test_a_bad_model_config_is_one_line_from_the_check(libtpu, tmp_path):
    (tmp_path / "moe.json").write_text(json.dumps({"model_type": "qwen3_moe"}))
    out = _fit(tmp_path, "elastix-train --model-config moe.json")
    assert out.returncode == 2
    assert "fit check: model_config: moe.json: model_type" in out.stderr
    assert "mixture of experts" in out.stderr and "Traceback" not in out.stderr


def _plan(command: str, **flags):
    spec = resolve_spec({"name": "w", "tpu_type": "v5litepod-16", "num_slices": 3,
                         "docker_image": "img:1", "command": command, **flags})
    return fitcheck.plan(spec, render(spec))


def test_the_plan_is_the_heads_trainer_flags_and_the_slices():
    p = _plan("cd /x && elastix-train --preset qwen3-4b --seq-len 2048 && echo done",
              env={"ELASTIX_NUM_SLICES": "3", "LIBTPU_INIT_ARGS": "--xla_x=1", "HOME": "/h"})
    assert isinstance(p, fitcheck.Plan)
    assert p.argv == ("--preset", "qwen3-4b", "--seq-len", "2048")
    assert (p.topology, p.slices, p.chips_per_host) == ("v5e:4x4", 3, "2x2x1")
    env = dict(p.env)
    assert env.get("LIBTPU_INIT_ARGS") == "--xla_x=1"
    assert "ELASTIX_NUM_SLICES" not in env and "HOME" not in env  # the topology says it
    module = _plan("python3 -m elastix_trainer --preset tiny")
    assert module.argv == ("--preset", "tiny")
    assert _plan("elastix-train --preset tiny").key() != _plan("elastix-train --preset small").key()


@pytest.mark.parametrize("command,why", [
    ("python train.py", "not elastix-train"),
    ("python3 -m MaxText.train MaxText/configs/base.yml run_name=r", "MaxText"),
    ("elastix-train prepare-data --input a --output b", "not a training run"),
])
def test_what_cannot_be_compiled_is_said(command, why):
    p = _plan(command)
    assert isinstance(p, fitcheck.Skip) and why in p.why


def test_without_libtpu_the_check_is_skipped_naming_the_extra(monkeypatch):
    monkeypatch.setattr(fitcheck, "installed", lambda module: module != "libtpu")
    p = _plan(TINY)
    assert isinstance(p, fitcheck.Skip) and "libtpu" in p.why
    assert "pip install 'elastix[tpu]'" in p.hint


@pytest.fixture
@tiers.slow
def seed_run(libtpu) -> None:
    """The seed's run compiles for 48 and 32 chips: a minute each on 2 cores."""


def test_the_seeds_run_is_checked_on_every_mesh(seed_run, tmp_path):
    """Qwen3-4B on 3 x v5litepod-16, MaxText's guide shape (batch 1, seq 2048), replica-resize
    down to 2 slices: both meshes fit, as workload create --dry-run shows it on GKE."""
    out = _cli(tmp_path, "workload", "create", "seed", "--tpu-type", "v5litepod-16",
               "--num-slices", "3", "--elastic-slices", "3", "--max-slice-restarts", "10",
               "--docker-image", "img:1", "--command",
               "elastix-train --preset qwen3-4b --batch-per-device 1 --seq-len 2048 "
               "--elastic-mode replica-resize --checkpoint-dir gs://bucket/run1 "
               "--snapshot-period 10", "--cluster", "c", "--project", "p", "--location",
               "us-central1-a", "--pathways-persistence", "--dry-run", timeout=3000)
    assert out.returncode == 0, out.stderr
    err = out.stderr
    assert "qwen3-4b (4.02 B parameters) on 3 x v5litepod-16 (v5e:4x4, 16 chips a slice)" in err
    assert "3 slices (48 chips)" in err and "2 slices (32 chips)" in err
    assert err.count("11.5") >= 2  # 11.57 of 15.75 GiB a chip on both meshes (libtpu 0.0.42.1)
    assert "host memory on the head: 2 copies" in err
    assert "nothing goes through the proxy" in err
