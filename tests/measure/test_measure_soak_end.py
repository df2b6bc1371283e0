"""A soak that ends early still reports: its JSON, the goodput so far, why it stopped, the plot,
and an exit code that says how it ended (real local backend, real processes, real SIGKILL)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from test_measure_live_driver import CONTROLLER, _cli, _wait_steps

from elastix.backends.local.backend import LocalBackend
from elastix.errors import EXIT_CODES_HELP, ExitCode
from elastix.measure.events import events_of
from elastix.measure.goodput import goodput
from elastix.measure.report import ChaosReport, KillMeasurement, Violation


def test_soak_that_outlives_the_workload_reports_and_exits_5(live_env, tmp_path):
    backend = LocalBackend(live_env["ELASTIX_STATE_DIR"])
    # The workload completes once the first kill's recovery has taken its first step (told by a
    # file: a fixed step count finished before the first kill on a loaded machine), while the
    # soak waits 30 s for its second kill.
    stop = tmp_path / "stop"
    _cli(live_env, "workload", "create", "short", "--tpu-type", "v5litepod-8", "--num-slices",
         "2", "--elastic-slices", "2", "--max-slice-restarts", "5",
         "--command", f"{sys.executable} {CONTROLLER} --step-delay 0.05 --until-file {stop}")
    try:
        _wait_steps(backend, "short", 5)
        png = tmp_path / "soak.png"
        soak = subprocess.Popen(
            [sys.executable, "-m", "elastix", "chaos", "run", "short", "--kills", "3",
             "--interval", "30s", "--timeout", "60s", "-o", "json", "--plot", str(png),
             "--window", "1"], env=live_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        try:
            deadline = time.monotonic() + 180
            while not any(e.name == "elastic_first_step"
                          for e in events_of(backend.trainer_events("short"))[0]):
                assert soak.poll() is None and time.monotonic() < deadline, soak.communicate()
                time.sleep(0.1)
            stop.touch()
            out, err = soak.communicate(timeout=180)
        finally:
            soak.kill()
        assert soak.returncode == ExitCode.COMPLETED == 5, err
        d = json.loads(out)
        last = d["goodput"]["last_step"]
        assert d["stopped"] == f"the workload completed at step {last} before kill 2", err
        assert d["completed_early"] and not d["died"] and d["exit_code"] == 5 and not d["ok"]
        (kill,) = d["kills"]
        assert kill["recovery"]["complete"] and kill["recovery"]["detection_from"] == "kill"
        assert d["totals"]["recovered"] == 1 and 0 < d["totals"]["goodput"] < 1
        assert last > 5 and d["violations"] == []
        assert png.read_bytes()[:4] == b"\x89PNG"
        lines = err.strip().splitlines()
        assert f"error: chaos run: the workload completed at step {last} before kill 2" in lines
        assert "Traceback" not in err
    finally:
        _cli(live_env, "workload", "delete", "short", "--wait", check=False)


def _measurement(state: str, complete: bool, timed_out: bool) -> KillMeasurement:
    from elastix.measure.events import Recovery

    rec = Recovery(1, "in-process", start=1, first_step_at=2 if complete else None)
    return KillMeasurement([], rec, "events", state, 0, 0, None, None, timed_out)


def test_measured_kill_outcomes():
    """kill-worker --measure: the exit code tells a timeout from a death from a completion."""
    assert _measurement("Running", True, False).outcome is ExitCode.OK
    assert _measurement("Running", False, True).outcome is ExitCode.BOUND_MISSED
    assert _measurement("Failed", False, False).outcome is ExitCode.DIED
    assert _measurement("Completed", False, False).outcome is ExitCode.COMPLETED


def test_help_lists_every_exit_code():
    for o in ExitCode:
        assert f" {int(o)} " in EXIT_CODES_HELP, o


def test_soak_outcome_precedence():
    """Died beats a missed bound beats an early completion; a kill that failed is exit 1."""
    def res(**kw) -> ChaosReport:
        return ChaosReport([], goodput([]), kw.pop("violations", []), kw.pop("died", False), **kw)

    x = [Violation(1, "max_downtime", 1.0, 2.0)]

    assert res().outcome is ExitCode.OK and res().ok
    assert res(completed_early=True).outcome is ExitCode.COMPLETED
    assert res(completed_early=True, violations=x).outcome is ExitCode.BOUND_MISSED
    assert res(died=True, violations=x).outcome is ExitCode.DIED
    failed = res(error="kill 2 failed: no running worker")
    assert not failed.ok and failed.to_json()["exit_code"] == 1
