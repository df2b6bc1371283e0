"""What the trainer image would contain: its requirement set, installed and run outside Docker.

The fast test checks the set against the dev venv (where every trainer test runs). The slow one
(``ELASTIX_SLOW_TESTS=1``, run by CI explicitly) installs exactly the image's requirement set
into a fresh virtual environment in a temp dir, then the project with ``--no-deps`` as the
Dockerfile does, and runs the trainer entry point there. It installs from
``ELASTIX_WHEELHOUSE`` with ``--no-index`` when that is set (offline); otherwise from pip's
configured index, so without a wheelhouse it needs the package registry.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata

import pytest
from packaging.requirements import Requirement

from elastix.provision import image

SLOW = os.environ.get("ELASTIX_SLOW_TESTS") == "1"


def _plan():
    return image.plan_build(image.ImageRequest(tag="localhost:5000/t:v1", push=False))


def test_image_requirement_set_is_what_the_tests_run_on():
    reqs = _plan().files["requirements.txt"].decode().split()
    assert reqs, "empty requirement set"
    unsatisfied = []
    for line in _plan().files["requirements.txt"].decode().splitlines():
        req = Requirement(line)
        if req.marker and not req.marker.evaluate():
            continue
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            unsatisfied.append(f"{req} (not installed)")
            continue
        if not req.specifier.contains(version, prereleases=True):
            unsatisfied.append(f"{req} (dev venv has {version})")
    assert unsatisfied == []


@pytest.mark.skipif(not SLOW, reason="fresh-venv install of the JAX stack: set "
                    "ELASTIX_SLOW_TESTS=1 (and ELASTIX_WHEELHOUSE to stay offline)")
def test_fresh_venv_with_the_image_requirements_runs_the_trainer(tmp_path, slow_run):
    plan = _plan()
    ctx = tmp_path / "ctx"
    plan.write_context(ctx)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = str(venv / "bin" / "python")
    # A private pip cache in the temp dir keeps the user's home untouched.
    env = {**os.environ, "PIP_CACHE_DIR": str(tmp_path / "pip-cache")}
    env.pop("PYTHONPATH", None)
    source = []
    if os.environ.get("ELASTIX_WHEELHOUSE"):
        source = ["--no-index", "--find-links", os.environ["ELASTIX_WHEELHOUSE"]]
    # --no-compile: byte-compiling every installed module (the JAX stack's thousands) was half
    # the install's CPU; what the test imports is compiled when imported.
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-compile", *source, "-r",
                    str(ctx / "requirements.txt"), "-r", str(ctx / "extra-requirements.txt")],
                   check=True, env=env, timeout=1500)
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-compile", "--no-deps", str(ctx / "src")],
                   check=True, env=env, timeout=300)
    # The image's stack imports, on CPU, and the trainer entry point runs.
    check = ("import jax, jax.numpy as jnp, optax, orbax.checkpoint, grain, pathwaysutils;"
             "import elastix_trainer;"
             "print(jax.devices()[0].platform, float(jnp.ones(4).sum()))")
    res = subprocess.run([py, "-c", check], capture_output=True, text=True, env={
        **env, "JAX_PLATFORMS": "cpu"}, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["cpu", "4.0"]
    ckpt = tmp_path / "ckpt"
    res = subprocess.run([str(venv / "bin" / "elastix-train"), "--preset", "tiny", "--steps", "4",
                          "--checkpoint-dir", str(ckpt), "--checkpoint-period", "2"],
                         capture_output=True, text=True, env={**env, "JAX_PLATFORMS": "cpu"},
                         timeout=600, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout + res.stderr
    assert "completed step: 4," in out, out
    assert (ckpt / "4").is_dir()  # the final checkpoint committed (renamed from its tmp dir)
