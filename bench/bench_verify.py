"""``chaos run --verify``: its reference run after the faults (as elastix does) or beside them.

A reference beside the faults saves wall time, but on a small machine it takes CPU from the
workload under test while its recoveries are measured. This bench measures both on the local
backend, alternating, each round a fresh workload (the tiny trainer, pause-resume, 2 slices):

- ``after``: ``chaos run --verify`` (the reference starts once the last recovery is measured);
- ``beside``: the same copy started (``Backend.clone``) just before ``chaos run --reference``.

It prints one table to paste into docs/benchmarks.md: per mode, the recoveries' downtime and
first step after them (median, min-max), the command's wall time, and the verdict. Nothing here
asserts a timing.

    .venv/bin/python bench/bench_verify.py --rounds 4 --kills 3 --interval 8s

``--smoke`` runs the smallest case (one round of each mode, one kill): it checks that the bench
runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from benchcli import elastix, smoke_args
from benchwait import stretch

from elastix.backends.local.backend import LocalBackend

TRAIN = ("elastix-train --preset tiny --steps 100000 --batch-per-device 2 --seq-len 32 "
         "--checkpoint-dir $ELASTIX_WORKLOAD_DIR/ckpt --checkpoint-period 4 --step-delay {delay} "
         "--compilation-cache-dir \"$BENCH_JAX_CACHE\" --elastic-mode pause-resume "
         "--max-slice-losses 50 --slice-wait-timeout 120")


def one(mode: str, i: int, a: argparse.Namespace, env: dict[str, str]) -> dict:
    name = f"v{i}"
    elastix(env, "workload", "create", name, "--tpu-type", "v5litepod-4", "--num-slices", "2",
            "--elastic-slices", "2", "--max-slice-restarts", "10", "--command",
            TRAIN.format(delay=a.step_delay))
    ref = None
    try:
        t0 = time.monotonic()
        if mode == "beside":
            ref = LocalBackend(env["ELASTIX_STATE_DIR"]).clone(name)
            how = ["--reference", ref]
        else:
            how = ["--verify"]
        p = elastix(env, "chaos", "run", name, "--kills", str(a.kills), "--interval",
                    a.interval, "--timeout", f"{stretch(300):.0f}s", "-o", "json", *how,
                    check=False)
        wall = time.monotonic() - t0
        if p.returncode != 0:
            raise SystemExit(f"chaos run ({mode}) exited {p.returncode}:\n{p.stderr}")
        d = json.loads(p.stdout)
    finally:
        if ref is not None:
            elastix(env, "workload", "delete", ref, "--wait", "--delete-data", check=False)
        elastix(env, "workload", "delete", name, "--wait", "--delete-data", check=False)
    rec = [k["recovery"] for k in d["kills"]]
    return {"mode": mode, "wall": wall, "downtime": [r["downtime_seconds"] for r in rec],
            "first_step": [r["phases"]["first_step"] for r in rec], "verify": d["verify"],
            "load": os.getloadavg()[0]}


def _cell(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4, help="rounds of each mode, alternating")
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--interval", default="8s")
    ap.add_argument("--step-delay", default="0.05", help="the trainer's sleep a step: 0 keeps "
                                                          "a core busy with steps")
    a = smoke_args(ap, "one round of each mode, one kill", rounds=1, kills=1)
    root = tempfile.mkdtemp(prefix="bench-verify-")
    env = {**os.environ, "ELASTIX_STATE_DIR": os.path.join(root, "state"),
           "ELASTIX_BACKEND": "local", "KUBECONFIG": os.path.join(root, "none"),
           "BENCH_JAX_CACHE": os.path.join(root, "jax-cache"),
           "ELASTIX_LOCAL_SCHEDULING_DELAY": "0.2", "ELASTIX_HEALTH_TIMEOUT": "1.0"}
    rows = []
    try:
        for i in range(a.rounds):
            for j, mode in enumerate(("after", "beside") if i % 2 == 0 else ("beside", "after")):
                rows.append(one(mode, 2 * i + j, a, env))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{a.rounds} rounds of each, {a.kills} kills {a.interval} apart, --step-delay "
          f"{a.step_delay}; load "
          f"{min(r['load'] for r in rows):.1f}-{max(r['load'] for r in rows):.1f}, "
          f"{os.cpu_count()} cores\n")
    print("| reference | downtime s, median (min-max) | first step after s | chaos run wall s "
          "| steps compared | verified |")
    print("|---|---:|---:|---:|---:|---|")
    for mode in ("after", "beside"):
        rs = [r for r in rows if r["mode"] == mode]
        print(f"| {mode} | {_cell([x for r in rs for x in r['downtime']])} | "
              f"{_cell([x for r in rs for x in r['first_step']])} | "
              f"{_cell([r['wall'] for r in rs])} | "
              f"{', '.join(str(r['verify']['steps_compared']) for r in rs)} | "
              f"{'yes' if all(r['verify']['ok'] for r in rs) else 'NO'} |")


if __name__ == "__main__":
    main()
