"""Every benchmark's smallest case runs to the end and prints its report (slow tier).

What is checked is the report's structure (its tables, a row per case), never a number: a smoke
run's timings mean nothing. ``bench/hunt_faults.py`` (with ``hunt_lib.py``) is a tool, not a
benchmark: a fault hunt judged by verdicts, 10-13 minutes a run, so only its imports and flags
are checked here; ``bench/diff_xpk.py`` is a tool too, and cheap, so it runs whole.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _table(run, header: str, rows: list[str]) -> None:
    """The report holds a table whose header starts with ``header`` and a row per ``rows``."""
    assert run.lines(header), f"no table '{header}' in:\n{run.out}"
    for row in rows:
        assert run.lines(row), f"no row '{row}' in:\n{run.out}"


def _local_recovery(run) -> None:
    """The raw copy, printed before the workload and again under the table, there with each
    elastic restore as a multiple of it."""
    lines = run.lines("raw host-to-device copy of the state (")
    assert len(lines) == 2, run.out
    assert "before the workload" in lines[0] and "the elastic restores" not in lines[0], run.out
    assert re.search(r"the elastic restores [\d.]+ s: [\d.]+x the raw copy$", lines[1]), run.out
    bound = run.lines("bound: downtime <= scheduling delay ")
    assert len(bound) == 1 and re.search(r"= [\d.]+ s; the slowest elastic recovery [\d.]+ s: "
                                         r"(within|over)$", bound[0]), run.out
    assert re.search(r"^elastic 1: [\d.]+ s .* steps lost \d+ \(step \d+ -> \d+\) pid same",
                     run.out, re.M), run.out


def _has(*starts: str):
    """A check that the report holds a line starting with each of ``starts``."""

    def check(run) -> None:
        for start in starts:
            assert run.lines(start), f"no line '{start}' in:\n{run.out}"

    return check


def _storage(run) -> None:
    assert run.lines("restore, preset tiny, 4 slices: checkpoint")
    assert len(run.lines("events emit (")) == 2
    assert run.lines("uploads during the run:")


def _pod_watch(run) -> None:
    assert run.lines("[no extra load] load")
    assert len([x for x in run.out.splitlines() if "Ready -> " in x]) == 4, run.out
    assert any("false losses seen by the watched source" in x for x in run.out.splitlines())


def _preflight(run) -> None:
    assert run.lines("workload create with     preflight:")
    assert run.lines("workload create without  preflight:")
    assert run.lines("preflight alone (in-process")
    assert len(run.lines("submit --dry-run=server in-process")) == 2


def _create_to_step(run) -> None:
    assert run.lines("- cold: create → first step is")
    assert len(run.lines("- warm: create → first step is")) == 2  # like for like, and fresh
    assert run.lines("- new: create → first step is")  # issue 49 item 6: the shared cache


def _verify(run) -> None:
    assert all(line.endswith("| yes |") for line in run.lines("| after") + run.lines("| beside"))


def _bench(name: str, tables: list[tuple[str, list[str]]], check=None):
    """A row of ``SMOKE``: ``bench/bench_<name>.py --smoke`` must print each of ``tables``
    (a header and its rows, as ``_table`` reads them), then pass ``check`` if there is one."""
    return pytest.param(f"bench_{name}.py", tables, check, id=name)


SMOKE = [
    # -- in-process benches: the trainer on CPU devices
    _bench("checkpoint_stall", [("| preset | saver | median step (ms) |",
                                 ["| tiny | elastix |", "| tiny | orbax |"])], _has("### 2x2")),
    _bench("trainer", [("| preset | global batch x seq |", ["| tiny | 32 x 64 |"]),
                       ("| | seconds | MB/s | vs disk |", ["| Orbax save (sync, committed) |",
                                                            "| Orbax restore (8 devices) |"])],
           _has("async save (tiny, every 5 steps")),
    _bench("chip", [("| preset | seq | batch | attention | remat |",
                     ["| tiny | 128 | 2 | dot_product | none |",
                      "| tiny | 128 | 2 | dot_product | full |",
                      "| tiny | 128 | 2 | dot_product, heads 2/1x32 | none |"]),
                    ("| preset | seq | remat | largest batch that fits |", ["| tiny | 128 |"])],
           _has("trainer's printed TFLOP/s, tiny seq 128 batch 2")),
    _bench("chip_fault", [("| case | result of steps 1, 2, 3 at (s) |",
                           ["| healthy |", "| seam inside, 2-3 armed |", "| prologue, 2-3 armed |",
                            "| prologue, 2-3 armed after dispatch |"])]),
    _bench("chip_window", [("| read | seconds (each) |",
                            ["| every transfer at once |", "| window 512 MiB |",
                             "| window 1024 MiB |", "| window 256 MiB |"])]),
    _bench("fit_cache", [("| case | run | start to first step (s) |",
                          ["| --preset tiny --batch-per-device 2 --seq-len 64 | trainer, cold "
                           "cache |", "| --preset tiny --batch-per-device 2 --seq-len 64 | "
                                      "trainer, its own cache |"])]),
    _bench("fitcheck", [], _has('{"fits": true')),
    _bench("save_memory", [("| writer | peak host memory added,",
                             ["| orbax (deep copy) |", "| elastix, every write at once |",
                              "| elastix |"])]),
    _bench("contract", [("| preset | seam only:", ["| tiny |"])],
           _has("answer round trip, 4 x 2 hosts")),
    _bench("elastic", [
        ("| loop | median step (s) |", ["| trainer loop under the runtime |"]),
        ("| seconds (median) | n |", ["| pause-resume (same mesh) | 1 |",
                                      "| replica-resize, precompiled + warmed | 1 |"]),
        ("| recovery source |", ["| checkpoints only (every 20) | [",
                                 "| + host snapshots (every 2) | ["])]),
    _bench("restore", [("| page cache | raw read GB/s |", ["| cold |", "| warm |"]),
                       ("| page cache | restore s |", ["| cold |", "| warm |"])]),
    _bench("storage", [], _storage),
    _bench("startup", [("| cache | spawn → run_start", ["| cold |", "| warm |"]),
                       ("| phase (median s) | cold | warm |",
                        ["| build the step (compile or cache) |", "| first step |"])]),
    _bench("train_help", [], _has("this tree  median")),
    # -- the launcher, and the fake Kubernetes API
    # cli: without xpk (not installed here, nor in CI), elastix alone
    _bench("cli", [("| case | elastix median", ["| help |", "| dry-run |"])],
           _has("elastix --help -X importtime:")),
    _bench("gke_scale", [("| command | median ms |", [
        "| plain list of the 1025 pods |", "| `workload status` |", "| `workload list` |",
        "| `logs -f` (to its first line) |", "| `chaos kill-worker` |",
        "| head pod watch: start to watching |"])]),
    _bench("kill", [("| way | kill -> replacement listed", ["| elastix |", "| library |"])]),
    _bench("pod_watch", [], _pod_watch),
    _bench("preflight", [], _preflight),
    # -- workloads on the local backend
    _bench("create_to_step", [("| path | cache |", [
        "| `workload create` → first step | cold |",
        "| `workload create --replace` → first step | warm |",
        "| `workload create` of a new workload, its model compiled before, → first step | warm |",
        "| trainer alone | cold |", "| trainer alone, a fresh start | warm |",
        "| trainer alone, stopping the last one and resuming | warm |"])], _create_to_step),
    _bench("local_recovery", [("| recovery | kill → next step",
                               ["| elastic (kill a slice host) |",
                                "| full restart (kill the controller) |"])],
           _local_recovery),
    _bench("faults", [("| fault | recovered |",
                       ["| term | 1/1 |", "| kill --during save (1/1 inside) | 1/1 |"])]),
    _bench("advise", [("| periods | kills |", ["| today: `--checkpoint-period 100` | 1 | 1 |",
                                               "| advised: `--checkpoint-period"])]),
    _bench("forecast", [("| case | rounds |", ["| 16 slices × 1 days × 2 runs | 1 |"]),
                        ("| policy | periods |", ["| restart | best |",
                                                  "| replica-resize | today |"])]),
    _bench("forecast_soak", [("| | goodput |", ["| soak, chaos window (measured) |",
                                                "| forecast, pause-resume |"])]),
    _bench("verify", [("| reference | downtime s", ["| after |", "| beside |"])], _verify),
    _bench("goodput_truth", [("| copy | in flight | fault |", ["| staged | 4 | kill |"])]),
    _bench("ci_smoke", [("| run | create s |", ["| 1"])]),
]


@pytest.mark.parametrize(("script", "tables", "check"), SMOKE)
def test_smoke(run_bench, script, tables, check):
    """The bench's ``--smoke`` run prints its tables, a row per case (and what ``check`` reads)."""
    run = run_bench(script, "--smoke")
    for header, rows in tables:
        _table(run, header, rows)
    if check is not None:
        check(run)


