"""Does the advice pay? A chaos soak at today's periods, ``workload advise``, the same soak at the
advised periods: measured goodput side by side (issue 36).

Runs the tiny trainer on the local backend twice, under the same chaos (``--kills`` kills
``--interval`` apart: the failure rate the advice is given, as ``--mtbf``), first with
``--today``'s periods, then with the ones ``elastix workload advise`` gives for the first run,
and prints one table for docs/benchmarks.md. Goodput is the chaos window's (first fault to the
last event), so start-up does not weigh on either.

    .venv/bin/python bench/bench_advise.py --kills 6 --interval 30s

Nothing here asserts a timing. ``--smoke``: one kill each, no interval: checks it runs.
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

JOB = ("elastix-train --preset tiny --steps 100000 --step-delay 0.1 "
       "--checkpoint-dir \"$ELASTIX_LOCAL_DATA_DIR/checkpoints\" {periods}")


def soak(label: str, periods: str, a: argparse.Namespace, root: str) -> tuple[dict, dict]:
    """The chaos report of one soak at ``periods``, and ``workload advise``'s JSON for it."""
    env = local_env(root, label)
    name = f"advise-{label}"
    elastix(env, "workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "2",
            "--elastic-slices", "2", "--max-slice-restarts", str(2 * a.kills + 2),
            "--command", JOB.format(periods=periods))
    try:
        wait_first_checkpoint(env, name)
        time.sleep(a.warmup)
        p = elastix(env, "chaos", "run", name, "--kills", str(a.kills), "--interval", a.interval,
                    "--seed", str(a.seed), "--timeout", f"{stretch(300):.0f}s", "-o", "json",
                    check=False)
        report = json.loads(p.stdout)
        adv = json.loads(elastix(env, "workload", "advise", name, "--mtbf", a.mtbf or a.interval,
                                 "-o", "json").stdout)
        return report, adv
    finally:
        elastix(env, "workload", "delete", name, "--wait", "--delete-data", check=False)


def periods_of(setting: dict) -> str:
    c, s = setting["checkpoint_period"], setting["snapshot_period"]
    return " ".join(x for x in (f"--checkpoint-period {c}" if c else "",
                                f"--snapshot-period {s}" if s else "") if x)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=6)
    ap.add_argument("--interval", default="30s")
    ap.add_argument("--mtbf", default=None, help="the advice's MTBF [--interval]")
    ap.add_argument("--today", default="--checkpoint-period 100",
                    help="the trainer's periods of the first soak")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", type=float, default=5.0)
    a = smoke_args(ap, "one kill each: checks it runs",
                   kills=1, interval="0", warmup=0.0, mtbf="30s")
    load = os.getloadavg()[0]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory() as root:
        first, adv = soak("today", a.today, a, root)
        advised = periods_of(adv["advised"])
        second, _ = soak("advised", advised, a, root)
    print(f"command: {shlex.join(sys.argv)}")
    print(f"started {started}, load {load:.1f} at the start, {os.getloadavg()[0]:.1f} at "
          "the end")
    print(f"advice (MTBF {adv['mtbf_seconds']:g} s): {a.today} -> {advised}")
    print("| periods | kills | recovered | steps lost | chaos-window goodput | expected |")
    print("|---|---|---|---|---|---|")
    for label, periods, rep, expected in (
            ("today", a.today, first, adv["today"]["goodput"]),
            ("advised", advised, second, adv["advised"]["goodput"])):
        recs = [k["recovery"] for k in rep["kills"] if k["recovery"]]
        lost = [r["steps_lost"] for r in recs if r["steps_lost"] is not None]
        win = (rep.get("chaos_window") or {}).get("goodput")
        print(f"| {label}: `{periods}` | {len(rep['kills'])} | "
              f"{sum(1 for r in recs if r['complete'])} | {sum(lost)} | "
              f"{'-' if win is None else f'{win:.1%}'} | {expected:.1%} |")


if __name__ == "__main__":
    main()
