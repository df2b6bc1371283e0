"""A soak that ends early still reports: its JSON, the goodput so far, why it stopped, the plot,
and an exit code that says how it ended (real local backend, real processes, real SIGKILL)."""

from __future__ import annotations

import json
import sys

from test_measure_live_driver import CONTROLLER, _cli, _wait_steps

from elastix.backends.local.backend import LocalBackend
from elastix.errors import EXIT_CODES_HELP, ExitCode
from elastix.measure.chaos import KillMeasurement
from elastix.measure.goodput import goodput
from elastix.measure.report import ChaosReport, Violation


def test_soak_that_outlives_the_workload_reports_and_exits_5(live_env, tmp_path):
    backend = LocalBackend(live_env["ELASTIX_STATE_DIR"])
    # 200 steps of 0.05 s: the first kill lands mid-run (the CLI has 10 s to start, under load),
    # the second would come 30 s after it, long after the last step.
    _cli(live_env, "workload", "create", "short", "--tpu-type", "v5litepod-8", "--num-slices",
         "2", "--elastic-slices", "2", "--max-slice-restarts", "5",
         "--command", f"{sys.executable} {CONTROLLER} --step-delay 0.05 --steps 200")
    try:
        _wait_steps(backend, "short", 5)
        png = tmp_path / "soak.png"
        p = _cli(live_env, "chaos", "run", "short", "--kills", "3", "--interval", "30s",
                 "--timeout", "60s", "-o", "json", "--plot", str(png), "--window", "1",
                 check=False)
        assert p.returncode == ExitCode.COMPLETED == 5, p.stderr
        d = json.loads(p.stdout)
        assert d["stopped"] == "the workload completed at step 200 before kill 2", p.stderr
        assert d["completed_early"] and not d["died"] and d["exit_code"] == 5 and not d["ok"]
        (kill,) = d["kills"]
        assert kill["recovery"]["complete"] and kill["recovery"]["detection_from"] == "kill"
        assert d["totals"]["recovered"] == 1 and 0 < d["totals"]["goodput"] < 1
        assert d["goodput"]["last_step"] == 200 and d["violations"] == []
        assert png.read_bytes()[:4] == b"\x89PNG"
        err = p.stderr.strip().splitlines()
        assert "error: chaos run: the workload completed at step 200 before kill 2" in err
        assert "Traceback" not in p.stderr
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
