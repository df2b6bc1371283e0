"""The state's copies on one accelerator chip: snapshots, checkpoints and restores, against raw
copies of the same bytes measured in the same run.

1. Raw copies of a preset's whole state (the floor): device to host with every array's
   ``copy_to_host_async`` started first, into numpy and into pinned host memory
   (``device_put`` to ``memory_kind="pinned_host"``); host to device from each.
2. The trainer itself (``program.assemble``: its loop, its snapshots, its checkpointer) on
   runs with host snapshots and checkpoints: every step's time from its events, so a copy's
   cost is the steps' time against the median step of the same run, and against the same
   preset's step without copies (``bench_chip.py``'s count, given with ``--reference``).
3. After the snapshot run: restoring its newest snapshot and its newest committed checkpoint
   onto the chip, each against the raw host-to-device copy of the same bytes.

On a machine with the chip (set up as for ``bench_chip.py``), one command:

    . .whl-tpu/install.sh && python3 bench/bench_chip_copies.py

``--in-flight 0,1,0,1`` runs the ``--continuous-checkpointing`` run once per value of the
trainer's ``--steps-in-flight``, in that order, so that the automatic depth and one step in
flight are compared side by side in one process.

``--smoke`` runs the tiny preset on CPU (checks that the bench runs). Prints Markdown for
docs/benchmarks.md; nothing asserts a timing. With ``--out DIR``, each run's events are written
to ``DIR/events-N.jsonl``, for ``elastix workload goodput``, ``advise`` and ``forecast``
``--events``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time

import jax
import numpy as np
from benchcli import smoke_args

from elastix.protocol import eventspec
from elastix_trainer.config import COPY_MODES, from_mapping
from elastix_trainer.elastic.health import StaticHealth
from elastix_trainer.mesh import build_mesh
from elastix_trainer.obs.events import EventLog
from elastix_trainer.program import SettleHeap, assemble
from elastix_trainer.step import abstract_state
from elastix_trainer.train import run_start_event


def h2d_seconds(host: list, shardings: list) -> float:
    """Seconds to place ``host`` (numpy arrays) onto ``shardings``: every ``device_put``
    started, then all waited for (the floor a restore from host memory is held to)."""
    t = time.perf_counter()
    jax.block_until_ready([jax.device_put(h, s) for h, s in zip(host, shardings, strict=True)])
    return time.perf_counter() - t


def raw_copies(state) -> dict:
    """Seconds for the floor copies of ``state`` (a tree of device arrays), each once, its
    host copy freed before the next: a second copy into numpy of the same arrays would read
    the copy JAX keeps of them (0.0002 s for 1.3 GB), and the host's memory must hold a
    7 GB state's copies one at a time (two 7 GB runs at once ran the 40 GB machine out)."""
    leaves = jax.tree.leaves(state)
    out = {"bytes": sum(x.nbytes for x in leaves)}
    t = time.perf_counter()
    for x in leaves:
        x.copy_to_host_async()
    host = [np.asarray(x) for x in leaves]
    out["d2h_numpy"] = time.perf_counter() - t
    out["h2d_numpy"] = h2d_seconds(host, [x.sharding for x in leaves])
    del host
    t = time.perf_counter()
    pinned = jax.block_until_ready([jax.device_put(x, x.sharding.with_memory_kind("pinned_host"))
                                    for x in leaves])
    out["d2h_pinned"] = time.perf_counter() - t
    t = time.perf_counter()
    back = jax.block_until_ready([jax.device_put(p, x.sharding) for p, x in
                                  zip(pinned, leaves, strict=True)])
    out["h2d_pinned"] = time.perf_counter() - t
    del back, pinned
    return out


def restore_parts(tr, step: int, abstract) -> dict:
    """Seconds for each part of a checkpoint's restore, alone, right after the whole one (the
    files are in the page cache for all of them, as for a restore soon after the save):
    reading the step's files into memory (threads, no parsing: the read's floor), checking
    their checksums, Orbax's read onto the chip without the check, and Orbax's read into numpy
    then placed with ``device_put`` (whether its per-shard placement is what costs)."""
    from concurrent.futures import ThreadPoolExecutor

    import orbax.checkpoint as ocp

    from elastix_trainer.state import manifest
    from elastix_trainer.state.restore import read

    step_dir = f"{tr.ckpt.directory}/{step}"
    out = {}
    names = [str(p) for p in pathlib.Path(step_dir).rglob("*") if p.is_file()]

    def slurp(path: str) -> int:
        with open(path, "rb", buffering=0) as f:
            return len(f.read())

    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=8) as pool:
        out["file_bytes"] = sum(pool.map(slurp, names))
    out["files"] = time.perf_counter() - t
    t = time.perf_counter()
    manifest.verify(step_dir)
    out["verify"] = time.perf_counter() - t
    mgr = tr.ckpt._slot.get()
    t = time.perf_counter()
    state, _, _ = read(mgr, tr.ckpt.directory, step, abstract)
    jax.block_until_ready(state)
    out["orbax_device"] = time.perf_counter() - t
    shardings = [x.sharding for x in jax.tree.leaves(state)]
    del state
    as_np = jax.tree.map(lambda x: ocp.RestoreArgs(restore_type=np.ndarray), abstract)
    t = time.perf_counter()
    got = mgr.restore(step, args=ocp.args.Composite(
        state=ocp.args.PyTreeRestore(abstract, restore_args=as_np)))["state"]
    out["orbax_numpy"] = time.perf_counter() - t
    out["h2d_of_that"] = h2d_seconds(jax.tree.leaves(got), shardings)
    del got
    return out


