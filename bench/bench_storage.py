"""Trainer storage costs: bytes read per restore, and what events cost a step.

1. **Bytes read per restore** on a 4-slice CPU mesh (the state replicated over the slices):
   the process's ``read_bytes`` (``/proc/self/io``, what reached the block layer) and ``rchar``
   (every read() call, page cache included) during one ``Checkpointer.restore``, against the
   checkpoint's size on disk. One copy read is the target; the old per-slice read was N copies.
   The checkpoint's files are evicted from the page cache first (``posix_fadvise``, no root
   needed, nobody else's cache touched), so ``read_bytes`` counts.
2. **Events per step**: the time ``EventLog.emit`` holds the training thread for a step event,
   early in a run and after ``--events`` events, with a ``gs://`` path on fake-gcs-server (the
   upload runs on its own thread now; before, every 2 s the whole file was re-uploaded from the
   emitting thread, so the cost grew with the file).

Nothing here asserts a timing. Run by hand from the repo root::

    .venv/bin/python bench/bench_storage.py [--events 5000]

``--smoke`` runs the smallest case (``tiny``, 1000 events): it checks that the bench runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchcli import smoke_args

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fakes"))


def _io() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/io").read_text().splitlines():
        k, v = line.split(":")
        out[k] = int(v)
    return out


def _evict(root: str) -> bool:
    """Evict the files under ``root`` (and only them) from the page cache: the machine is
    shared, and ``/proc/sys/vm/drop_caches`` would empty everyone's cache (and needs root)."""
    try:
        os.sync()
        for d, _, names in os.walk(root):
            for name in names:
                fd = os.open(os.path.join(d, name), os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
        return True
    except OSError:
        return False


def restore_bytes(preset: str) -> None:
    from elastix_trainer.config import from_mapping
    from elastix_trainer.obs.events import EventLog
    from elastix_trainer.state.checkpoint import Checkpointer
    from elastix_trainer.storage import tree_bytes
    from elastix_trainer.train import Trainer

    with tempfile.TemporaryDirectory() as tmp:
        cfg = from_mapping({"preset": preset, "steps": 1, "batch_per_device": 1, "seq_len": 32,
                            "num_slices": 4, "checkpoint_dir": tmp, "checkpoint_period": 1})
        trainer = Trainer(cfg, EventLog(None))
        session = trainer.start(frozenset(trainer.slices))
        ck = Checkpointer(tmp, 1, EventLog(None))
        ck.save(1, session.state, {"next_index": 0})
        ck.settle()
        on_disk = tree_bytes(Path(tmp) / "1")
        ck.restore(1, session.fns.abstract)  # warm-up: libraries paged in, code compiled
        cold = _evict(str(Path(tmp) / "1"))
        before = _io()
        ck.restore(1, session.fns.abstract)
        after = _io()
        ck.close()
        read = after["read_bytes"] - before["read_bytes"]
        rchar = after["rchar"] - before["rchar"]
        print(f"restore, preset {preset}, 4 slices: checkpoint {on_disk:,} bytes on disk; "
              f"read_bytes {read:,} ({read / on_disk:.2f} copies, page cache "
              f"{'evicted' if cold else 'NOT evicted'}); rchar {rchar:,} "
              f"({rchar / on_disk:.2f} copies)")


def events_cost(n: int) -> None:
    from fake_gcs import emulator_env, fake_gcs

    from elastix_trainer.obs.events import EventLog

    with tempfile.TemporaryDirectory() as tmp, fake_gcs(Path(tmp), buckets=("bench",)) as url:
        os.environ.update(emulator_env(url))
        log = EventLog("gs://bench/run/events.jsonl", upload_every=0.5)
        fields = {"seconds": 0.041, "loss": 5.4321, "live_slices": 4,
                  "tflops_per_device": 0.01, "global_batch": 8}
        windows = {}
        for step in range(1, n + 1):
            t = time.perf_counter()
            log.emit("step", step=step, **fields)
            dt = time.perf_counter() - t
            for name, lo in (("first 500", 1), (f"last 500 of {n:,}", n - 499)):
                if lo <= step < lo + 500:
                    windows.setdefault(name, []).append(dt)
            time.sleep(0.001)  # a (very short) step between events: uploads interleave
        uploads = log._uploader.uploads
        t = time.perf_counter()
        log.close()
        closing = time.perf_counter() - t
        for name, xs in windows.items():
            print(f"events emit ({name} step events): median {statistics.median(xs) * 1e6:.0f} us, "
                  f"p99 {statistics.quantiles(xs, n=100)[98] * 1e6:.0f} us")
        size = os.path.getsize(Path(tmp) / "fs" / "bench" / "run" / "events.jsonl") \
            if (Path(tmp) / "fs" / "bench" / "run" / "events.jsonl").exists() else -1
        print(f"uploads during the run: {uploads}; close() {closing:.2f} s; object "
              f"{size:,} bytes")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--events", type=int, default=5000)
    args = smoke_args(ap, "tiny, 1000 events: checks it runs", preset="tiny", events=1000)
    restore_bytes(args.preset)
    events_cost(args.events)
    return 0


if __name__ == "__main__":
    sys.exit(main())
