"""Restore throughput: ``Checkpointer.restore`` against reading the same files raw.

One process, one slice of CPU devices (the local backend's layout for a one-slice workload:
``default_devices_per_slice(1, ...)`` = 2 devices). The ``bench-1g`` state (params + AdamW
moments, ≈ 1.3 GB) is saved once with the ``Checkpointer``; then, interleaved, for each page
cache state (cold first, then warm) and each round:

- **raw**: every file under the step directory read sequentially into one reused 16 MiB buffer
  (what ``cat`` does; the issue's baseline, and the one the target is judged against),
- **fresh**: the same files read sequentially into freshly mapped memory the size of the state
  (a second, labelled baseline: a restore must at least fill pages it never touched, and on a
  warm cache that, not the copy, is the cost), and
- **restore**: ``Checkpointer.restore`` onto the mesh's target shardings, until the arrays are
  ready (``jax.block_until_ready``): it checks every file against the checksums recorded at its
  commit (``manifest.verify``) *beside* Orbax's read, so each byte comes from the disk once;
- **verify, then restore**: the same check run first and Orbax's read after it, as restores
  did before (each file read twice, the second time from the page cache), for the side-by-side
  figure,

rotating which goes first. The check's own seconds are reported beside the restore's. GB/s is
the checkpoint's bytes on disk over the wall time; what a
read produced is freed after the clock stops (the raw read frees nothing inside its time). The
CPU seconds (user, system) and minor page faults of each timed read are reported beside it.
"Cold" evicts the checkpoint's files from the page cache before each timed read (``sync``, then
``posix_fadvise(POSIX_FADV_DONTNEED)`` on every file): only these files, so that engineers
sharing the machine keep their caches (``/proc/sys/vm/drop_caches`` would drop theirs, and
their benchmarks' warm numbers with them). Nothing asserts a timing. From the repo root::

    .venv/bin/python bench/bench_restore.py [--dir /var/tmp] [--rounds 3]

``--smoke`` runs the smallest case (``--preset tiny``, one round): it checks that the bench runs.
"""

from __future__ import annotations

import argparse
import mmap
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time

from benchcli import smoke_args

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")


def files_under(path: str) -> list[str]:
    return sorted(os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs)


def drop_cache(files: list[str]) -> str:
    """Evict ``files`` (and only them) from the page cache; returns how."""
    os.sync()
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return "fadvise"


def raw_read(files: list[str]) -> int:
    buf = bytearray(16 << 20)
    view, total = memoryview(buf), 0
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(view):
                total += n
    return total


def fresh_read(files: list[str], nbytes: int) -> mmap.mmap:
    """The files read into one anonymous mapping of ``nbytes``, never touched before: each page
    is faulted in (and zeroed by the kernel) as the read fills it, as a restore's must be."""
    out = mmap.mmap(-1, nbytes)
    view, off = memoryview(out), 0
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(view[off:off + (16 << 20)]):
                off += n
    view.release()
    return out