def trainer_run(label: str, mapping: dict, restore: bool, events_file: str | None = None
                ) -> dict:
    """The trainer on ``mapping``; its steps' times, its snapshots and saves, and (``restore``)
    the times to restore its newest snapshot and checkpoint onto the chip, with the raw
    copies of the same state measured right after. ``events_file``: where its events are
    written too (``workload goodput``, ``advise`` and ``forecast`` read them with
    ``--events``)."""
    cfg = from_mapping(mapping)
    events = EventLog(events_file)
    runtime = assemble(cfg, events, StaticHealth(1))
    runtime.trainer.add_hooks(SettleHeap())  # as the program's own process does
    run_start_event(runtime.trainer, cfg)  # its config: the periods advise reads
    t0 = time.perf_counter()
    outcome = runtime.run()
    wall = time.perf_counter() - t0
    events.emit(eventspec.RUN_END, status=outcome.status, reason=outcome.reason,
                step=outcome.step)
    if outcome.status != "completed":
        raise RuntimeError(f"{label}: the run failed: {outcome.reason}")
    steps = events.of("step")
    secs = [e["seconds"] for e in steps[2:]]  # the first steps compile and warm up
    median = statistics.median(secs)
    row = {"label": label, "steps": len(secs), "median_step": median, "sum_steps": sum(secs),
           "throughput_vs_median": median * len(secs) / sum(secs), "wall": wall,
           "max_step": max(secs),
           "snapshots": [(e["step"], round(e["seconds"], 4), round(e.get("copy_seconds") or 0, 4))
                         for e in events.of("snapshot_taken")],
           "saves": [(e["step"], round(e["blocking_seconds"], 4), round(e["seconds"], 3))
                     for e in events.of("checkpoint_committed")]}
    if not restore:
        events.close()
        return row
    tr = runtime.trainer
    mesh = build_mesh(tr.slices, frozenset(tr.slices))
    abstract = abstract_state(tr.model, tr.opt, mesh, tr.cfg.seed)
    snap = tr.snapshots.latest
    t = time.perf_counter()
    state, _ = tr.snapshots.restore(abstract)
    jax.block_until_ready(state)
    row["restore_snapshot"] = {"step": snap.step, "seconds": time.perf_counter() - t,
                               "pinned": isinstance(jax.tree.leaves(snap.host_state)[0],
                                                    jax.Array)}
    row["raw"] = raw_copies(state)
    del state
    newest = tr.ckpt.latest_committed()
    t = time.perf_counter()
    state, _, nbytes = tr.ckpt.restore(newest, abstract)
    jax.block_until_ready(state)
    row["restore_checkpoint"] = {"step": newest, "seconds": time.perf_counter() - t,
                                 "bytes": nbytes, "verified": tr.ckpt.last_verify}
    del state
    row["restore_parts"] = restore_parts(tr, newest, abstract)
    tr.finish()
    events.close()
    return row


