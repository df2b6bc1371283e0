"""Trainer start-up: process start -> first completed step, cold vs warm compilation cache.

The local quickstart's layout (2 slices x 2 CPU devices, ``--preset tiny``), resuming from a
committed checkpoint as a restarted trainer does. Each run gets a fresh copy of the same
checkpoint (step 2) and trains step 3. Cold: an empty ``--compilation-cache-dir``; warm: one
directory filled by two unmeasured runs first (a fresh start, then a resume). Cold and warm
alternate, ``--runs`` each:

1. ``elastix-train`` as a subprocess, timed from just before ``Popen`` to the ``ts`` of the
   first ``step`` event in its events file (``run_start`` for the set-up part);
2. the same start-up in phases (one more subprocess per run, this file with ``--phases``):
   interpreter + ``import jax``, the trainer's imports, the JAX backend, ``Trainer()``, the
   resume check, building the step (the compile, or the cache read), restore, first step.

    .venv/bin/python bench/bench_startup.py [--runs 5]

``--smoke`` runs the smallest case (one run each, the warm cache filled by one run, not two): it
checks that the bench runs.

Prints Markdown for docs/benchmarks.md. Nothing asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchcli import smoke_args

TRAINER = ["--preset", "tiny", "--num-slices", "2", "--checkpoint-period", "0"]


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("ELASTIX_")}
    e.update(JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=4",
             PYTHONUNBUFFERED="1")
    return e


def _ts(rec: dict) -> float:
    from elastix.protocol.timefmt import parse

    return parse(rec["ts"]).timestamp()


def whole(ckpt: str, cache: str, tmp: str) -> dict[str, float]:
    """One ``elastix-train`` process; seconds from spawn to run_start and to the first step."""
    ck = os.path.join(tmp, f"ck-{time.time_ns()}")
    shutil.copytree(ckpt, ck)
    events = os.path.join(tmp, f"ev-{time.time_ns()}.jsonl")
    t0 = time.time()
    subprocess.run([sys.executable, "-m", "elastix_trainer", *TRAINER, "--steps", "3",
                    "--checkpoint-dir", ck, "--compilation-cache-dir", cache,
                    "--events-file", events], env=env(), check=True, capture_output=True)
    recs = [json.loads(line) for line in open(events, encoding="utf-8")]
    start = next(r for r in recs if r["event"] == "run_start")
    first = next(r for r in recs if r["event"] == "step")
    assert first["step"] == 3, first  # resumed from the copied checkpoint
    return {"run_start": _ts(start) - t0, "first step": _ts(first) - t0}


def phases(ckpt: str, cache: str, tmp: str) -> dict[str, float]:
    ck = os.path.join(tmp, f"ck-{time.time_ns()}")
    shutil.copytree(ckpt, ck)
    t0 = time.time()
    out = subprocess.run([sys.executable, __file__, "--phases", ck, cache, str(t0)], env=env(),
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _child(ck: str, cache: str, t0: float) -> None:
    """The trainer's start-up (elastic.run's order), one mark per phase, as JSON on stdout."""
    marks, last = {}, t0

    def mark(name: str) -> None:
        nonlocal last
        now = time.time()
        marks[name] = round(now - last, 4)
        last = now

    import jax

    mark("interpreter + import jax")
    from elastix_trainer.config import parse_args
    from elastix_trainer.elastic.health import StaticHealth
    from elastix_trainer.mesh import build_mesh
    from elastix_trainer.obs.events import EventLog
    from elastix_trainer.program import build_trainer
    from elastix_trainer.state import compilecache

    mark("trainer imports (orbax, optax, ...)")
    cfg = parse_args([*TRAINER, "--steps", "3", "--checkpoint-dir", ck])  # the same programs
    compilecache.enable(cache)
    jax.devices()
    mark("JAX backend + cache set-up")
    tr, _ = build_trainer(cfg, EventLog(None), StaticHealth(cfg.num_slices))  # as a run's
    mark("Trainer() (data, checkpointer)")
    tr.check_resume()
    mark("resume check (checkpoint metadata)")
    tr.step_fns_for(build_mesh(tr.slices, range(2)))
    mark("build the step (compile or cache)")
    s = tr.start(range(2))
    mark("restore")
    tr.ckpt.close()
    tr.ckpt = None  # step 3 is the last: time the step, not the final save after it
    tr.train(s, until=s.step + 1)
    mark("first step")
    marks["total"] = round(time.time() - t0, 4)
    print(json.dumps(marks))


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--phases":
        _child(sys.argv[2], sys.argv[3], float(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    a = smoke_args(ap, "one run each: checks it runs", runs=1)
    tmp = tempfile.mkdtemp(prefix="bench-startup-")
    try:
        ckpt, warm = os.path.join(tmp, "ckpt"), os.path.join(tmp, "warm-cache")
        subprocess.run([sys.executable, "-m", "elastix_trainer", *TRAINER, "--steps", "2",
                        "--checkpoint-dir", ckpt, "--compilation-cache-dir", warm,
                        "--events-file", os.path.join(tmp, "prime.jsonl")],
                       env=env(), check=True, capture_output=True)
        if not a.smoke:  # resuming compiles a few programs more than starting fresh
            whole(ckpt, warm, tmp)
        rows: dict[str, list[dict]] = {"cold": [], "warm": []}
        parts: dict[str, list[dict]] = {"cold": [], "warm": []}
        for i in range(a.runs):
            for kind in ("cold", "warm"):
                cache = warm if kind == "warm" else os.path.join(tmp, f"cold-{kind}-{i}")
                rows[kind].append(whole(ckpt, cache, tmp))
                if kind == "cold":
                    cache = os.path.join(tmp, f"cold-phases-{i}")
                parts[kind].append(phases(ckpt, cache, tmp))
                print(kind, i + 1, rows[kind][-1], file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(rows, parts, a.runs)


def cold_warm_table(title: str, cold: list[dict], warm: list[dict], digits: int) -> None:
    """A Markdown table: one row per key of the runs' dicts, the cold and warm medians."""
    print(f"\n| {title} | cold | warm |")
    print("|---|---|---|")
    for key in cold[0]:
        print(f"| {key} | {statistics.median([r[key] for r in cold]):.{digits}f} | "
              f"{statistics.median([r[key] for r in warm]):.{digits}f} |")


def report(rows, parts, runs: int) -> None:
    def med(xs):
        return statistics.median(xs)

    print(f"{runs} runs each, cold and warm alternating\n")
    print("| cache | spawn → run_start, median (min–max) s | spawn → first step, median "
          "(min–max) s |")
    print("|---|---|---|")
    for kind, rs in rows.items():
        cells = []
        for key in ("run_start", "first step"):
            xs = [r[key] for r in rs]
            cells.append(f"{med(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})")
        print(f"| {kind} | " + " | ".join(cells) + " |")
    firsts = {k: med([r["first step"] for r in rs]) for k, rs in rows.items()}
    print(f"\nwarm / cold (median first step): {firsts['warm'] / firsts['cold']:.2f}")
    cold_warm_table("phase (median s)", parts["cold"], parts["warm"], digits=3)


if __name__ == "__main__":
    main()
