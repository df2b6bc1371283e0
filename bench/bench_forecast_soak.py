"""Does the forecast agree with a measured soak? A local chaos soak, then ``workload forecast``
of the same training under the same conditions: goodput side by side (issue 52: within 2
points).

Runs the tiny trainer on the local backend (2 slices of v5litepod-8, 4 hosts, elastic: a lost
slice is waited for and recovered in process) under ``--kills`` kills ``--interval`` apart, then
forecasts that workload, calibrated by its own events, at its size, for the chaos window's
length, with the kills' rate as the hosts' (``--host-mtbf`` = hosts x window / kills: the kills
are one at a time, so the fleet loses a host every window / kills on average). Compares the forecast's
pause-resume goodput at today's periods with the soak's chaos-window goodput (first fault to
the last event: no start-up on either side).

    .venv/bin/python bench/bench_forecast_soak.py --kills 6 --interval 30s

Nothing here asserts a timing. ``--smoke``: one kill: checks it runs (its restart time is
capped at half the chaos window, which one kill makes shorter than a start-up: its restart row
is no result).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time

from benchcli import elastix, local_env, smoke_args, wait_first_checkpoint
from benchwait import stretch

from elastix.backends.local.backend import LocalBackend
from elastix.commands.options import parse_duration
from elastix.measure.events import events_of
from elastix.measure.forecast_inputs import inputs_of

JOB = ("elastix-train --preset tiny --steps 100000 --step-delay 0.1 "
       "--checkpoint-dir \"$ELASTIX_LOCAL_DATA_DIR/checkpoints\" {periods}")
HOSTS = 4  # 2 slices of v5litepod-8, 2 hosts each


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=6)
    ap.add_argument("--interval", default="30s")
    ap.add_argument("--periods", default="--checkpoint-period 100 --snapshot-period 20",
                    help="the trainer's periods")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=50)
    a = smoke_args(ap, "one kill: checks it runs", kills=1, interval="20s", runs=3)
    interval = parse_duration(a.interval, "--interval")
    load = os.getloadavg()[0]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory() as root:
        env = local_env(root, "soak")
        name = "forecast-soak"
        elastix(env, "workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices",
                "2", "--elastic-slices", "2", "--max-slice-restarts", str(2 * a.kills + 2),
                "--command", JOB.format(periods=a.periods))
        try:
            backend = LocalBackend(env["ELASTIX_STATE_DIR"])
            wait_first_checkpoint(env, name)
            p = elastix(env, "chaos", "run", name, "--kills", str(a.kills), "--interval",
                        a.interval, "--seed", str(a.seed), "--timeout",
                        f"{stretch(300):.0f}s", "-o", "json", check=False)
            soak = json.loads(p.stdout)
            window = soak.get("chaos_window") or {}
            seconds = window.get("seconds") or a.kills * interval
            mtbf = HOSTS * seconds / max(1, len(soak["kills"]))  # the kills' rate, per host
            # A restart here is the local process's start-up (the forecast's default is GKE's)
            startup = inputs_of(events_of(backend.trainer_events(name))[0]).startup or 1.0
            if a.smoke:  # one kill: a window of seconds, shorter than a start-up, which the
                # forecast refuses as a restart time; the smoke run checks that it runs
                startup = min(startup, seconds / 2)
            fc = json.loads(elastix(
                env, "workload", "forecast", name, "--slices", "2", "--tpu-type",
                "v5litepod-8", "--host-mtbf", f"{mtbf:.3f}s", "--restart-time",
                f"{startup:.3f}s", "--days",
                f"{seconds / 86400:.9f}", "--runs", str(a.runs), "--seed", str(a.seed),
                "--spare-slices", "0", "--min-slices", "1", "-o", "json").stdout)
        finally:
            elastix(env, "workload", "delete", name, "--wait", "--delete-data", check=False)
    print(f"command: {shlex.join(sys.argv)}")
    print(f"started {started}, load {load:.1f} at the start, {os.getloadavg()[0]:.1f} at "
          "the end")
    print(f"soak: {len(soak['kills'])} kills, chaos window {seconds:.0f} s; forecast "
          f"calibrated by: {fc['sources']}")
    print("| | goodput | 95 % interval |")
    print("|---|---|---|")
    measured = window.get("goodput")
    print(f"| soak, chaos window (measured) | "
          f"{'-' if measured is None else f'{measured:.1%}'} | |")
    for r in fc["rows"]:
        if r["periods"] == "today":
            g = r["goodput"]
            print(f"| forecast, {r['policy']} | {g['mean']:.1%} | {g['low']:.1%}–{g['high']:.1%} |")


if __name__ == "__main__":
    main()