def _incompressible(state):
    """A trained state's moments are not zeros: fresh AdamW moments would be stored as almost
    nothing (chunks equal to the fill value are skipped) and flatter the restore."""
    import jax
    import jax.numpy as jnp

    def noisy(s):
        leaves, tree = jax.tree.flatten(s)
        keys = jax.random.split(jax.random.key(0), len(leaves))
        return jax.tree.unflatten(tree, [
            x + 1e-3 * jax.random.normal(k, x.shape, x.dtype)
            if jnp.issubdtype(x.dtype, jnp.floating) else x for x, k in zip(leaves, keys, strict=True)])

    shardings = jax.tree.map(lambda x: x.sharding, state)
    return jax.jit(noisy, out_shardings=shardings)(state)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=None, help="where the checkpoint goes (default: temp dir)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--preset", default="bench-1g")
    args = smoke_args(ap, "tiny, one round: checks it runs", preset="tiny", rounds=1)

    import jax

    from elastix_trainer.config import from_mapping
    from elastix_trainer.obs.events import EventLog, quiet_libraries
    from elastix_trainer.state.checkpoint import Checkpointer
    from elastix_trainer.storage import tree_bytes
    from elastix_trainer.train import Trainer

    quiet_libraries()
    tmp = tempfile.mkdtemp(dir=args.dir, prefix="bench-restore-")
    try:
        cfg = from_mapping(dict(preset=args.preset, steps=1, batch_per_device=1, seq_len=16,
                                num_slices=1))
        tr = Trainer(cfg, EventLog(None))
        session = tr.start(range(1))
        abstract = session.fns.abstract
        state = _incompressible(session.state)
        del session, tr
        ck = Checkpointer(os.path.join(tmp, "ck"), 1, EventLog(None), async_save=False)
        ck.save(1, state, {"next_index": 0})
        del state
        step_dir = os.path.join(tmp, "ck", "1")
        files = files_under(step_dir)
        nbytes = tree_bytes(step_dir)
        jax.block_until_ready(ck.restore(1, abstract)[0])  # warm-up: code paged in, compiled

        verify: dict[str, list[tuple[float, float]]] = {}  # cache -> (verify s, restore s)

        def restore():
            t0 = time.perf_counter()
            out = jax.block_until_ready(ck.restore(1, abstract)[0])
            assert ck.last_verify[0], "the bench's checkpoint has no checksums"
            verify.setdefault(cache, []).append((ck.last_verify[1], time.perf_counter() - t0))
            return out

        def verify_then_restore():
            from elastix_trainer.state.restore import read

            assert ck.verify(1), "the bench's checkpoint has no checksums"
            return jax.block_until_ready(read(ck._slot.get(), ck.directory, 1, abstract)[0])

        reads = (("raw", lambda: raw_read(files)), ("fresh", lambda: fresh_read(files, nbytes)),
                 ("restore", restore), ("verify, then restore", verify_then_restore))
        times: dict[tuple[str, str], list[float]] = {}
        usage: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
        how = "warm"
        for cache in ("cold", "warm"):
            if cache == "warm":
                raw_read(files)  # fill the page cache
            for i in range(args.rounds):
                for name, fn in reads[i % len(reads):] + reads[:i % len(reads)]:
                    if cache == "cold":
                        how = drop_cache(files)
                    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
                    out = fn()
                    t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
                    del out  # freed outside the clock
                    times.setdefault((cache, name), []).append(t1 - t0)
                    usage.setdefault((cache, name), []).append(
                        (r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime,
                         r1.ru_minflt - r0.ru_minflt))
        ck.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"{time.strftime('%Y-%m-%d %H:%M')} UTC, load average {os.getloadavg()[0]:.2f}, "
          f"{os.cpu_count()} CPUs, {len(jax.devices())} CPU devices (one slice), preset "
          f"{args.preset}: {nbytes / 1e9:.2f} GB in {len(files)} files; cold = {how}; "
          f"{args.rounds} rounds, interleaved\n")
    print("| page cache | raw read GB/s | fresh-memory read GB/s | restore GB/s | restore / raw "
          "| restore / fresh (target >= 0.9 cold) | verify, then restore: GB/s, / fresh |")
    print("|---|---|---|---|---|---|---|")

    def gbs(xs: list[float]) -> str:
        rates = sorted(nbytes / x / 1e9 for x in xs)
        return f"{statistics.median(rates):.2f} ({rates[0]:.2f}-{rates[-1]:.2f})"

    def ratio(base: list[float], rest: list[float]) -> float:  # median of the rounds' ratios
        return statistics.median(b / r for b, r in zip(base, rest, strict=True))

    for cache in ("cold", "warm"):
        raw, fresh, rest, old = (times[(cache, n)] for n in
                                 ("raw", "fresh", "restore", "verify, then restore"))
        print(f"| {cache} | {gbs(raw)} | {gbs(fresh)} | {gbs(rest)} | {ratio(raw, rest):.2f} | "
              f"{ratio(fresh, rest):.2f} | {gbs(old)}, {ratio(fresh, old):.2f} |")
    print("\nGB/s: median (min-max) of the rounds. Per timed read, medians of the rounds:\n")
    print("| page cache | read | user CPU s | system CPU s | minor page faults |")
    print("|---|---|---|---|---|")
    for (cache, name), xs in usage.items():
        user, system, faults = (statistics.median(x[i] for x in xs) for i in range(3))
        print(f"| {cache} | {name} | {user:.2f} | {system:.2f} | {faults:,.0f} |")
    print("\nChecksum verification beside each restore's read (crc32c of every file, medians "
          "of the rounds; overlapped, not added):\n")
    print("| page cache | restore s | verification s (beside it) | verification / restore |")
    print("|---|---|---|---|")
    for cache in ("cold", "warm"):
        pairs = verify[cache]
        v, r = (statistics.median(x[i] for x in pairs) for i in range(2))
        share = statistics.median(a / b for a, b in pairs)
        print(f"| {cache} | {r:.3f} | {v:.3f} | {share:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