# -- benches run with more than ``--smoke`` ---------------------------------------------------

def test_chaos_soak(run_bench, tmp_path):
    run = run_bench("bench_chaos_soak.py", "--smoke", "--plots", str(tmp_path))
    _table(run, "| config | recovered |", ["| snapshots on | 1/1 |"])
    _table(run, "| config | wall s | productive s |", ["| snapshots on |"])
    assert [p.name for p in tmp_path.glob("soak-*.png")] == ["soak-on.png"]


def test_chip_copies_and_what_reads_their_events(run_bench, tmp_path):
    """The copies bench (a chip's, here on CPU), and its runs' events read as a chip run's will
    be (issue 58 item 6): ``workload goodput``, ``advise`` and ``forecast --events``, the last
    two with the failure figures a run without faults cannot give."""
    out = tmp_path / "out"
    out.mkdir()
    run = run_bench("bench_chip_copies.py", "--smoke", "--out", str(out), "--in-flight", "0,2")
    _table(run, "| run | steps | median step (s) |",
           ["| tiny b2, snapshots every 3, checkpoints every 5, auto copies |",
            "| tiny b2, --continuous-checkpointing, auto copies, steps in flight auto |",
            "| tiny b2, --continuous-checkpointing, auto copies, steps in flight 2 |"])
    two = json.loads((out / "events-3.jsonl").read_text().splitlines()[0])
    assert two["config"]["steps_in_flight"] == 2 and two["config"]["continuous_checkpointing"]
    _has("Restore of the snapshot (step 12")(run)
    events = out / "events-1.jsonl"
    kinds = [json.loads(line)["event"] for line in events.read_text().splitlines()]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end", kinds  # a whole run's events
    elastix = [sys.executable, "-m", "elastix", "workload"]

    def said(*args: str) -> str:
        proc = subprocess.run([*elastix, *args, "--events", str(events)], capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        return proc.stdout

    good = said("goodput", "-o", "json")
    parts = json.loads(good)
    assert parts["last_step"] == 12 and parts["recoveries"] == [], parts
    assert parts["badput_seconds"]["checkpoint_stall"] > 0, parts
    advice = said("advise", "--mtbf", "6h")  # the run's own stalls, measured
    assert re.search(r"a save's stall [\d.]+ s \(\d+ saves\), a snapshot's [\d.]+ s \(4\)",
                     advice), advice
    # the run's own periods, from its run_start (not guessed from the final save's step)
    today = json.loads(said("advise", "--mtbf", "6h", "-o", "json"))["today"]
    assert (today["checkpoint_period"], today["snapshot_period"]) == (5, 3), today
    forecast = said("forecast", "--recovery-time", "60s", "--replace-time", "10m")
    assert re.search(r"^goodput +[\d.]+%", forecast, re.M), forecast


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
