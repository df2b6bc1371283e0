"""Fixtures for the local backend: a state dir per test, and a guard that nothing is left running."""

from __future__ import annotations

import os
import signal
import uuid

import pytest
from localtest_util import Cli
from process_tags import TAG_ENV, tagged_pids

from elastix.backends.local import LocalBackend


@pytest.fixture
def state_dir(tmp_path):
    d = tmp_path / "state"
    d.mkdir()
    return d


@pytest.fixture
def tag():
    return uuid.uuid4().hex


@pytest.fixture(autouse=True)
def no_strays(tag):
    """Fail the test if any process it started (tagged through the environment) survives it.

    Leftovers are SIGKILLed first, so one failing test cannot leak into the next.
    """
    yield
    left = tagged_pids(tag)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, f"processes left running after the test: {left}"


@pytest.fixture
def cli(state_dir, tag, tmp_path):
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", TAG_ENV: tag,
           "ELASTIX_STATE_DIR": str(state_dir), "ELASTIX_BACKEND": "local",
           "KUBECONFIG": str(tmp_path / "no-kubeconfig"),
           "ELASTIX_LOCAL_SCHEDULING_DELAY": "0.2", "ELASTIX_HEALTH_TIMEOUT": "1.0"}
    return Cli(env)


@pytest.fixture
def backend(state_dir):
    """The same backend the CLI uses, for reading state while waiting on conditions."""
    return LocalBackend(state_dir)
