"""One soak per fault kind on the quickstart workload: downtime, steps lost and goodput by fault.

Each fault kind (``elastix chaos run --fault F``: kill, term, hang, slice, head) gets its own
quickstart workload (2 x v5litepod-8 on the local backend, the default local job with more
steps so that the soak ends before the job does), ``--kills`` rounds ``--interval`` apart,
one kind after the other on the same machine, and one table to paste into docs/benchmarks.md.

    .venv/bin/python bench/bench_faults.py --kills 5 --interval 2m

``hang`` is a hang until the platform replaces the host (the local hung-host probe, 30 s as
the kubelet's liveness defaults); ``head`` needs a workload restart per kill
(``--max-restarts``), and its recoveries are restarts: the full-restart path beside the
elastic ones. Nothing here asserts a timing. ``--smoke`` runs one ``term`` and one aimed
``kill --during save`` (one round each, no interval): it checks that the bench runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile
import time

# Run as a script, so this folder is on the path.
from benchcli import elastix, local_env, smoke_args, wait_first_checkpoint
from benchwait import stretch

FAULTS = ("kill", "term", "hang", "slice", "head")
JOB = ("elastix-train --preset tiny --steps {steps} --step-delay 0.1 "
       "--checkpoint-dir \"$ELASTIX_LOCAL_DATA_DIR/checkpoints\" --checkpoint-period 20 "
       "--snapshot-period 5")


def soak(fault: str, extra: list[str], a: argparse.Namespace, root: str) -> dict:
    label = "-".join([fault, *(x.strip("-") for x in extra)])
    env = local_env(root, label)
    name = f"soak-{fault}"
    elastix(env, "workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "2",
            "--elastic-slices", "2", "--max-slice-restarts", str(2 * a.kills + 2),
            "--max-restarts", str(a.kills + 1), "--command", JOB.format(steps=a.steps))
    try:
        wait_first_checkpoint(env, name)
        time.sleep(a.warmup)
        p = elastix(env, "chaos", "run", name, "--fault", fault, *extra, "--kills",
                    str(a.kills), "--interval", a.interval, "--seed", str(a.seed),
                    "--timeout", f"{stretch(300):.0f}s", "-o", "json", check=False)
        if not p.stdout.strip():
            raise SystemExit(f"chaos run {name} printed nothing:\n{p.stderr}")
        return json.loads(p.stdout)
    finally:
        elastix(env, "workload", "delete", name, "--wait", "--delete-data", check=False)


def row(label: str, d: dict) -> str:
    recs = [k["recovery"] for k in d["kills"] if k["recovery"] and k["recovery"]["complete"]]
    down = [r["downtime_seconds"] for r in recs]
    lost = [r["steps_lost"] for r in recs if r["steps_lost"] is not None]
    kinds = sorted({r["kind"] for r in recs})
    med = lambda xs: f"{statistics.median(xs):.2f}" if xs else "-"  # noqa: E731
    aimed = [k["aim"] for k in d["kills"] if k.get("aim")]
    inside = f" ({sum(1 for x in aimed if x['inside'])}/{len(aimed)} inside)" if aimed else ""
    return (f"| {label}{inside} | {len(recs)}/{len(d['kills'])} | {med(down)} "
            f"({min(down, default=0):.2f}-{max(down, default=0):.2f}) | {med(lost)} "
            f"({', '.join(map(str, lost))}) | {', '.join(kinds)} | "
            f"{d['totals']['goodput']:.1%} | {d['stopped']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--interval", default="2m")
    ap.add_argument("--steps", type=int, default=8000,
                    help="the job's steps: more than the soak lasts (0.1 s a step and more)")
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", type=float, default=10.0,
                    help="seconds after the first checkpoint")
    a = smoke_args(ap, "one term and one kill --during save, one round each: checks it runs",
                   kills=1, interval="0", warmup=0.0, steps=3000)
    cases = ([("term", []), ("kill", ["--during", "save"])] if a.smoke
             else [(f, []) for f in a.faults.split(",")])
    results = {}
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as root:
        for fault, extra in cases:
            results[" ".join([fault, *extra])] = soak(fault, extra, a, root)
    print(f"command: {shlex.join(sys.argv)}")
    print(f"started {started}, load {load:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end")
    print("| fault | recovered | downtime s, median (range) | steps lost, median (each) | "
          "recovery kind | goodput | stopped |")
    print("|---|---|---|---|---|---|---|")
    for label, d in results.items():
        print(row(label, d))


if __name__ == "__main__":
    main()
