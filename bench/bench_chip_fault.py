"""What a failed step costs on an accelerator chip: the local stand-in's fault seam on a TPU.

The local backend fails a step with an ``io_callback`` that raises (``fault.seam``), compiled
as a program of its own (the prologue) whose zeros feed the step (``step.py``). On CPU a
failing program costs nothing. On a chip the question is what the chip still runs after it, since
a recovery waits for that before it restores the state (``fault.disarm``). Each case dispatches
three steps of a long program back to back, as the loop keeps steps in flight, then reads them
in order, and reports when each result (or error) arrived, how long the cleanup's wait for the
dispatched work took, and, to see whether the chip was left busy or slowed, one healthy step and
one host-to-device copy right after:

- ``healthy``: no step fails (the baseline, measured first and last);
- ``seam inside, 2-3 armed``: the callback inside the step itself, steps 2 and 3 armed when
  dispatched (does a step end early when its own callback raises?);
- ``prologue, 2-3 armed``: the trainer's structure, steps 2 and 3 armed when dispatched;
- ``prologue, 2-3 armed after dispatch``: armed while step 1 runs, before the chip reaches
  steps 2 and 3 (what a cleanup that fails the steps queued behind a failure does).

On the chip (the wheels carried in ``.whl-tpu/``):

    . .whl-tpu/install.sh && python3 bench/bench_chip_fault.py --out $OUT

``--smoke`` runs small shapes on CPU (checks that the bench runs; times nothing). Prints a
Markdown table for docs/benchmarks.md; nothing asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from benchcli import smoke_args
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from elastix_trainer.elastic.local import fault

ROWS = 8  # the prologue's zeros (any shape does: only the callback matters)


class Chip:
    """The programs: a step of ``matmuls`` chained square matmuls of side ``side`` (its state,
    donated), with the seam inside it or as a prologue of its own."""

    def __init__(self, side: int, matmuls: int, copy_mib: int) -> None:
        self.mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("slice", "data"))
        self.side, self.copy_mib = side, copy_mib
        mesh, scale = self.mesh, 1.0 / side

        def compute(x):
            return jax.lax.fori_loop(0, matmuls, lambda i, x: jnp.tanh(x @ x * scale), x)

        def inside(x, step):
            x = x + fault.seam(mesh, step, ROWS)[0].astype(x.dtype)
            x = compute(x)
            return x, jnp.sum(x.astype(jnp.float32))

        def fed(x, offset):
            x = compute(x + offset[0].astype(x.dtype))
            return x, jnp.sum(x.astype(jnp.float32))

        self.inside = jax.jit(inside, donate_argnums=0)
        self.prologue = jax.jit(lambda step: fault.seam(mesh, step, ROWS))
        self.fed = jax.jit(fed, donate_argnums=0)

    def fresh(self) -> jax.Array:
        x = jax.device_put(jnp.full((self.side, self.side), 0.01, jnp.bfloat16),
                           NamedSharding(self.mesh, P()))
        return jax.block_until_ready(x)

    def dispatch(self, how: str, x, n: int):
        step = jnp.int32(n)
        if how == "inside":
            return self.inside(x, step)
        return self.fed(x, self.prologue(step))

    def case(self, label: str, how: str, armed=(), armed_after=(), k: int = 3) -> dict:
        fault.disarm()
        x = self.fresh()
        host = np.ones((self.copy_mib * 2**20 // 4,), np.float32)  # touched before the clock
        t0 = time.monotonic()
        outs = []
        for n in range(1, k + 1):
            fault.arm(n, {0} if n in armed else set())
            try:
                x, m = self.dispatch(how, x, n)
                m.copy_to_host_async()
            except Exception as e:  # noqa: BLE001 - a synchronous failure (CPU)
                m = e
            outs.append(m)
        for n in armed_after:  # the chip is still on step 1: steps 2.. not begun
            fault.arm(n, {0})
        steps = []
        for n, m in enumerate(outs, 1):
            try:
                if isinstance(m, Exception):
                    raise m
                float(np.asarray(m))
                ok = True
            except Exception:  # noqa: BLE001 - the armed steps' errors
                ok = False
            steps.append({"step": n, "ok": ok, "at": time.monotonic() - t0})
        t1 = time.monotonic()
        fault.drain()  # what the cleanup waits for: every computation dispatched
        drained = time.monotonic() - t1
        fault.disarm()
        y = self.fresh()
        t2 = time.monotonic()
        float(np.asarray(self.dispatch("fed", y, 99)[1]))
        after_step = time.monotonic() - t2
        t3 = time.monotonic()
        jax.block_until_ready(jax.device_put(host, jax.devices()[0]))
        after_copy = time.monotonic() - t3
        return {"case": label, "steps": steps, "drain": drained, "step_after": after_step,
                "copy_after": after_copy}


def table(rows: list[dict], copy_mib: int) -> str:
    out = [f"| case | result of steps 1, 2, 3 at (s) | the wait for what was dispatched (s) | "
           f"a healthy step right after (s) | {copy_mib} MiB to the chip right after (s) |",
           "|---|---|---|---|---|"]
    for r in rows:
        res = ", ".join(f"{s['at']:.3f}{'' if s['ok'] else ' failed'}" for s in r["steps"])
        out.append(f"| {r['case']} | {res} | {r['drain']:.4f} | {r['step_after']:.3f} | "
                   f"{r['copy_after']:.3f} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--side", type=int, default=8192, help="the step's square matrix side")
    ap.add_argument("--matmuls", type=int, default=100, help="matmuls a step (about 0.64 s "
                    "on a v5e chip at side 8192)")
    ap.add_argument("--copy-mib", type=int, default=1024, help="the copy to the chip after each "
                    "case (MiB)")
    ap.add_argument("--out", default=None, help="also write fault.json and fault.md here")
    args = smoke_args(ap, "small shapes on CPU: checks the bench runs, times nothing",
                      side=64, matmuls=2, copy_mib=1)
    chip = Chip(args.side, args.matmuls, args.copy_mib)
    chip.case("compile", "inside")
    chip.case("compile", "fed")
    rows = [
        chip.case("healthy", "fed"),
        chip.case("seam inside, 2-3 armed", "inside", armed=(2, 3)),
        chip.case("prologue, 2-3 armed", "fed", armed=(2, 3)),
        chip.case("prologue, 2-3 armed after dispatch", "fed", armed_after=(2, 3)),
        chip.case("healthy", "fed"),
    ]
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}: steps of {args.matmuls} "
          f"matmuls of {args.side}² bf16, three dispatched back to back\n")
    md = table(rows, args.copy_mib)
    print(md)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "fault.json"), "w") as f:
            json.dump(rows, f, indent=1)
        with open(os.path.join(args.out, "fault.md"), "w") as f:
            f.write(md + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
