"""A boundary copy's device-to-host read, every transfer at once against a window (issue 58).

A sync snapshot and a checkpoint's own copy read the state to host numpy arrays at the step
boundary (``state.snapshot.host_copy``), ``hostcopy.COPY_WINDOW_BYTES`` of transfers in flight
at a time (``state.hostcopy.read_windowed``). This times that read of ``--gib`` GiB on the
default device (arrays of ``--array-mib`` MiB each, float32), with every array's transfer
started first (``device_get``'s way, the trainer's before issue 58's ninth session) and through
each of ``--windows``, the cases alternating, ``--repeats`` times each, in one process. Each read
is of fresh device arrays (the state plus one, the old ones freed first: a second read of the
same arrays would return the copy JAX keeps), its host copy freed before the next.

    . .whl-tpu/install.sh && python3 bench/bench_chip_window.py --gib 6.5 --repeats 2

On CPU devices it measures a memcpy, not a transfer. ``--smoke`` reads 8 MiB once per case
(checks that the bench runs; measures nothing). Prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchcli import smoke_args


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=6.5, help="the bytes read, GiB")
    ap.add_argument("--array-mib", type=int, default=256, help="each array's size, MiB")
    ap.add_argument("--windows", default="512,1024,256",
                    help="comma-separated windows to time, MiB (beside every transfer at once)")
    ap.add_argument("--repeats", type=int, default=2, help="reads per case, alternating")
    a = smoke_args(ap, "8 MiB once per case", gib=8 / 1024, array_mib=1, repeats=1)

    import jax
    import jax.numpy as jnp

    from elastix_trainer.state.hostcopy import read_windowed

    try:
        windows = [int(w) for w in a.windows.split(",") if w.strip()]
    except ValueError:
        raise SystemExit(f"--windows: comma-separated whole MiB, got {a.windows!r}") from None
    if a.gib <= 0 or a.array_mib <= 0 or a.repeats < 1 or any(w <= 0 for w in windows):
        raise SystemExit("--gib, --array-mib, --repeats and each window must be positive")
    n = max(1, round(a.gib * 1024 / a.array_mib))
    elems = (a.array_mib << 20) // 4
    state = [jnp.full((elems,), float(i), jnp.float32) for i in range(n)]
    jax.block_until_ready(state)
    cases: list[tuple[str, int | None]] = [("every transfer at once", None)]
    cases += [(f"window {w} MiB", w << 20) for w in windows]
    seconds: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(a.repeats):
        for name, window in cases:
            fresh = [x + 1 for x in state]
            jax.block_until_ready(fresh)
            del state
            state = fresh
            t = time.perf_counter()
            host = read_windowed(state, window)
            seconds[name].append(time.perf_counter() - t)
            assert float(host[-1][0]) == float(state[-1][0]), "the read is not of this state"
            del host
    size = n * (a.array_mib << 20)
    dev = jax.devices()[0]
    print(f"{n} arrays of {a.array_mib} MiB, {size / 2**30:.2f} GiB, on {dev.platform} "
          f"({dev.device_kind}), {a.repeats} reads a case, alternating")
    print()
    print("| read | seconds (each) | median | GB/s (median) |")
    print("|---|---|---|---|")
    for name, _ in cases:
        med = statistics.median(seconds[name])
        each = ", ".join(f"{s:.3f}" for s in seconds[name])
        print(f"| {name} | {each} | {med:.3f} | {size / 1e9 / max(med, 1e-9):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
