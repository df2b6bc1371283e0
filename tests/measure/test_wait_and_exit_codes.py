"""`workload wait`, the exit codes CI reads, and the cleanup flags, on the real local backend
(real processes, real SIGKILL; the controller is tests/measure/event_controller.py)."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

from test_measure_live_driver import CONTROLLER, _cli

from elastix.backends.local.backend import LocalBackend
from elastix.errors import ExitCode
from elastix.measure.events import events_of

SLICES = ["--tpu-type", "v5litepod-8", "--num-slices", "2", "--elastic-slices", "2",
          "--max-slice-restarts", "5"]


def _create(env, name, command):
    _cli(env, "workload", "create", name, *SLICES, "--command", command)


def test_wait_for_each_condition_and_its_codes(live_env):
    backend = LocalBackend(live_env["ELASTIX_STATE_DIR"])
    # 2 s before the trainer starts; checkpoints every 5 steps; it completes once told to (a
    # fixed step count finished before a loaded machine had started the first wait)
    stop = Path(live_env["ELASTIX_STATE_DIR"]).parent / "stop-w"
    _create(live_env, "w", f"sleep 2 && {sys.executable} {CONTROLLER} --step-delay 0.05 "
                           f"--until-file {stop}")
    try:
        _cli(live_env, "workload", "wait", "w", "--for", "running", "--timeout", "60s")
        p = _cli(live_env, "workload", "wait", "w", "--for", "stepping", "--timeout", "60s")
        assert p.stderr.strip().endswith("w: stepping")
        events, _ = events_of(backend.trainer_events("w"))
        names = [e.name for e in events]
        first_save = names.index("checkpoint_committed")
        assert "step" in names[first_save + 1:]  # a step after the first committed save
        stop.touch()
        _cli(live_env, "workload", "wait", "w", "--for", "completed", "--timeout", "60s")
        # a completed workload never runs again: exit 5 at once, not at the timeout
        p = _cli(live_env, "workload", "wait", "w", "--for", "running", "--timeout", "10m",
                 check=False)
        assert p.returncode == ExitCode.COMPLETED == 5 and "completed before" in p.stderr
        # kill-worker on it gives the code chaos run gives (5), not a runtime error
        p = _cli(live_env, "chaos", "kill-worker", "w", check=False)
        assert p.returncode == 5 and "has completed: nothing to kill" in p.stderr, p.stderr
        p = _cli(live_env, "chaos", "run", "w", "--kills", "1", "-o", "json", check=False)
        assert p.returncode == 5 and json.loads(p.stdout)["completed_early"]
        p = _cli(live_env, "chaos", "kill-worker", "w", "--measure", "-o", "json", check=False)
        assert p.returncode == 5 and json.loads(p.stdout)["kills"] == []
    finally:
        _cli(live_env, "workload", "delete", "w", "--wait", check=False)
    _cli(live_env, "workload", "wait", "w", "--for", "deleted", "--timeout", "5s")
    p = _cli(live_env, "workload", "wait", "w", "--for", "running", check=False)
    assert p.returncode == 1 and "not found" in p.stderr


def test_wait_times_out_with_its_own_code(live_env):
    # never saves: stepping never holds
    _create(live_env, "slow", f"{sys.executable} {CONTROLLER} --step-delay 0.05 "
                              "--ckpt-every 1000000")
    try:
        p = _cli(live_env, "workload", "wait", "slow", "--for", "stepping", "--timeout", "3s",
                 check=False)
        assert p.returncode == ExitCode.TIMED_OUT == 6, p.stderr
        *phases, line, hint = p.stderr.strip().splitlines()  # what it waited for, then why
        assert phases and all(ph.startswith("waiting for slow to be stepping: ")
                              for ph in phases), phases
        assert line.startswith("error: timed out after 3 s waiting for workload slow to be "
                               "stepping (it is Running") and hint.startswith("hint: ")
        # a kill gated on stepping: nothing is killed, said so, exit 1
        pids = {p.pid for s in LocalBackend(live_env["ELASTIX_STATE_DIR"]).status("slow").slices
                for p in s.pods}
        p = _cli(live_env, "chaos", "run", "slow", "--kills", "1", "--timeout", "2s",
                 check=False)
        assert p.returncode == 1 and "nothing was killed" in p.stderr
        after = {p.pid for s in LocalBackend(live_env["ELASTIX_STATE_DIR"]).status("slow").slices
                 for p in s.pods}
        assert after == pids
    finally:
        _cli(live_env, "workload", "delete", "slow", "--wait", check=False)


def test_interval_counts_from_the_previous_kill(live_env):
    """The trainer starts 6 s late; kills 4 s apart. Counted from before the start-up wait (as
    it was), the second kill came right after the first recovery."""
    _create(live_env, "gap", f"sleep 6 && {sys.executable} {CONTROLLER} --step-delay 0.05")
    try:
        p = _cli(live_env, "chaos", "run", "gap", "--kills", "2", "--interval", "4s",
                 "--timeout", "60s", "-o", "json")
        first, second = (dt.datetime.fromisoformat(k["kills"][0]["time"].replace("Z", "+00:00"))
                         for k in json.loads(p.stdout)["kills"])
        assert (second - first).total_seconds() >= 4.0
    finally:
        _cli(live_env, "workload", "delete", "gap", "--wait", check=False)


def test_delete_ignore_not_found_and_kept_data_after_delete(live_env):
    state = LocalBackend(live_env["ELASTIX_STATE_DIR"]).root
    p = _cli(live_env, "workload", "delete", "none", check=False)
    assert p.returncode == 1 and "not found" in p.stderr
    p = _cli(live_env, "workload", "delete", "none", "--ignore-not-found")
    assert "not found, nothing to delete" in p.stderr
    # a job that keeps data: delete keeps it, then --delete-data on the deleted name removes it
    _create(live_env, "kept", 'mkdir -p "$ELASTIX_LOCAL_DATA_DIR/checkpoints" && '
                              f"{sys.executable} {CONTROLLER} --step-delay 0.05")
    _cli(live_env, "workload", "wait", "kept", "--for", "stepping", "--timeout", "60s")
    p = _cli(live_env, "workload", "delete", "kept", "--wait")
    assert "--delete-data removes it" in p.stderr and (state / ".data" / "kept").is_dir()
    p = _cli(live_env, "workload", "delete", "kept", "--delete-data")
    assert "removed its data" in p.stderr and not (state / ".data" / "kept").exists()
    p = _cli(live_env, "workload", "delete", "kept", "--delete-data", check=False)
    assert p.returncode == 1 and "not found" in p.stderr
