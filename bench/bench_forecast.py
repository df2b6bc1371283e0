"""How long does ``elastix workload forecast`` take at scale? Issue 52's bound: 1,024 slices for
30 days with 20 repetitions in at most 10 s on the 2-core machine.

Times the whole command as a subprocess (start-up, reading the events, the three policies at
today's periods and the search for the best, the table), calibrated by the recorded real run
of ``tests/measure/fixtures``, ``--rounds`` times, and prints one table for docs/benchmarks.md
with the machine's load beside it.

    .venv/bin/python bench/bench_forecast.py --rounds 3

Nothing here asserts a timing. ``--smoke``: 16 slices for a day, 2 repetitions, one round.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchcli import smoke_args

REPO = Path(__file__).resolve().parents[1]
EVENTS = REPO / "tests" / "measure" / "fixtures" / "real_run.events.jsonl"
ELASTIX = Path(sys.executable).parent / "elastix"


def one(slices: int, days: int, runs: int) -> tuple[float, float, dict]:
    """(wall s, CPU s of the child, its JSON) of one forecast."""
    argv = [str(ELASTIX), "workload", "forecast", "--events", str(EVENTS), "--slices",
            str(slices), "--days", str(days), "--runs", str(runs), "--tpu-type",
            "v5litepod-16", "--head-mtbf", "30d", "--replace-time", "5m,10m,40m",
            "--spare-slices", "2", "-o", "json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(p.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slices", type=int, default=1024)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    a = smoke_args(ap, "a small case, once: checks it runs", slices=16, days=1, runs=2, rounds=1)
    load = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    got = [one(a.slices, a.days, a.runs) for _ in range(a.rounds)]
    walls, cpus = [w for w, _, _ in got], [c for _, c, _ in got]
    rows = got[-1][2]["rows"]
    restarts = next(r for r in rows if r["policy"] == "restart" and r["periods"] == "today")
    print(f"{started}; load (1, 5, 15 min) before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"after: {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs")
    print()
    print("| case | rounds | wall s, median (min–max) | CPU s, median | bound |")
    print("|---|---|---|---|---|")
    print(f"| {a.slices:,} slices × {a.days} days × {a.runs} runs | {a.rounds} | "
          f"{statistics.median(walls):.2f} ({min(walls):.2f}–{max(walls):.2f}) | "
          f"{statistics.median(cpus):.2f} | ≤ 10 s |")
    print()
    print("| policy | periods | goodput | restarts a run (restart policy: failures) |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['policy']} | {r['periods']} | {r['goodput']['mean']:.1%} | "
              f"{r['restarts']['mean']:.1f} |")
    print()
    print(f"failures a run: {restarts['restarts']['mean']:.0f} (every one a restart under the "
          "restart policy)")


if __name__ == "__main__":
    main()
