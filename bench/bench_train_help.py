"""``elastix-train --help``: wall time of the whole process, this tree beside another.

The help used to import JAX (through the model presets) before argparse printed anything.
Each run is a fresh ``python -m elastix_trainer --help``; with ``--baseline DIR`` (a directory
holding another tree's ``elastix_trainer`` package, e.g. ``git archive REV trainer | tar -x``)
the two are timed interleaved (ABAB) so both share the noise of a shared machine.

Run by hand::

    .venv/bin/python bench/bench_train_help.py --runs 10 [--baseline OLD/trainer]

``--smoke`` runs the smallest case (one run): it checks that the bench runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from benchcli import smoke_args


def _once(pythonpath: str | None) -> float:
    env = dict(os.environ)
    if pythonpath:  # before the editable install's finder: that tree's package is imported
        env["PYTHONPATH"] = pythonpath
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "elastix_trainer", "--help"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--baseline", help="directory with another tree's elastix_trainer package")
    ns = smoke_args(ap, "one run: checks it runs", runs=1)
    cases = {"this tree": None} | ({"baseline": ns.baseline} if ns.baseline else {})
    for path in cases.values():
        _once(path)  # warm the page cache
    times: dict[str, list[float]] = {k: [] for k in cases}
    load = os.getloadavg()[0]
    for _ in range(ns.runs):
        for name, path in cases.items():
            times[name].append(_once(path))
    load = (load + os.getloadavg()[0]) / 2
    print(f"load average (1 min, mean of start and end): {load:.1f}; {ns.runs} runs each")
    for name, ts in times.items():
        print(f"{name:10s} median {statistics.median(ts):.3f} s  min {min(ts):.3f} s  "
              f"max {max(ts):.3f} s")


if __name__ == "__main__":
    main()
