"""Fixtures for the local backend: a state dir per test, and a guard that nothing is left running."""

from __future__ import annotations

import os
import uuid

import pytest
from local_helpers import Cli
from process_tags import local_env, reap

from elastix.backends.local.backend import LocalBackend


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
    left = reap(tag)
    assert not left, f"processes left running after the test: {left}"


@pytest.fixture(scope="session")
def jax_cache(tmp_path_factory):
    """One compilation cache for the session's workloads that ask for it (``tiny_trainer``)."""
    return tmp_path_factory.mktemp("jax-cache")


@pytest.fixture
def cli(state_dir, tag, tmp_path, jax_cache):
    return Cli({**os.environ, **local_env(tag, state_dir, tmp_path),
                "ELASTIX_TEST_JAX_CACHE": str(jax_cache)})


@pytest.fixture
def backend(state_dir):
    """The same backend the CLI uses, for reading state while waiting on conditions."""
    return LocalBackend(state_dir)