def report(rows: list[dict], reference: dict) -> str:
    out = [f"{jax.devices()[0].device_kind}, JAX {jax.__version__}", "",
           "| run | steps | median step (s) | steps' time vs the median | vs the step without "
           "copies | slowest step (s) | snapshots: blocking / copy (s) | saves: blocking (s) |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['label']} | {r['error']} |")
            continue
        ref = reference.get(r["label"].split(" ")[0])
        vs = f"{ref * r['steps'] / r['sum_steps']:.1%}" if ref else "-"
        snaps = ", ".join(f"{b}/{c}" for _, b, c in r["snapshots"][:6]) or "-"
        saves = ", ".join(f"{b}" for _, b, _ in r["saves"][:6]) or "-"
        out.append(f"| {r['label']} | {r['steps']} | {r['median_step']:.4f} | "
                   f"{r['throughput_vs_median']:.1%} | {vs} | {r['max_step']:.3f} | {snaps} | "
                   f"{saves} |")
    for r in rows:
        raw = r.get("raw")
        if not raw:
            continue
        gb = raw["bytes"] / 1e9
        snap, ck = r["restore_snapshot"] or {}, r["restore_checkpoint"]
        out += ["", f"{r['label']}: state {gb:.2f} GB. Raw copies (s): device to host "
                f"{raw['d2h_numpy']:.2f} into numpy, {raw['d2h_pinned']:.2f} into pinned host "
                f"memory; host to device {raw['h2d_numpy']:.2f} from numpy, "
                f"{raw['h2d_pinned']:.2f} from pinned.",
                f"Restore of the snapshot (step {snap.get('step')}, "
                f"{'pinned host memory' if snap.get('pinned') else 'numpy'}): "
                f"{snap.get('seconds', 0):.2f} s ({snap.get('seconds', 0) / raw['h2d_pinned']:.2f}x"
                f" the raw copy from pinned); of the checkpoint (step {ck['step']}, from local "
                f"disk, checksums checked): {ck['seconds']:.2f} s "
                f"({ck['seconds'] / raw['h2d_numpy']:.2f}x the raw copy from numpy)."]
        parts = r.get("restore_parts")
        if parts:
            out.append(f"The checkpoint's restore in parts, each alone (s): its files "
                       f"({parts['file_bytes'] / 1e9:.2f} GB) read into memory {parts['files']:.2f}, "
                       f"checksums {parts['verify']:.2f}, Orbax onto the chip {parts['orbax_device']:.2f}, "
                       f"Orbax into numpy {parts['orbax_numpy']:.2f} + its device_put "
                       f"{parts['h2d_of_that']:.2f}.")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="qwen3-0.6b")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=62)
    ap.add_argument("--snapshot-period", type=int, default=10)
    ap.add_argument("--checkpoint-period", type=int, default=25)
    ap.add_argument("--continuous", default="bench-1g:16:40",
                    help="preset:batch:steps of the --continuous-checkpointing run (empty: none)")
    ap.add_argument("--in-flight", default="0",
                    help="the continuous run's --steps-in-flight, comma-separated: one run each, "
                         "in this order (e.g. 0,1,0,1: the automatic depth against one step, "
                         "alternating; 0 is the trainer's default)")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--copy", default="auto", choices=COPY_MODES,
                    help="the trainer's --snapshot-copy for both runs")
    ap.add_argument("--reference", default="",
                    help="preset=seconds,...: each preset's step without copies (bench_chip.py)")
    ap.add_argument("--out", default=None)
    args = smoke_args(ap, "tiny on CPU: checks that the bench runs", preset="tiny", batch=2,
                      steps=12, snapshot_period=3, checkpoint_period=5, continuous="tiny:2:10",
                      seq=64)
    reference = {k: float(v) for k, v in (kv.split("=") for kv in args.reference.split(",")
                                          if "=" in kv)}
    rows = []
    with tempfile.TemporaryDirectory() as d:
        runs = [(f"{args.preset} b{args.batch}, snapshots every {args.snapshot_period}, "
                 f"checkpoints every {args.checkpoint_period}, {args.copy} copies",
                 dict(preset=args.preset, batch_per_device=args.batch, seq_len=args.seq,
                      steps=args.steps, snapshot_period=args.snapshot_period,
                      checkpoint_dir=f"{d}/snap", checkpoint_period=args.checkpoint_period,
                      snapshot_copy=args.copy),
                 True)]
        if args.continuous:
            preset, batch, steps = args.continuous.split(":")
            depths = [int(x) for x in args.in_flight.split(",")]
            for i, depth in enumerate(depths):
                named = "" if depths == [0] else \
                    f", steps in flight {'auto' if depth == 0 else depth}"
                runs.append((f"{preset} b{batch}, --continuous-checkpointing, {args.copy} "
                             f"copies{named}",
                             dict(preset=preset, batch_per_device=int(batch), seq_len=args.seq,
                                  steps=int(steps), checkpoint_dir=f"{d}/cont{i}",
                                  continuous_checkpointing=True, snapshot_copy=args.copy,
                                  steps_in_flight=depth), False))
        for i, (label, mapping, restore) in enumerate(runs, 1):
            try:
                row = trainer_run(label, mapping, restore,
                                  f"{args.out}/events-{i}.jsonl" if args.out else None)
            except Exception as e:  # noqa: BLE001 - one run's failure is its row
                row = {"label": label, "error": f"{type(e).__name__}: "
                       f"{(str(e).strip().splitlines() or [''])[0][:300]}"}
            print(json.dumps(row, default=str), file=sys.stderr, flush=True)
            if args.out:
                with open(f"{args.out}/copies.jsonl", "a") as f:
                    f.write(json.dumps(row, default=str) + "\n")
            rows.append(row)
    print(report(rows, reference))


if __name__ == "__main__":
    main()

