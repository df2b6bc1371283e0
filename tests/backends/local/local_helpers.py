"""Helpers for the local backend's tests: run the CLI, wait on conditions, find our processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from polling import wait_until  # noqa: F401 (the local tests import it from here)

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "standin_controller.py"


def tiny_trainer(policy: str) -> str:
    """The head command of the end-to-end tests: the tiny model, fast steps, a checkpoint in the
    workload's directory every 4 steps; ``policy`` adds the elastic flags each test is about.

    The compilation cache is the test session's (``cli`` sets ``ELASTIX_TEST_JAX_CACHE``), not
    the workload's kept data: these workloads compile the same programs, which on a loaded
    2-core machine took most of a test's minute when each compiled them afresh."""
    return ("elastix-train --preset tiny --steps 100000 --batch-per-device 2 --seq-len 32 "
            "--checkpoint-dir $ELASTIX_WORKLOAD_DIR/ckpt --checkpoint-period 4 "
            f"--step-delay 0.05 --compilation-cache-dir \"$ELASTIX_TEST_JAX_CACHE\" {policy}")


def workload_events(backend, name: str) -> list[dict]:
    """The trainer's events so far (none yet is an empty list)."""
    return backend.read_events(name) or []


def workload_status(cli: Cli, name: str) -> dict:
    """``elastix workload status NAME -o json``, parsed (the command must succeed)."""
    return json.loads(cli("workload", "status", name, "-o", "json").stdout)


class Cli:
    """Runs ``python -m elastix`` with a per-test state dir and process tag."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def __call__(self, *args: str, check: bool = True, timeout: float = 120,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([sys.executable, "-m", "elastix", *args], capture_output=True,
                              text=True, env={**self.env, **(env or {})}, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"elastix {' '.join(args)} exited {proc.returncode}:\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc

    def popen(self, *args: str, out: Path) -> subprocess.Popen:
        with open(out, "w") as f:
            return subprocess.Popen([sys.executable, "-m", "elastix", *args], env=self.env,
                                    stdout=f, stderr=subprocess.STDOUT, text=True)
