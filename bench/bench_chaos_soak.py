"""Local chaos soak: downtime per kill, steps lost and goodput, with snapshots on and off.

Runs the real trainer on the local backend (CPU devices, real SIGKILL of slice-host processes),
``--kills`` kills per configuration via ``elastix chaos run -o json``, the two configurations one
after the other on the same machine, and prints one table to paste into docs/benchmarks.md.

    .venv/bin/python bench/bench_chaos_soak.py --kills 5 --interval 20s

``--trainer-args`` is passed to the trainer; ``--snapshot-flag`` is the flag that turns host-memory
snapshots on (off is the trainer's default). Nothing here asserts a timing. The wait for a first
step ends at once when the workload fails, and is bounded in seconds of a quiet machine, as is
``chaos run --timeout`` (``benchwait``). ``--smoke`` runs the smallest case (snapshots on
only, the same code as off with one flag more; one kill, once a first checkpoint is committed):
it checks that the bench runs.
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


def soak(label: str, trainer_args: str, a: argparse.Namespace, root: str) -> dict:
    env = local_env(root, label)
    name = f"soak-{label}"
    ckpt = os.path.join(root, f"ckpt-{label}")
    cmd = f"elastix-train --checkpoint-dir {ckpt} {trainer_args}"
    elastix(env, "workload", "create", name, "--tpu-type", a.tpu_type, "--num-slices",
            str(a.slices), "--elastic-slices", str(a.slices), "--max-slice-restarts",
            str(a.kills + 2), "--command", cmd)
    try:
        wait_first_checkpoint(env, name)  # then --warmup more
        time.sleep(a.warmup)  # steady state (and a snapshot) before the first kill
        p = elastix(env, "chaos", "run", name, "--kills", str(a.kills), "--interval", a.interval,
                    "--mode", "host", "--seed", str(a.seed), "--timeout", f"{stretch(300):.0f}s",
                    "-o", "json",
                    "--plot", os.path.join(a.plots, f"soak-{label}.png"), "--window", "10",
                    check=False)
        if not p.stdout.strip():
            raise SystemExit(f"chaos run {name} printed nothing:\n{p.stderr}")
        return json.loads(p.stdout)
    finally:
        elastix(env, "workload", "delete", name, "--wait", check=False)


def summarise(label: str, d: dict) -> list[str]:
    recs = [k["recovery"] for k in d["kills"] if k["recovery"] and k["recovery"]["complete"]]
    down = [r["downtime_seconds"] for r in recs]
    lost = [r["steps_lost"] for r in recs]
    det = [r["phases"]["detection"] for r in recs]
    restore = [r["phases"]["restore"] for r in recs]
    first = [r["phases"]["first_step"] for r in recs]
    srcs = sorted({r["restore_source"] for r in recs})
    med = lambda xs: f"{statistics.median(xs):.2f}" if xs else "-"  # noqa: E731
    rows = [f"| {label} | {len(recs)}/{len(d['kills'])} | {med(down)} "
            f"({min(down, default=0):.2f}-{max(down, default=0):.2f}) | {med(det)} | "
            f"{med(restore)} | {med(first)} | {med(lost)} ({', '.join(map(str, lost))}) | "
            f"{', '.join(srcs)} | {d['totals']['goodput']:.1%} | "
            f"{sum(1 for k in d['kills'] if k['in_process'])}/{len(d['kills'])} |"]
    for k in d["kills"]:
        r = k["recovery"] or {}
        rows.append(f"<!-- {label}: {json.dumps({'pod': k['kills'][0]['pod'], **r.get('phases', {}), 'downtime': r.get('downtime_seconds'), 'lost': r.get('steps_lost')})} -->")  # noqa: E501
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--interval", default="20s")
    ap.add_argument("--slices", type=int, default=2)
    ap.add_argument("--tpu-type", default="v5litepod-8")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds after the first checkpoint")
    ap.add_argument("--trainer-args", default="--preset tiny --steps 1000000 --batch-per-device 2 "
                    "--seq-len 32 --checkpoint-period 20 --step-delay 0.05 "
                    "--slice-wait-timeout 120 --max-slice-losses 50")
    ap.add_argument("--snapshot-flag", default="--snapshot-period 2")
    ap.add_argument("--plots", default=tempfile.gettempdir())
    a = smoke_args(ap, "snapshots on only, one kill, no warm-up: checks it runs",
                   kills=1, warmup=0.0)
    with tempfile.TemporaryDirectory() as root:
        results = {} if a.smoke else {"snapshots off": soak("off", a.trainer_args, a, root)}
        results["snapshots on"] = soak("on", f"{a.trainer_args} {a.snapshot_flag}", a, root)
    print(f"command: {shlex.join(sys.argv)}")
    print("| config | recovered | downtime s, median (range) | detection s | restore s | "
          "first step s | steps lost, median (each) | restored from | goodput | in-process |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, d in results.items():
        print("\n".join(summarise(label, d)))
    causes = [c for c in next(iter(results.values()))["goodput"]["badput_seconds"]]
    print("\n| config | wall s | productive s | " + " | ".join(causes) + " |")
    print("|---" * (len(causes) + 3) + "|")
    for label, d in results.items():
        g = d["goodput"]
        print(f"| {label} | {g['wall_seconds']:.1f} | {g['productive_seconds']:.1f} | "
              + " | ".join(f"{g['badput_seconds'][c]:.1f}" for c in causes) + " |")


if __name__ == "__main__":
    main()
