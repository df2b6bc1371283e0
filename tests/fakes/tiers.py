"""The suite's tiers, decided by what a test uses (``tests/conftest.py`` applies them).

- ``fast``: starts no process, no server and no JAX trainer; its modules import no JAX.
- ``process``: starts processes (the CLI as a subprocess, trainers, slice hosts) or servers (the
  fake Kubernetes API, fake GCS), or builds a JAX trainer in the pytest process.
- ``slow``: minutes each: real MaxText, a fresh virtualenv's install, the CI workflow's runs,
  the benchmarks' smallest cases.

A fixture says what it starts where it is defined, so every test that uses it (directly or
through another fixture) lands in that tier::

    @pytest.fixture
    @tiers.process
    def fake_k8s(): ...

A test that starts something itself, with no fixture, is caught by the conftest's rules (the
modules it imports, the calls in its body) and, in the fast tier, by a guard that fails it the
moment it starts a process or listens on a socket: a test cannot be fast by mistake.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)

PROCESS_FIXTURES: set[str] = set()
SLOW_FIXTURES: set[str] = set()


def process(fn: F) -> F:
    """Mark a fixture function as one that starts a process or a server (or a JAX trainer)."""
    PROCESS_FIXTURES.add(fn.__name__)
    return fn


def slow(fn: F) -> F:
    """Mark a fixture function as one whose users belong in the slow tier."""
    SLOW_FIXTURES.add(fn.__name__)
    return fn
