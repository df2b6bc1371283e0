"""The measurement driver against the real local backend: real processes, real SIGKILL.

The controller is tests/measure/event_controller.py (JAX-free, writes docs/events.md events and
log lines); the trainer's own live test is test_measure_live_trainer.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from elastix.backends.local.backend import LocalBackend
from elastix.measure.chaos import measure_kill
from elastix.measure.events import events_from_log, events_of, recoveries

CONTROLLER = Path(__file__).resolve().parent / "event_controller.py"


def _cli(env, *args, check=True, timeout=180):
    p = subprocess.run([sys.executable, "-m", "elastix", *args], env=env, capture_output=True,
                       text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"elastix {args} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def _create(env, name, extra=""):
    _cli(env, "workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "2",
         "--elastic-slices", "2", "--max-slice-restarts", "5",
         "--command", f"{sys.executable} {CONTROLLER} --step-delay 0.05 {extra}")


def _wait_steps(backend, name, n, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events, _ = events_of(backend.trainer_events(name))
        if sum(1 for e in events if e.name == "step") >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"{name}: fewer than {n} steps after {timeout} s")


def test_measure_one_kill_events_and_log_agree(live_env, tmp_path):
    backend = LocalBackend(live_env["ELASTIX_STATE_DIR"])
    _create(live_env, "meas")
    try:
        _wait_steps(backend, "meas", 8)
        m = measure_kill(backend, "meas", lambda: [backend.kill_worker("meas", seed=3)],
                         timeout=60, poll=0.1)
        r = m.recovery
        assert m.source == "events" and not m.timed_out and r is not None and r.complete
        phases = r.phases()
        assert [p[0] for p in phases] == ["detection", "cleanup", "waiting for slices",
                                          "restore", "first step"]
        assert all(a <= b for _, a, b in phases)  # ordered and contiguous from the kill
        assert phases[0][1] == r.kill and phases[-1][2] == r.first_step_at
        assert r.steps_lost == r.last_step - r.restored_step and r.restored_step % 5 == 0
        assert r.first_step == r.restored_step + 1
        assert m.jobset_restarts == 0 and m.head_restarts == 0 and m.pid_same and m.in_process
        # the head's log gives the same recovery, to the millisecond
        from elastix.backends.base import LogOptions

        lines = [e.text for e in backend.logs("meas", LogOptions()) if not e.notice]
        (from_log,) = recoveries(events_from_log(lines))[-1:]
        from_log.kill = r.kill
        assert from_log.to_json() | {"pid_after": None, "pid_before": None} == r.to_json() | {
            "pid_after": None, "pid_before": None}
        # the command: kill-worker --measure
        png = tmp_path / "rec.png"
        p = _cli(live_env, "chaos", "kill-worker", "meas", "--slice", "1", "--host", "0",
                 "--measure", "--timeout", "60s", "-o", "json", "--plot", str(png))
        measured = json.loads(p.stdout)
        assert f"elastix: wrote recovery timeline to {png}" in p.stderr  # said, on stderr
        (k,) = measured["kills"]  # the report chaos run gives
        soak = json.loads(_cli(live_env, "chaos", "run", "meas", "--kills", "1", "--timeout",
                               "60s", "-o", "json").stdout)
        assert set(soak) == set(measured) and set(soak["kills"][0]) == set(k)
        assert measured["ok"] and measured["violations"] == [] and measured["exit_code"] == 0
        assert k["in_process"] and k["recovery"]["index"] == 2 and k["kills"][0]["slice"] == 1
        assert k["recovery"]["steps_lost"] == k["recovery"]["last_step"] - k["recovery"][
            "restored_step"]
        assert png.read_bytes()[:4] == b"\x89PNG"
        p = _cli(live_env, "chaos", "kill-worker", "meas", "--measure", "--dry-run", check=False)
        assert p.returncode == 2 and "--dry-run" in p.stderr
    finally:
        _cli(live_env, "workload", "delete", "meas", "--wait", check=False)


def test_chaos_run_reports_and_fails_on_bound(live_env, tmp_path):
    backend = LocalBackend(live_env["ELASTIX_STATE_DIR"])
    # Measured from the head's log. One checkpoint only, at step 3 (no kill lands before a
    # committed save), so every kill loses steps and --max-steps-lost 0 is missed whatever the
    # timing (with one every 5 steps, a kill detected just after a commit lost none, and the
    # bound was met on a fast machine).
    _create(live_env, "soak", extra="--no-events --ckpt-every 100000 --ckpt-at 3")
    try:
        _wait_steps(backend, "soak", 8)
        png = tmp_path / "soak.png"
        p = _cli(live_env, "chaos", "run", "soak", "--kills", "2", "--interval", "0",
                 "--mode", "host", "--seed", "7", "--max-steps-lost", "0", "--timeout", "60s",
                 "-o", "json", "--plot", str(png), "--window", "2", check=False)
        assert p.returncode == 3, p.stderr  # Outcome.BOUND_MISSED
        assert f"elastix: wrote goodput chart to {png}" in p.stderr
        d = json.loads(p.stdout)
        assert d["stopped"] == "all 2 kills done" and d["exit_code"] == 3
        assert len(d["kills"]) == 2 and d["totals"]["recovered"] == 2
        assert all(k["source"] == "log" and k["in_process"] for k in d["kills"])
        lost = [k["recovery"]["steps_lost"] for k in d["kills"]]
        assert d["violations"] == [{"kill": i, "bound": "max_steps_lost", "limit": 0, "value": n}
                                   for i, n in enumerate(lost, 1) if n > 0]
        assert all(k["recovery"]["restored_step"] == 3 for k in d["kills"])
        assert "missed" in p.stderr and "Traceback" not in p.stderr
        assert 0 < d["totals"]["goodput"] < 1 and len(d["goodput"]["recoveries"]) == 2
        assert png.read_bytes()[:4] == b"\x89PNG"
        p = _cli(live_env, "workload", "goodput", "soak", "-o", "json")
        assert json.loads(p.stdout)["source"] == "log"
    finally:
        _cli(live_env, "workload", "delete", "soak", "--wait", check=False)


def test_chaos_run_slice_mode_kills_every_host_of_one_slice(live_env):
    """--mode slice on a 4-host slice type: all four hosts of one slice die together."""
    backend = LocalBackend(live_env["ELASTIX_STATE_DIR"])
    _cli(live_env, "workload", "create", "whole", "--tpu-type", "v5litepod-16", "--num-slices",
         "2", "--elastic-slices", "2", "--max-slice-restarts", "5",
         "--command", f"{sys.executable} {CONTROLLER} --step-delay 0.05")
    try:
        _wait_steps(backend, "whole", 8)
        before = {(s.index, p.host): p.pid for s in backend.status("whole").slices
                  for p in s.pods}
        p = _cli(live_env, "chaos", "run", "whole", "--kills", "1", "--interval", "0",
                 "--mode", "slice", "--seed", "1", "--timeout", "60s", "-o", "json")
        (kill,) = json.loads(p.stdout)["kills"]
        victims = kill["kills"]
        # The first kill may take the rest of the slice down before the driver gets to them
        # (one host's death restarts its whole slice): every host of it was replaced.
        (sl,) = {v["slice"] for v in victims}
        assert victims[0]["host"] == 0 and all(before[(sl, v["host"])] == v["pid"]
                                               for v in victims)
        after = {(s.index, p.host): p.pid for s in backend.status("whole").slices
                 for p in s.pods}
        assert all(after[(sl, h)] != before[(sl, h)] for h in range(4))
        assert all(after[(1 - sl, h)] == before[(1 - sl, h)] for h in range(4))
        assert kill["in_process"] and kill["pid_same"] and kill["jobset_restarts"] == 0
        r = kill["recovery"]
        assert r["steps_lost"] == r["last_step"] - r["restored_step"]
    finally:
        _cli(live_env, "workload", "delete", "whole", "--wait", check=False)


def test_a_kill_waits_until_training_steps(live_env):
    """Measuring right after create: the kill waits for the first completed step (a kill
    before training starts has no recovery to measure; the soak once waited 10 minutes for
    one), and the recovery after it is measured."""
    backend = LocalBackend(live_env["ELASTIX_STATE_DIR"])
    _cli(live_env, "workload", "create", "early", "--tpu-type", "v5litepod-8", "--num-slices",
         "2", "--elastic-slices", "2", "--max-slice-restarts", "5",
         "--command", f"sleep 2 && {sys.executable} {CONTROLLER} --step-delay 0.05")
    try:
        seen_at_kill = []

        def kill():
            events, _ = events_of(backend.trainer_events("early"))
            seen_at_kill.append(sum(e.name == "step" for e in events))
            return [backend.kill_worker("early", seed=1)]

        m = measure_kill(backend, "early", kill, timeout=60, poll=0.1)
        # not before a step that follows the first committed checkpoint (step 5)
        assert seen_at_kill[0] >= 6
        assert m.recovery is not None and m.recovery.complete and m.in_process
        assert m.recovery.restore_source == "checkpoint" and m.recovery.restored_step >= 5
    finally:
        _cli(live_env, "workload", "delete", "early", "--wait", check=False)
