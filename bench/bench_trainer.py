"""Trainer core benchmarks (CPU, 8 fake devices as 4 slices x 2), all in one process and one run:

1. steady-state step time (median of the steps after the first 3) for the tiny and small presets;
2. the blocking time of an async Orbax save as a fraction of a step (tiny, save every 5 steps,
   the first save's one-time set-up excluded);
3. save and restore throughput for a ~1 GB state (the bench-1g preset: params + AdamW moments)
   against the disk's own write (fdatasync) and read speed measured in the same run, same dir.

    .venv/bin/python bench/bench_trainer.py [--dir /var/tmp] [--steps 40]

``--smoke`` runs the smallest case (``tiny`` only, 8 steps, the save and restore of the ``tiny``
state instead of ~1 GB): it checks that the bench runs.

Prints Markdown for docs/benchmarks.md. Nothing asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
from benchcli import smoke_args  # noqa: E402

from elastix_trainer.config import from_mapping  # noqa: E402
from elastix_trainer.elastic.health import StaticHealth  # noqa: E402
from elastix_trainer.obs.events import EventLog  # noqa: E402
from elastix_trainer.program import build_trainer  # noqa: E402
from elastix_trainer.state.checkpoint import Checkpointer  # noqa: E402
from elastix_trainer.train import Trainer  # noqa: E402


def step_times(preset: str, steps: int, **extra) -> tuple[float, Trainer]:
    cfg = from_mapping(dict(preset=preset, steps=steps, batch_per_device=4, seq_len=64,
                            num_slices=4, **extra))
    tr, _ = build_trainer(cfg, EventLog(None), StaticHealth(4))  # the step a run compiles
    tr.train(tr.start(range(4)))
    tr.finish()
    secs = [r["seconds"] for r in tr.events.of("step")][3:]
    return statistics.median(secs), tr


def disk_speed(directory: str, nbytes: int) -> tuple[float, float]:
    """MB/s writing (with fdatasync) and reading back one file of ``nbytes``."""
    path = os.path.join(directory, "disk-probe.bin")
    block = os.urandom(16 << 20)
    nbytes = max(1, nbytes // len(block)) * len(block)  # whole blocks, at least one
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(nbytes // len(block)):
            f.write(block)
        f.flush()
        os.fdatasync(f.fileno())
    write = nbytes / (time.perf_counter() - t0) / 1e6
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass
    read = nbytes / (time.perf_counter() - t0) / 1e6
    os.unlink(path)
    return write, read


def save_restore(directory: str, preset: str = "bench-1g") -> dict:
    cfg = from_mapping(dict(preset=preset, steps=1, batch_per_device=1, seq_len=16,
                            num_slices=4))
    tr = Trainer(cfg, EventLog(None))
    session = tr.start(range(4))
    state = session.state
    jax.block_until_ready(state)
    nbytes = sum(x.nbytes for x in jax.tree.leaves(state))
    out = {"state_bytes": nbytes}
    ck_dir = os.path.join(directory, "ckpt")
    ck = Checkpointer(ck_dir, 1, EventLog(None), async_save=False, max_to_keep=5)
    ck.save(1, state, {"next_index": 0})  # pays Orbax's one-time set-up
    saves, restores = [], []
    for step in (2, 3):
        t0 = time.perf_counter()
        ck.save(step, state, {"next_index": 0})
        saves.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        restored, _, _ = ck.restore(step, session.fns.abstract)
        jax.block_until_ready(restored)
        restores.append(time.perf_counter() - t0)
        del restored
    ck.close()
    out["save_s"], out["restore_s"] = min(saves), min(restores)
    out["disk_write_MBps"], out["disk_read_MBps"] = disk_speed(directory, nbytes)
    shutil.rmtree(ck_dir)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None, help="where checkpoints and the disk probe go")
    ap.add_argument("--steps", type=int, default=40)
    ns = smoke_args(ap, "tiny only, 8 steps, a tiny state saved: checks it runs", steps=8)
    big = "tiny" if ns.smoke else "bench-1g"
    with tempfile.TemporaryDirectory(dir=ns.dir, prefix="bench-trainer-",
                                     ignore_cleanup_errors=True) as tmp:
        tiny, _ = step_times("tiny", ns.steps)
        print("| preset | global batch x seq | median step (s) |\n|---|---|---|")
        print(f"| tiny | 32 x 64 | {tiny:.4f} |")
        if not ns.smoke:
            small, _ = step_times("small", ns.steps)
            print(f"| small | 32 x 64 | {small:.4f} |")
        _, tr = step_times("tiny", ns.steps, checkpoint_dir=os.path.join(tmp, "async"),
                           checkpoint_period=5)
        blocking = [r["blocking_seconds"] for r in tr.events.of("checkpoint_committed")][1:]
        steps = [r["seconds"] for r in tr.events.of("step") if r["step"] % 5 != 1][3:]
        step = statistics.median(steps)
        print(f"\nasync save (tiny, every 5 steps, {len(blocking)} saves after the first): "
              f"median blocking {statistics.median(blocking):.4f} s = "
              f"{statistics.median(blocking) / step:.2f} x the median step ({step:.4f} s)")
        r = save_restore(tmp, big)
        gb = r["state_bytes"] / 1e6
        print(f"\n{big} state: {gb:.0f} MB")
        print("| | seconds | MB/s | vs disk |\n|---|---|---|---|")
        print(f"| Orbax save (sync, committed) | {r['save_s']:.2f} | {gb / r['save_s']:.0f} | "
              f"{gb / r['save_s'] / r['disk_write_MBps']:.2f} x write |")
        print(f"| Orbax restore (8 devices) | {r['restore_s']:.2f} | {gb / r['restore_s']:.0f} | "
              f"{gb / r['restore_s'] / r['disk_read_MBps']:.2f} x read |")
        print(f"| disk write + fdatasync | | {r['disk_write_MBps']:.0f} | |")
        print(f"| disk read (just written: page cache) | | {r['disk_read_MBps']:.0f} | |")


if __name__ == "__main__":
    main()
