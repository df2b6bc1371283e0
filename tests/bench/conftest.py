"""The benchmarks' smallest cases, run as a user runs a bench: ``python bench/<x>.py --smoke``.

A bench that stops working on today's tree goes unnoticed until someone needs its numbers (the
checkpoint-stall bench crashed for weeks after the trainer began to call ``retire()``). Here each
one runs as a real subprocess, in a temp dir of its own (``TMPDIR``, ``HOME`` and the working
directory), and the tests read the structure of its report, never a timing.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import tiers

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"

OUTER_BOUND = 1800.0
"""Seconds a bench may run before the test stops it. Each bench bounds its own waits (in seconds
of a quiet machine, ``bench/benchwait.py``) and fails at once when what it waits for is gone;
this bound only catches a hang that none of them sees."""


@dataclasses.dataclass
class BenchRun:
    """One finished run of a bench."""

    argv: list[str]
    out: str
    err: str
    seconds: float

    def lines(self, start: str) -> list[str]:
        """The report's lines starting with ``start``."""
        return [line for line in self.out.splitlines() if line.startswith(start)]


@pytest.fixture
@tiers.slow
def run_bench(tmp_path: Path) -> Callable[..., BenchRun]:
    """Run ``bench/<script> *args`` with the suite's Python and fail unless it exits 0.

    Everything it writes stays in ``tmp_path``: its working directory, ``TMPDIR`` for the temp
    dirs the benches make, ``HOME`` for what a tool keeps there (kubectl's cache, MaxText's).
    Its own process group is killed if it outlives ``OUTER_BOUND``.
    """

    def run(script: str, *args: str, env: dict[str, str] | None = None) -> BenchRun:
        tmp, home = tmp_path / "tmp", tmp_path / "home"
        tmp.mkdir(exist_ok=True)
        home.mkdir(exist_ok=True)
        argv = [sys.executable, str(BENCH / script), *args]
        full = dict(os.environ, TMPDIR=str(tmp), HOME=str(home), PYTHONUNBUFFERED="1",
                    **(env or {}))
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, cwd=tmp_path, env=full, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=OUTER_BOUND)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"{script} still ran after {OUTER_BOUND:.0f} s\n--- stdout ---\n"
                        f"{out[-3000:]}\n--- stderr ---\n{err[-3000:]}", pytrace=False)
        done = BenchRun(argv, out, err, time.monotonic() - t0)
        assert proc.returncode == 0, (
            f"{' '.join(argv[1:])} exited {proc.returncode}\n--- stdout ---\n{out[-3000:]}\n"
            f"--- stderr ---\n{err[-6000:]}")
        return done

    return run
