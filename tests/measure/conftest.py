"""Fixtures for live measurement tests: a local-backend state dir, and no stray processes."""

from __future__ import annotations

import os
import uuid

import pytest
from process_tags import local_env, reap


@pytest.fixture
def live_env(tmp_path, monkeypatch):
    """Environment for the CLI and this process: local backend in tmp, short health timeouts.

    Yields the env dict; afterwards every process carrying the test's tag must be gone.
    """
    tag = uuid.uuid4().hex
    state = tmp_path / "state"
    state.mkdir()
    env = local_env(tag, state, tmp_path)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    yield {**os.environ, **env}
    left = reap(tag)
    assert not left, f"processes left running after the test: {left}"
