"""Goodput's productive time against a ground truth kept beside it (issue 74).

For each copy mode (``sync``, ``staged``, ``overlap``) × steps in flight (1, 4, auto) × fault
(none, a kill, a hang), the trainer itself (``program.assemble``, in this process) runs the same
preset with host snapshots and checkpoints, and ``workload goodput``'s computation
(``elastix.measure.goodput``) reads its events. The truth: the steps goodput counts as
productive (each kept step but a session's first, which compiles) times the same preset's step
*without copies*, measured in this process at the same depth, in a run right before the case's
and one right after it (the mean of their median steps: a shared machine's pace drifts by
tens of per cent over minutes, less between neighbours). Each case reports:

- productive (goodput) against that truth, and the difference in per cent;
- the copies' booked cost (snapshot and checkpoint stall) against their measured cost (the kept
  steps' time less the truth), per copy.

Faults are made in this process, as the trainer's tests make them (``ManualHealth``): a kill
sets the slice down before a step's dispatch (the in-flight steps fail, the recovery restores
the newest copy); a hang holds that dispatch for ``--hang`` seconds first, as a hung host holds
a step until it is declared lost. Both recover in the same process (pause-resume). They need
the local stand-in's devices, which ``program.assemble`` attaches on CPU only: on a chip the
steps of a slice set down go on (nothing fails them), so there the faults are refused (a kill
on a chip is the local backend's, ``docs/benchmarks.md``).

On CPU (here):

    .venv/bin/python bench/bench_goodput_truth.py

On the TPU machine (``.whl-tpu`` carried; bench-1g at the issue's shape):

    . .whl-tpu/install.sh && python3 bench/bench_goodput_truth.py --preset bench-1g \\
      --batch 16 --seq 1024 --steps 100 --snapshot-period 10 --checkpoint-period 50

``--smoke`` runs one tiny case on CPU (checks that the bench runs; times nothing). Prints a
Markdown table for docs/benchmarks.md; nothing asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time

import jax
from benchcli import smoke_args

from elastix.backends.base import EVENTS_FILE, TrainerEvents
from elastix.measure.events import events_of
from elastix.measure.goodput import _step_intervals, goodput
from elastix.protocol import eventspec
from elastix_trainer.config import from_mapping
from elastix_trainer.elastic.health import ManualHealth
from elastix_trainer.obs.events import EventLog
from elastix_trainer.program import assemble
from elastix_trainer.seams import Hooks
from elastix_trainer.train import run_start_event

MODES = ("sync", "staged", "overlap")
DEPTHS = (1, 4, 0)  # 0: auto
FAULTS = ("none", "kill", "hang")


class Fault(Hooks):
    """A kill (the slice down before step ``at``'s dispatch) or a hang (that dispatch held for
    ``hang`` seconds first); the slice is back when the runtime waits for it."""

    def __init__(self, health: ManualHealth, kind: str, at: int, hang: float) -> None:
        self.health, self.kind, self.at, self.hang, self.fired = health, kind, at, hang, False

    def before_dispatch(self, session, n: int) -> None:
        if self.kind == "none" or self.fired or n != self.at:
            return
        self.fired = True
        if self.kind == "hang":
            threading.Event().wait(self.hang)
        self.health.set_down(0)


def run(mapping: dict, fault: str, at: int, hang: float, tmp: str) -> tuple[list[dict], float]:
    """One run of the trainer; its event records and wall seconds."""
    cfg = from_mapping(mapping)
    health = ManualHealth(cfg.num_slices)
    health.on_wait = lambda h, required: h.set_up(*range(h.num_slices))
    events = EventLog(None)
    runtime = assemble(cfg, events, health)
    runtime.trainer.add_hooks(Fault(health, fault, at, hang))
    run_start_event(runtime.trainer, cfg)
    t0 = time.perf_counter()
    outcome = runtime.run()
    wall = time.perf_counter() - t0
    events.emit(eventspec.RUN_END, status=outcome.status, reason=outcome.reason,
                step=outcome.step)
    if outcome.status != "completed":
        raise SystemExit(f"the run failed: {outcome.reason}")
    return list(events.records), wall


def measure(records: list[dict]) -> dict:
    """Goodput's figures for ``records``, and what the truth is measured from."""
    evs, _ = events_of(TrainerEvents(EVENTS_FILE, True, records=records))
    g = goodput(evs)
    kept, _, _ = _step_intervals(evs)
    return {"productive": g.productive_seconds, "kept": len(kept),
            "kept_seconds": sum(b - a for _, a, b in kept) / 1000,
            "stall": g.badput["snapshot stall"] + g.badput["checkpoint stall"],
            "copies": sum(1 for r in records if r["event"] in ("snapshot_taken",
                                                                "checkpoint_committed")),
            "clock": g.clock, "wall": g.wall_seconds,
            "median": statistics.median(r["seconds"] for r in records
                                        if r["event"] == "step" and r["step"] > 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--snapshot-period", type=int, default=5)
    ap.add_argument("--checkpoint-period", type=int, default=20)
    ap.add_argument("--hang", type=float, default=1.0, help="seconds a hang holds a step")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--depths", default=",".join(map(str, DEPTHS)))
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--out", help="append each case's figures here as a JSON line, as it ends "
                                  "(a run cut short keeps what it measured)")
    ap.add_argument("--events-out", help="append each run's event records here, each with its "
                                         "case (``bench_case``), to be read again later")
    args = smoke_args(ap, "one tiny case on CPU (checks that the bench runs)", preset="tiny",
                      batch=1, seq=32, steps=8, snapshot_period=2, checkpoint_period=4,
                      modes="staged", depths="4", faults="kill", hang=0.1)
    modes = args.modes.split(",")
    depths = [int(d) for d in args.depths.split(",")]
    faults = args.faults.split(",")
    if jax.devices()[0].platform != "cpu" and faults != ["none"]:
        raise SystemExit("faults in this process need the local stand-in (CPU only): on a chip "
                         "pass --faults none")
    at = args.steps // 2 + 1  # the fault: before the dispatch of the middle step
    with tempfile.TemporaryDirectory(prefix="elastix-bench-goodput-") as tmp:
        def mapping(mode: str | None, depth: int, label: str) -> dict:
            m = {"preset": args.preset, "steps": args.steps, "batch_per_device": args.batch,
                 "seq_len": args.seq, "num_slices": 1, "steps_in_flight": depth,
                 "checkpoint_dir": f"{tmp}/{label}", "checkpoint_period": 0,
                 "compilation_cache_dir": f"{tmp}/jax-cache"}  # one compile a shape
            if mode is not None:
                m.update(snapshot_period=args.snapshot_period, snapshot_copy=mode,
                         checkpoint_period=args.checkpoint_period)
            return m

        rows = []
        twin: dict[int, float] = {}  # depth -> the last no-copy run's median step

        def baseline(d: int, label: str) -> float:
            twin[d] = measure(run(mapping(None, d, label), "none", at, 0, tmp)[0])["median"]
            return twin[d]

        for d in depths:
            baseline(d, f"base-{d}-0")
            for i, mode in enumerate(modes):
                for j, fault in enumerate(faults):
                    before = twin[d]
                    recs, wall = run(mapping(mode, d, f"{mode}-{d}-{fault}"), fault, at,
                                     args.hang, tmp)
                    m = measure(recs)
                    if args.events_out:
                        with open(args.events_out, "a", encoding="utf-8") as f:
                            for r in recs:
                                f.write(json.dumps({**r, "bench_case": f"{mode}/{d}/{fault}"},
                                                   default=str) + "\n")
                    after = baseline(d, f"base-{d}-{i}-{j}")
                    m["truth_step"] = (before + after) / 2
                    rows.append((mode, d, fault, m))
                    if args.out:
                        with open(args.out, "a", encoding="utf-8") as f:
                            f.write(json.dumps({"mode": mode, "depth": d, "fault": fault,
                                                "base_before": before, "base_after": after,
                                                **m}) + "\n")
    dev = jax.devices()[0]
    print(f"\n{args.preset}, batch {args.batch}, seq {args.seq}, {args.steps} steps, snapshot "
          f"every {args.snapshot_period}, checkpoint every {args.checkpoint_period}, fault "
          f"before step {at} (hang {args.hang:g} s); {dev.platform} ({dev.device_kind})\n")
    print("| copy | in flight | fault | step without copies s | steps counted | productive "
          "(goodput) s | truth s | difference | copies | stall booked a copy s | cost measured "
          "a copy s | clock |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for mode, d, fault, m in rows:
        step = m["truth_step"]
        truth = m["kept"] * step
        per = max(m["copies"], 1)
        cost = (m["kept_seconds"] - truth) / per
        print(f"| {mode} | {'auto' if d == 0 else d} | {fault} | {step:.4f} | {m['kept']} | "
              f"{m['productive']:.3f} | {truth:.3f} | {(m['productive'] - truth) / truth:+.1%} | "
              f"{m['copies']} | {m['stall'] / per:.4f} | {cost:.4f} | {m['clock']} |")


if __name__ == "__main__":
    main()
