"""Fixtures for the command tests: a CLI runner that runs the real entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``python -m elastix ARGS`` as a subprocess (the real entry point)."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    full_env.pop("KUBECONFIG", None)
    return subprocess.run([sys.executable, "-m", "elastix", *args], capture_output=True,
                          text=True, cwd=cwd, env=full_env, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def home(tmp_path, monkeypatch):
    """The CLI's environment: state under tmp, no kubeconfig, nothing of this machine's."""
    env = {"HOME": str(tmp_path / "home"), "ELASTIX_STATE_DIR": str(tmp_path / "state"),
           "NO_COLOR": "1", "COLUMNS": "200"}
    for key in ("KUBECONFIG", "ELASTIX_BACKEND", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    return env
