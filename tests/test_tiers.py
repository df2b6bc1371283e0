"""The suite's tiers (tests/fakes/tiers.py, applied by tests/conftest.py): each test lands in
one by what it uses, the fast tier collects without JAX, and its guard catches a test that
starts something anyway."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tiers

ROOT = Path(__file__).resolve().parents[1]
TIERS = ("fast", "process", "slow")


def _module(tmp_path: Path, name: str, code: str) -> str:
    p = tmp_path / f"{name}.py"
    p.write_text(textwrap.dedent(code))
    return str(p)


def test_a_test_that_names_a_starter_through_its_helpers_starts(tmp_path):
    _module(tmp_path, "helpers_a", """
        import subprocess
        from polling import wait_until

        def run_host():
            return subprocess.Popen(["true"])

        def pure(x):
            return x + 1
    """)
    _module(tmp_path, "polling", "def wait_until(f):\n    return f()\n")
    path = _module(tmp_path, "test_x", """
        from helpers_a import pure, run_host, wait_until

        def _start():
            return run_host()

        def test_starts():
            _start()

        def test_pure():
            assert pure(1) == 2 and wait_until(lambda: True)

        def test_only_annotates(p: "subprocess.Popen" = None):
            procs: list[subprocess.Popen] = []
            assert procs == []
    """)
    dirs = (str(tmp_path),)
    assert tiers.code_starts(path, "test_starts", dirs)
    # wait_until is re-exported by a module that also starts hosts: using it starts nothing.
    assert not tiers.code_starts(path, "test_pure", dirs)
    assert not tiers.code_starts(path, "test_only_annotates", dirs)


def test_jax_is_found_through_elastix_packages_at_import_only(tmp_path):
    dirs = (str(tmp_path),)
    health = _module(tmp_path, "test_h", "from elastix_trainer.elastic.local.health import "
                                         "LocalHeartbeatHealth\n")
    trains = _module(tmp_path, "test_t", "from elastix_trainer.train import Trainer\n")
    direct = _module(tmp_path, "test_j", "def test_x():\n    import jax.numpy\n")
    assert not tiers.imports_jax(health, dirs)  # the heartbeat client imports no JAX
    assert tiers.imports_jax(trains, dirs)
    assert tiers.imports_jax(direct, dirs)  # a test's own import counts


def test_the_guard_refuses_processes_and_servers_and_lets_go():
    with tiers.Guard():
        with pytest.raises(tiers.TierError, match="starts a process"):
            subprocess.run([sys.executable, "-c", "pass"])
        with pytest.raises(tiers.TierError, match="starts a process"):
            os.posix_spawn(sys.executable, [sys.executable, "-c", "pass"], dict(os.environ))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            with pytest.raises(tiers.TierError, match="listens"):
                s.listen()
    assert subprocess.run([sys.executable, "-c", "pass"]).returncode == 0


_TIER_PLUGIN = """
import os

def pytest_collection_finish(session):
    with open(os.environ["TIERS_OUT"], "w") as f:
        for item in session.items:
            marks = sorted({m.name for m in item.iter_markers()} & {"fast", "process", "slow"})
            f.write(item.nodeid + "\\t" + ",".join(marks) + "\\n")
"""


def _collect(*args: str, importtime: bool = False, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ELASTIX_TEST_WORKERS": "0", **(env or {})}
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "pytest",
           "--co", "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _ids(r: subprocess.CompletedProcess[str]) -> set[str]:
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return {ln for ln in r.stdout.splitlines() if "::" in ln}


@pytest.fixture(scope="module")
def fast_collection() -> subprocess.CompletedProcess[str]:
    """``--tier fast`` collected once, with ``-X importtime``: what it imported, and its ids."""
    return _collect("--tier", "fast", importtime=True)


def test_the_fast_tier_collects_without_importing_jax(fast_collection):
    r = fast_collection
    ids = _ids(r)
    assert len(ids) >= 900
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in r.stderr.splitlines()
                if ln.startswith("import time:")}
    assert not {m for m in imported if m.split(".")[0] in ("jax", "jaxlib", "orbax")}
    # the reading above is of the real collection: pytest's and the launcher's imports are in it
    assert "_pytest.main" in imported and "elastix.backends.local.backend" in imported


def test_the_three_tiers_hold_every_test_once(fast_collection, tmp_path):
    """One collection of the whole suite, each test's tier markers read by a plugin: every test
    has exactly one, each tier has tests, and ``--tier fast`` (which skips modules that import
    JAX before collecting them) collects exactly the tests marked fast."""
    (tmp_path / "tier_report.py").write_text(_TIER_PLUGIN)
    out = tmp_path / "tiers.tsv"
    every = _ids(_collect("-p", "tier_report", env={
        "TIERS_OUT": str(out),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}))
    marked = dict(line.split("\t") for line in out.read_text().splitlines())
    assert set(marked) == every
    assert {nodeid for nodeid, tiers_ in marked.items() if tiers_ not in TIERS} == set()
    by_tier = {t: {n for n, m in marked.items() if m == t} for t in TIERS}
    assert all(by_tier.values())
    assert by_tier["fast"] == _ids(fast_collection)
