"""Does a run on a chip start from what the fit check compiled without one?

For each case: the fit check compiles the run's step for the chip's topology with the chip
left alone (``JAX_PLATFORMS=cpu``: the compile-only TPU client) into an empty compilation
cache; the trainer then runs the same flags on the chip with that cache. Beside it, the same
trainer with an empty cache (cold) and again with the cache its own run wrote (warm). Each run
reports the cache's entries before and after (an entry the trainer adds is a program it did
not find) and the seconds from the process's start to its first step's event.

    . .whl-tpu/install.sh && python3 bench/bench_fit_cache.py --out $OUT \\
        --case "--preset bench-1g --batch-per-device 16 --seq-len 1024"

``--smoke`` runs the tiny preset's trainer on CPU, without the fit check (checks the bench
runs). Prints one JSON line a run and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

from benchcli import smoke_args

from elastix.protocol import timefmt


def _entries(path: str) -> int:
    return len([n for n in os.listdir(path) if not n.startswith(".")]) if os.path.isdir(path) \
        else 0


def _first_step(events: str) -> float | None:
    """Seconds from the run's ``run_start`` to its first ``step`` event."""
    start = None
    try:
        with open(events, encoding="utf-8") as f:
            for line in f:
                e = json.loads(line)
                if e.get("event") == "run_start" and start is None:
                    start = timefmt.parse_ms(e["ts"])
                elif e.get("event") == "step" and start is not None:
                    return (timefmt.parse_ms(e["ts"]) - start) / 1000
    except (OSError, ValueError, KeyError):
        return None
    return None


def trainer(flags: list[str], cache: str, work: str, name: str) -> dict:
    events = os.path.join(work, f"{name}.jsonl")
    before = _entries(cache)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "elastix_trainer", *flags, "--steps", "3",
                           "--compilation-cache-dir", cache, "--events-file", events],
                          capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    tail = (proc.stderr.strip().splitlines() or [""])[-1][:200]
    return {"run": name, "rc": proc.returncode, "wall_s": round(wall, 2),
            "start_to_first_step_s": _first_step(events), "entries_before": before,
            "entries_after": _entries(cache), **({"tail": tail} if proc.returncode else {})}


def fit_check(flags: list[str], cache: str, topology: str) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_COMPILATION_CACHE_DIR": cache,
           "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
           "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "elastix_trainer", "fit-check", "--topology",
                           topology, "--slices", "1", "--chips-per-host", "1x1x1", "--",
                           *flags], capture_output=True, text=True, env=env, check=False)
    out = {"run": "fit check (no chip)", "rc": proc.returncode,
           "wall_s": round(time.monotonic() - t0, 2), "entries_after": _entries(cache)}
    if proc.returncode == 0:
        mesh = json.loads(proc.stdout)["meshes"][0]
        out["hbm"] = mesh.get("hbm")
    else:
        out["tail"] = (proc.stderr.strip().splitlines() or [""])[-1][:200]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", default=[],
                    help="the run's flags, one string (repeatable)")
    ap.add_argument("--topology", default="v5e:1x1")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-fit-check", action="store_true", help="trainer runs only")
    args = smoke_args(ap, "the tiny trainer on CPU, no fit check",
                      case=["--preset tiny --batch-per-device 2 --seq-len 64"],
                      no_fit_check=True)
    rows = []
    for case in args.case or ["--preset bench-1g --batch-per-device 16 --seq-len 1024"]:
        flags = shlex.split(case)
        with tempfile.TemporaryDirectory() as work:
            checked, cold = os.path.join(work, "checked"), os.path.join(work, "cold")
            os.makedirs(checked)
            os.makedirs(cold)
            runs = []
            if not args.no_fit_check:
                runs.append(fit_check(flags, checked, args.topology))
                runs.append(trainer(flags, checked, work, "trainer after the fit check"))
            runs.append(trainer(flags, cold, work, "trainer, cold cache"))
            runs.append(trainer(flags, cold, work, "trainer, its own cache"))
        for r in runs:
            r["case"] = case
            print(json.dumps(r), flush=True)
            rows.append(r)
    if args.out:
        with open(os.path.join(args.out, "fit_cache.jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    print("| case | run | start to first step (s) | wall (s) | cache entries before → after |")
    print("|---|---|---|---|---|")
    for r in rows:
        first = r.get("start_to_first_step_s")
        print(f"| {r['case']} | {r['run']} | {'' if first is None else f'{first:.2f}'} | "
              f"{r['wall_s']} | {r.get('entries_before', 0)} → {r['entries_after']} |")


if __name__ == "__main__":
    main()
