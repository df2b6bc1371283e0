"""Fixtures for live measurement tests: a local-backend state dir, and no stray processes."""

from __future__ import annotations

import os
import signal
import uuid

import pytest
from process_tags import TAG_ENV, tagged_pids


@pytest.fixture
def live_env(tmp_path, monkeypatch):
    """Environment for the CLI and this process: local backend in tmp, short health timeouts.

    Yields the env dict; afterwards every process carrying the test's tag must be gone.
    """
    tag = uuid.uuid4().hex
    state = tmp_path / "state"
    state.mkdir()
    env = {"NO_COLOR": "1", "COLUMNS": "200", TAG_ENV: tag, "ELASTIX_STATE_DIR": str(state),
           "ELASTIX_BACKEND": "local", "KUBECONFIG": str(tmp_path / "no-kubeconfig"),
           "ELASTIX_LOCAL_SCHEDULING_DELAY": "0.2", "ELASTIX_HEALTH_TIMEOUT": "1.0"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    yield {**os.environ, **env}
    left = tagged_pids(tag)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, f"processes left running after the test: {left}"
