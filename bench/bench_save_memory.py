"""The host memory a checkpoint's write holds beyond the host copy it writes (issue 58).

A checkpoint is written from a host copy of the state (a snapshot's, or its own). Orbax's numpy
handler deep-copies every host array before it writes it; elastix's manager
(``state.manager.HostCopyRegistry``) writes a read-only host copy as it is. Each case saves one
host copy of a preset's state (numpy arrays shaped as its parameters and optimizer state,
read-only as a JAX array's host copy is) with the checkpointer's own save arguments (uncompressed
chunks of at most ``CHUNK_BYTES``), in a fresh process, and reports the peak resident memory the
save added, as a multiple of the state's bytes, and the save's wall time. The cases alternate,
``--repeats`` times each:

- ``orbax (deep copy)``: the same handler and arguments with Orbax's own numpy handler;
- ``elastix, every write at once``: ``manager.new_manager`` with ``WRITE_WINDOW_BYTES`` None,
  so every array's write starts at once, as Orbax starts them: tensorstore then holds a copy of
  every chunk that is not contiguous in its array;
- ``elastix``: ``manager.new_manager``, what the trainer writes with (at most
  ``WRITE_WINDOW_BYTES`` of arrays written at once).

    python bench/bench_save_memory.py --preset bench-1g --repeats 3

``--smoke`` runs the ``tiny`` preset once (checks that the bench runs; measures nothing). Prints a
Markdown table for docs/benchmarks.md.
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
import threading
import time

from benchcli import smoke_args

from elastix_trainer.state import manager

CASES = ("orbax (deep copy)", "elastix, every write at once", "elastix")


def one(case: str, preset: str, directory: str) -> dict:
    """Save one read-only host copy of ``preset``'s state under ``directory``; the peak RSS
    the save added (sampled every 5 ms) and its seconds."""
    import jax
    import numpy as np
    import orbax.checkpoint as ocp
    import psutil

    from elastix_trainer.config import TrainConfig
    from elastix_trainer.step import OptConfig, init_state
    from elastix_trainer.train import model_config

    model = model_config(TrainConfig(preset=preset))
    shapes = jax.eval_shape(lambda: init_state(model, OptConfig(), 0))

    def host_array(a):
        x = np.full(a.shape, 1, dtype=a.dtype)  # every page touched before the baseline
        x.flags.writeable = False
        return x

    host = jax.tree.map(host_array, shapes)
    nbytes = sum(x.nbytes for x in jax.tree.leaves(host))
    if case.startswith("elastix"):
        if case != "elastix":
            manager.WRITE_WINDOW_BYTES = None
        mgr = manager.new_manager(directory, async_save=False)
    else:
        mgr = ocp.CheckpointManager(
            directory, item_handlers={"state": ocp.PyTreeCheckpointHandler(use_compression=False),
                                      "data": ocp.JsonCheckpointHandler()},
            options=ocp.CheckpointManagerOptions(max_to_keep=None, create=True,
                                                 enable_async_checkpointing=False))
    proc = psutil.Process()
    base = proc.memory_info().rss
    peak, stop = [base], threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.monotonic()
    mgr.save(1, args=manager.save_args(host, {"next_index": 1}), force=True)
    mgr.wait_until_finished()
    seconds = time.monotonic() - t0
    stop.set()
    sampler.join()
    mgr.close()
    return {"case": case, "state_bytes": nbytes, "added": (peak[0] - base) / nbytes,
            "seconds": seconds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="bench-1g")
    ap.add_argument("--repeats", type=int, default=3, help="saves per case, alternating")
    ap.add_argument("--cases", default=";".join(CASES),
                    help="separated by ;, of: " + "; ".join(CASES))
    ap.add_argument("--window-mib", type=int, default=None,
                    help="the elastix case's write window (default: WRITE_WINDOW_BYTES)")
    ap.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)  # a child's one save
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    a = smoke_args(ap, "one save per case of the tiny preset", preset="tiny", repeats=1)
    if a.window_mib is not None:
        manager.WRITE_WINDOW_BYTES = a.window_mib << 20
    if a.case:
        print(json.dumps(one(a.case, a.preset, a.dir)))
        return 0
    root = tempfile.mkdtemp(prefix="elastix-save-memory-")
    cases = [c.strip() for c in a.cases.split(";")]
    if bad := [c for c in cases if c not in CASES]:
        raise SystemExit(f"--cases: unknown {bad}; choose from {list(CASES)}")
    results: dict[str, list[dict]] = {c: [] for c in cases}
    try:
        for i in range(a.repeats):
            for case in cases:
                d = os.path.join(root, f"{i}-{CASES.index(case)}")
                window = [] if a.window_mib is None else ["--window-mib", str(a.window_mib)]
                out = subprocess.run([sys.executable, __file__, "--case", case, "--preset",
                                      a.preset, "--dir", d, *window], capture_output=True,
                                     text=True)
                if out.returncode != 0:
                    raise SystemExit(f"{case}: the save failed:\n{out.stderr[-2000:]}")
                results[case].append(json.loads(out.stdout.strip().splitlines()[-1]))
                shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    nb = results[cases[0]][0]["state_bytes"]
    print(f"\none save of a read-only host copy of {a.preset}'s state ({nb / 2**30:.2f} GiB), "
          f"{a.repeats} per case, alternating, each in a fresh process\n")
    print(f"write window {manager.WRITE_WINDOW_BYTES / 2**20:.0f} MiB\n")
    print("| writer | peak host memory added, x the state (each) | save s (each) |")
    print("|---|---|---|")
    for case in cases:
        rs = results[case]
        added = ", ".join(f"{r['added']:.2f}" for r in rs)
        secs = ", ".join(f"{r['seconds']:.2f}" for r in rs)
        print(f"| {case} | {added} (median {statistics.median(r['added'] for r in rs):.2f}) "
              f"| {secs} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
