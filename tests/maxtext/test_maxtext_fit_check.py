"""The fit check of a MaxText command (issue 73, item 3): MaxText's own ``train_compile.py`` run
in the MaxText environment for the workload's TPU type and each mesh MaxText's elastic training
can meet, read into the fit check's report; every reason it cannot run said in one line.

The compiles are the slow tier's and need the MaxText environment with libtpu
(``bash .ci/setup-maxtext``); without it they skip, and in CI they fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mtrun
import pytest
import tiers
from mtsuite import require_maxtext

from elastix.backends.gke import fitcheck, maxtext_fit
from elastix.workload.render import render
from elastix.workload.resolve import resolve_spec
from elastix.workload.trainer_command import TrainerCommand

MODULE = "python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml"
SMALL = (f"{MODULE} run_name=r base_output_directory=gs://bucket/mt model_name=qwen3-0.6b "
         "dataset_type=synthetic per_device_batch_size=1 max_target_length=256 "
         "enable_single_controller=true elastic_enabled=true elastic_max_retries=61 "
         "elastic_min_slice_count=1")
# train_compile.py's own line for qwen3-0.6b, batch 1, seq 2048 on v5e-16 (MaxText 0.2.5,
# libtpu 0.0.50.1, 2026-12-08)
STATS = ("Memory analysis: CompiledMemoryStats(generated_code_size_in_bytes=27474944, "
         "argument_size_in_bytes=447938560, output_size_in_bytes=447903744, "
         "alias_size_in_bytes=447897600, temp_size_in_bytes=1962110976, "
         "host_generated_code_size_in_bytes=0, host_argument_size_in_bytes=0, "
         "host_output_size_in_bytes=0, host_alias_size_in_bytes=0, host_temp_size_in_bytes=0)")


def _plan(command: str, **flags):
    spec = resolve_spec({"name": "w", "tpu_type": "v5litepod-16", "num_slices": 3,
                         "docker_image": "img:1", "command": command, **flags})
    return fitcheck.plan(spec, render(spec))


def test_maxtexts_argv_is_read_as_the_shell_reads_it():
    words = TrainerCommand(f"cd /app && {MODULE} \\\n  model_name=qwen3-4b a=1 && echo done",
                           {}).words()
    assert maxtext_fit.maxtext_argv(words) == (
        "maxtext.trainers.pre_train.train",
        ["src/maxtext/configs/base.yml", "model_name=qwen3-4b", "a=1"])
    assert maxtext_fit.maxtext_argv(["python", "train.py"]) is None


def test_the_memory_line_is_read_to_the_byte_and_judged_as_the_trainer_judges():
    stats = maxtext_fit.read_stats("Jitting...\n" + STATS + "\n")
    assert stats == {"arguments": 447938560, "outputs": 447903744, "aliased": 447897600,
                     "temporaries": 1962110976, "code": 27474944}
    # fit.peak_bytes: arguments + outputs - aliased + temporaries + code
    assert maxtext_fit.peak(stats) == 447938560 + 447903744 - 447897600 + 1962110976 + 27474944
    assert maxtext_fit.read_stats("no such line") is None


def test_the_meshes_are_maxtexts_elastic_ones():
    counts = maxtext_fit.slice_counts
    assert counts({"elastic_enabled": False, "elastic_min_slice_count": 1}, 3) == [3]
    assert counts({"elastic_enabled": True, "elastic_min_slice_count": -1}, 3) == [3]
    assert counts({"elastic_enabled": True, "elastic_min_slice_count": 2}, 3) == [3, 2]
    assert counts({"elastic_enabled": True, "elastic_min_slice_count": 1}, 3) == [3, 2, 1]
    assert counts({"elastic_enabled": True, "elastic_min_slice_count": 5}, 3) == [3]


@pytest.fixture
@tiers.process
def asks_python() -> None:
    """The plan asks the MaxText environment's Python for its versions (a process)."""


def test_without_a_maxtext_environment_the_check_is_skipped_saying_how_to_make_one(
        asks_python, monkeypatch, tmp_path):
    monkeypatch.setenv("ELASTIX_MAXTEXT_PYTHON", str(tmp_path / "none" / "python"))
    p = _plan(SMALL)
    assert isinstance(p, fitcheck.Skip) and "no MaxText environment here" in p.why
    assert "bash .ci/setup-maxtext" in p.hint
    monkeypatch.setenv("ELASTIX_MAXTEXT_PYTHON", sys.executable)  # a Python with no maxtext
    p = _plan(SMALL)
    assert isinstance(p, fitcheck.Skip) and "has no maxtext installed" in p.why


