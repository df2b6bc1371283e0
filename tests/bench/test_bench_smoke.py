"""Every benchmark's smallest case runs to the end and prints its report (slow tier).

What is checked is the report's structure (its tables, a row per case), never a number: a smoke
run's timings mean nothing. ``bench/hunt_faults.py`` (with ``hunt_lib.py``) is a tool, not a
benchmark: a fault hunt judged by verdicts, 10-13 minutes a run, so only its imports and flags
are checked here; ``bench/diff_xpk.py`` is a tool too, and cheap, so it runs whole.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _table(run, header: str, rows: list[str]) -> None:
    """The report holds a table whose header starts with ``header`` and a row per ``rows``."""
    assert run.lines(header), f"no table '{header}' in:\n{run.out}"
    for row in rows:
        assert run.lines(row), f"no row '{row}' in:\n{run.out}"


# -- in-process benches: the trainer on CPU devices --------------------------------------------

def test_checkpoint_stall(run_bench):
    run = run_bench("bench_checkpoint_stall.py", "--smoke")
    assert run.lines("### 2x2")
    _table(run, "| preset | saver | median step (ms) |", ["| tiny | elastix |", "| tiny | orbax |"])


def test_trainer(run_bench):
    run = run_bench("bench_trainer.py", "--smoke")
    _table(run, "| preset | global batch x seq |", ["| tiny | 32 x 64 |"])
    assert run.lines("async save (tiny, every 5 steps")
    _table(run, "| | seconds | MB/s | vs disk |", ["| Orbax save (sync, committed) |",
                                                  "| Orbax restore (8 devices) |"])


def test_contract(run_bench):
    run = run_bench("bench_contract.py", "--smoke")
    assert run.lines("answer round trip, 4 x 2 hosts")
    _table(run, "| preset | seam only:", ["| tiny |"])


def test_elastic(run_bench):
    run = run_bench("bench_elastic.py", "--smoke")
    _table(run, "| loop | median step (s) |", ["| trainer loop under the runtime |"])
    _table(run, "| seconds (median) | n |", [
        "| pause-resume (same mesh) | 1 |", "| replica-resize, precompiled + warmed | 1 |"])
    _table(run, "| recovery source |", ["| checkpoints only (every 20) | [",
                                        "| + host snapshots (every 2) | ["])


def test_restore(run_bench):
    run = run_bench("bench_restore.py", "--smoke")
    _table(run, "| page cache | raw read GB/s |", ["| cold |", "| warm |"])
    _table(run, "| page cache | restore s |", ["| cold |", "| warm |"])


def test_storage(run_bench):
    run = run_bench("bench_storage.py", "--smoke")
    assert run.lines("restore, preset tiny, 4 slices: checkpoint")
    assert len(run.lines("events emit (")) == 2
    assert run.lines("uploads during the run:")


def test_startup(run_bench):
    run = run_bench("bench_startup.py", "--smoke")
    _table(run, "| cache | spawn → run_start", ["| cold |", "| warm |"])
    _table(run, "| phase (median s) | cold | warm |", ["| build the step (compile or cache) |",
                                                      "| first step |"])


def test_train_help(run_bench):
    run = run_bench("bench_train_help.py", "--smoke")
    assert run.lines("this tree  median")


# -- the launcher, and the fake Kubernetes API --------------------------------------------------

def test_cli(run_bench):
    """Without xpk (not installed here, nor in CI): elastix alone."""
    run = run_bench("bench_cli.py", "--smoke")
    _table(run, "| case | elastix median", ["| help |", "| dry-run |"])
    assert run.lines("elastix --help -X importtime:")


def test_gke_scale(run_bench):
    run = run_bench("bench_gke_scale.py", "--smoke")
    _table(run, "| command | median ms |", [
        "| plain list of the 1025 pods |", "| `workload status` |", "| `workload list` |",
        "| `logs -f` (to its first line) |", "| `chaos kill-worker` |",
        "| head pod watch: start to watching |"])


def test_kill(run_bench):
    run = run_bench("bench_kill.py", "--smoke")
    _table(run, "| way | kill -> replacement listed", ["| elastix |", "| library |"])


def test_pod_watch(run_bench):
    run = run_bench("bench_pod_watch.py", "--smoke")
    assert run.lines("[no extra load] load")
    assert len([x for x in run.out.splitlines() if "Ready -> " in x]) == 4, run.out
    assert any("false losses seen by the watched source" in x for x in run.out.splitlines())


def test_preflight(run_bench):
    run = run_bench("bench_preflight.py", "--smoke")
    assert run.lines("workload create with     preflight:")
    assert run.lines("workload create without  preflight:")
    assert run.lines("preflight alone (in-process")
    assert len(run.lines("submit --dry-run=server in-process")) == 2


# -- workloads on the local backend -------------------------------------------------------------

def test_create_to_step(run_bench):
    run = run_bench("bench_create_to_step.py", "--smoke")
    _table(run, "| path | cache |", [
        "| `workload create` → first step | cold |",
        "| `workload create --replace` → first step | warm |",
        "| `workload create` of a new workload, its model compiled before, → first step | warm |",
        "| trainer alone | cold |", "| trainer alone, a fresh start | warm |",
        "| trainer alone, stopping the last one and resuming | warm |"])
    assert run.lines("- cold: create → first step is")
    assert len(run.lines("- warm: create → first step is")) == 2  # like for like, and fresh
    assert run.lines("- new: create → first step is")  # issue 49 item 6: the shared cache


def test_local_recovery(run_bench):
    run = run_bench("bench_local_recovery.py", "--smoke")
    _table(run, "| recovery | kill → next step", ["| elastic (kill a slice host) |",
                                                   "| full restart (kill the controller) |"])


def test_chaos_soak(run_bench, tmp_path):
    run = run_bench("bench_chaos_soak.py", "--smoke", "--plots", str(tmp_path))
    _table(run, "| config | recovered |", ["| snapshots on | 1/1 |"])
    _table(run, "| config | wall s | productive s |", ["| snapshots on |"])
    assert [p.name for p in tmp_path.glob("soak-*.png")] == ["soak-on.png"]


def test_faults(run_bench):
    run = run_bench("bench_faults.py", "--smoke")
    _table(run, "| fault | recovered |", ["| term | 1/1 |",
                                          "| kill --during save (1/1 inside) | 1/1 |"])


def test_advise(run_bench):
    run = run_bench("bench_advise.py", "--smoke")
    _table(run, "| periods | kills |", ["| today: `--checkpoint-period 100` | 1 | 1 |",
                                       "| advised: `--checkpoint-period"])


def test_forecast(run_bench):
    run = run_bench("bench_forecast.py", "--smoke")
    _table(run, "| case | rounds |", ["| 16 slices × 1 days × 2 runs | 1 |"])
    _table(run, "| policy | periods |", ["| restart | best |", "| replica-resize | today |"])


def test_forecast_soak(run_bench):
    run = run_bench("bench_forecast_soak.py", "--smoke")
    _table(run, "| | goodput |", ["| soak, chaos window (measured) |",
                                  "| forecast, pause-resume |"])


def test_verify(run_bench):
    run = run_bench("bench_verify.py", "--smoke")
    _table(run, "| reference | downtime s", ["| after |", "| beside |"])
    assert all(line.endswith("| yes |") for line in run.lines("| after") + run.lines("| beside"))


def test_ci_smoke(run_bench):
    run = run_bench("bench_ci_smoke.py", "--smoke")
    _table(run, "| run | create s |", ["| 1"])


def test_maxtext(run_bench):
    """The elastic MaxText run and the elastix trainer's (``--smoke``), in MaxText's own
    environment; without it the test skips and says so, and in CI (``CI=true``) it fails."""
    py = os.environ.get("ELASTIX_MAXTEXT_PYTHON") or str(REPO / ".venv-maxtext" / "bin" / "python")
    why = None
    if not os.path.exists(py):
        why = f"no MaxText environment at {py} (bash .ci/setup-maxtext, or ELASTIX_MAXTEXT_PYTHON)"
    elif subprocess.run([py, "-c", "import maxtext, pathwaysutils"],
                        capture_output=True).returncode != 0:
        why = f"{py} cannot import maxtext; re-run bash .ci/setup-maxtext"
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the MaxText bench: {why}", pytrace=False)
        pytest.skip(why)
    run = run_bench("bench_maxtext.py", "--smoke", env={"ELASTIX_MAXTEXT_PYTHON": py})
    _table(run, "| run | kill → next step (s) |", ["| MaxText, elastic (in-process) |",
                                                    "| elastix trainer, elastic (in-process) |"])


# -- the tools beside the benches ---------------------------------------------------------------

def test_diff_xpk(run_bench):
    run = run_bench("diff_xpk.py")
    assert run.lines("rj[X] = spec.replicatedJobs[name=X]"), run.out
    assert re.search(r"^\d+ differences$", run.out, re.M), run.out


def test_hunt_faults_imports_and_parses(run_bench):
    """Only its imports and flags: a hunt is 10-13 minutes of workloads judged by verdicts."""
    run = run_bench("hunt_faults.py", "--help")
    assert run.lines("usage: hunt_faults.py") and "--rows" in run.out