def test_a_maxtext_environment_without_libtpu_names_the_install(asks_python, monkeypatch,
                                                                tmp_path):
    # a real Python, without site-packages (so no libtpu), that finds maxtext's metadata
    site = tmp_path / "site"
    meta = site / "maxtext-0.2.5.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: maxtext\nVersion: 0.2.5\n")
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} -S \"$@\"\n")
    python.chmod(0o700)
    monkeypatch.setenv("ELASTIX_MAXTEXT_PYTHON", str(python))
    p = _plan(SMALL)
    assert isinstance(p, fitcheck.Skip) and "has no libtpu" in p.why
    assert f"{python} -m pip install 'jax[tpu]==" in p.hint


def test_other_maxtext_modules_are_said_not_compiled():
    p = _plan("python3 -m maxtext.trainers.post_train.sft.train_sft base.yml run_name=r")
    assert isinstance(p, fitcheck.Skip) and "not its pre-training trainer" in p.why
    assert "train_compile.py" in p.hint


@pytest.fixture
@tiers.slow
def maxtext_libtpu() -> None:
    """The MaxText environment with JAX's TPU compiler (.ci/maxtext-requirements.txt pins it)."""
    require_maxtext()
    code = "import importlib.util, sys; sys.exit(importlib.util.find_spec('libtpu') is None)"
    if subprocess.run([str(mtrun.maxtext_python()), "-c", code]).returncode != 0:
        why = f"{mtrun.maxtext_python()} has no libtpu: re-run bash .ci/setup-maxtext"
        if os.environ.get("CI") == "true":
            pytest.fail(why, pytrace=False)
        pytest.skip(why)


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """The CLI in a cache of its own; the timeout only guards against a hang."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "200",
           "ELASTIX_MAXTEXT_PYTHON": str(mtrun.maxtext_python())}
    return subprocess.run([sys.executable, "-m", "elastix", *args], env=env, text=True,
                          capture_output=True, timeout=3000, cwd=tmp_path)


def _fit(tmp_path: Path, command: str, *extra: str, tpu: str = "v5litepod-4",
         slices: int = 2) -> subprocess.CompletedProcess:
    return _cli(tmp_path, "workload", "fit-check", "--tpu-type", tpu, "--num-slices",
                str(slices), "--elastic-slices", str(slices), "--max-slice-restarts", "10",
                "--docker-image", "img:1", "--command", command, *extra)


def test_maxtexts_step_is_compiled_for_each_mesh_it_can_meet(maxtext_libtpu, tmp_path):
    out = _fit(tmp_path, SMALL, "-o", "json")
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    assert report["trainer"] == "maxtext" and report["model"] == "qwen3-0.6b"
    assert report["topology"] == "v5e-4" and report["elastic_compiled_off"]
    assert report["versions"]["maxtext"] and report["versions"]["libtpu"]
    assert [m["slices"] for m in report["meshes"]] == [2, 1]
    for m in report["meshes"]:
        assert m["fits"] and m["global_batch"] == m["chips"] == 4 * m["slices"]
        assert m["hbm"] == maxtext_fit.peak(m["memory"]) <= report["chip"]["limit"]
        assert m["remat_policy"] == "full" and m["flops_per_step"] > 0
    # the table, from the kept report: nothing compiled again
    again = _fit(tmp_path, SMALL)
    assert again.returncode == 0, again.stderr
    assert "fit check (MaxText train_compile.py): qwen3-0.6b on 2 x v5litepod-4" in again.stdout
    assert ", reused" in again.stdout and "compiling" not in again.stdout + again.stderr
    assert "2 slices (8 chips)" in again.stdout and "1 slice (4 chips)" in again.stdout
    assert "compiled with elastic_enabled=false" in again.stdout


def test_a_maxtext_run_that_cannot_fit_is_refused_in_one_line(maxtext_libtpu, tmp_path):
    command = (f"{MODULE} run_name=r base_output_directory=gs://bucket/mt model_name=qwen3-4b "
               "per_device_batch_size=8 max_target_length=2048")
    out = _cli(tmp_path, "workload", "create", "mt", "--tpu-type", "v5litepod-4",
               "--docker-image", "img:1", "--command", command, "--backend", "gke",
               "--dry-run")
    assert out.returncode == 2 and out.stdout == ""  # no manifest: nothing to create
    err = out.stderr.strip().splitlines()
    assert err[-2].startswith("error: qwen3-4b does not fit 1 slice of v5litepod-4: "), err
    assert "HBM" in err[-2] and err[-1].startswith("hint: lower per_device_batch_size")
    assert "Traceback" not in out.stderr
