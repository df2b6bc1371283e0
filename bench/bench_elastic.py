"""Elastic runtime benchmarks (CPU, 8 fake devices as 4 slices x 2, tiny preset, global batch
32 x 64 tokens), all in one process and one run:

1. overhead: step time of the trainer's loop under the runtime (events to a file, log lines,
   health checks, hooks; no checkpoints) against a bare loop of the same compiled step (fault
   seam included) on the same data (device_put, step, read the metrics), alternating in blocks of
   10 steps on one session;
2. recovery from real faults (a slice set down; the next step fails inside XLA) to the next
   completed step, ``--resizes`` faults per run (``--runs`` runs), medians: for pause-resume
   (same mesh: compiled step reused) and replica-resize (4 -> 3 slices, each fault onto a
   3-slice mesh that never ran) with the step precompiled and warmed in the background, only
   precompiled, and compiled on demand. "÷ normal step" divides "restored -> first step" by
   the median of the later steps on the same mesh;
3. steps lost per fault with host snapshots every 2 steps against checkpoints only (every 20),
   faults at steps 16, 34 and 47.

    .venv/bin/python bench/bench_elastic.py [--blocks 30] [--only-overhead | --only-recovery]
        [--runs 1] [--resizes 4]

``--smoke`` runs the smallest case (one block; one fault for pause-resume and one for
replica-resize precompiled and warmed: the other two variants run the same code with the
runtime's flags set otherwise; one fault per steps-lost run): it checks that the bench runs.

Prints Markdown for docs/benchmarks.md. Nothing asserts a timing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import logging
import os
import statistics
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from benchcli import smoke_args  # noqa: E402

from elastix_trainer.config import from_mapping  # noqa: E402
from elastix_trainer.elastic.health import ManualHealth, StaticHealth  # noqa: E402
from elastix_trainer.obs.events import EventLog, setup_logging  # noqa: E402
from elastix_trainer.program import assemble  # noqa: E402
from elastix_trainer.seams import Hooks  # noqa: E402
from elastix_trainer.train import Trainer  # noqa: E402

BASE = dict(preset="tiny", batch_per_device=4, seq_len=64, num_slices=4, warmup_steps=5)


def cfg_for(tmp: str, **kw):
    return from_mapping({**BASE, "checkpoint_dir": os.path.join(tmp, f"ck{time.time_ns()}"), **kw})


def on(trainer: Trainer, **fns) -> None:
    """Attach hooks made of plain functions named as ``Hooks``' methods."""
    hooks = Hooks()
    for name, fn in fns.items():
        setattr(hooks, name, fn)
    trainer.add_hooks(hooks)


def runtime_run(cfg, health, events_path=None, setup=None):
    events = EventLog(events_path)
    rt = assemble(cfg, events, health)  # as elastix-train assembles a run
    tr = rt.trainer
    if setup:
        setup(tr, rt, health)
    out = rt.run()
    events.close()
    assert out.status == "completed", out
    return tr, rt


def _bare_block(tr: Trainer, s, steps: int, lag: bool) -> list[float]:
    """The same compiled step on the same data, nothing else: device_put, step, read the metrics;
    with ``lag``, the loss of step N is read after step N+1 is dispatched (as the trainer does)."""
    times, t_prev, pending = [], time.monotonic(), None
    for _ in range(steps):
        batch = jax.device_put(tr.data.next_batch(s.global_batch), s.fns.batch_sharding)
        s.state, loss = s.fns.step(s.state, batch)  # loss: the step's metrics vector
        s.step += 1
        if lag and pending is None:
            pending = loss
            continue
        np.asarray(pending if lag else loss)  # one read of the metrics, as the trainer
        pending = loss if lag else None
        now = time.monotonic()
        times.append(now - t_prev)
        t_prev = now
    if pending is not None:
        np.asarray(pending)
        times.append(time.monotonic() - t_prev)
    return times[1:]


def overhead(tmp: str, blocks: int, block: int = 10) -> None:
    """Blocks of ``block`` steps alternate in one process on one session: bare loop, then the
    trainer's loop with the runtime's hooks installed (events to a file, log lines, health
    checks). Fine-grained alternation keeps the shared VM's load drift out of the ratio."""
    cfg = from_mapping({**BASE, "steps": 10**6})
    events = EventLog(os.path.join(tmp, "ev.jsonl"))
    tr = assemble(cfg, events, StaticHealth(4)).trainer  # the runtime's hooks, as under run()
    s = tr.start(range(4))
    tr.train(s, until=5)
    _bare_block(tr, s, 5, False)  # warm every path
    sync, piped, under = [], [], []
    for _ in range(blocks):
        sync += _bare_block(tr, s, block, lag=False)
        piped += _bare_block(tr, s, block, lag=True)
        first = s.step + 1
        tr.train(s, until=s.step + block)
        under += [r["seconds"] for r in events.of("step") if r["step"] > first]
    events.close()
    print(f"{blocks} rounds of 3 alternating blocks of {block} steps (first step of each block "
          "excluded)\n")
    print("| loop | median step (s) | mean step (s) | runtime overhead (median / mean) |")
    print("|---|---|---|---|")
    u, um = statistics.median(under), statistics.mean(under)
    for name, xs in (("bare, synchronous (step, float(loss))", sync),
                     ("bare, one step in flight", piped)):
        b, bm = statistics.median(xs), statistics.mean(xs)
        print(f"| {name} | {b:.4f} | {bm:.4f} | {100 * (u / b - 1):+.1f} % / "
              f"{100 * (um / bm - 1):+.1f} % |")
    print(f"| trainer loop under the runtime | {u:.4f} | {um:.4f} | |")


def _ts(rec) -> float:
    return dt.datetime.strptime(rec["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=dt.timezone.utc).timestamp()


def recovery(tmp: str, mode: str, precompile: bool = True, warm: bool | None = None,
             seed: int = 0, resizes: int = 4) -> list[dict]:
    """``resizes`` real faults in one run, one row each. replica-resize loses slice 3, then 2,
    1, 0 (each comes back after 12 steps on the survivors, and the run scales up again), so
    every resize lands on a 3-slice mesh that has never run a step; pause-resume loses the
    same slices and waits for them (same mesh every time)."""
    extra = {"elastic_mode": mode, "min_slices": 3} if mode == "replica-resize" else {}
    # A distinct seed per variant: compiled steps are kept per process and config, and a
    # variant must not find (or run) another's executables.
    cfg = cfg_for(tmp, steps=40 * resizes, checkpoint_period=10, seed=seed, **extra)
    plan = {"k": 0, "next_fault": 16, "since": None, "down": False, "faults": [],
            "compile": []}
    during: list[float] = []  # step seconds while a background compile runs

    def setup(tr, rt, health):
        rt.precompile, rt.warm_up = precompile, warm
        seen = {"thread": None}

        def before(session, n):
            k = plan["k"]
            if k < resizes and not plan["down"] and n >= plan["next_fault"]:
                if rt.precompiling is not None:  # the background compile has had its time
                    rt.precompiling.join()
                    if seen.get("started") is not None:
                        plan["compile"].append(time.monotonic() - seen.pop("started"))
                plan["faults"].append(time.time())
                plan["down"] = True  # until the slice is back (a step in flight still runs)
                health.set_down(3 - k)

        def after(session, n, done_at, seconds):
            if rt.precompiling is not None and rt.precompiling is not seen["thread"]:
                seen["thread"], seen["started"] = rt.precompiling, time.monotonic()
            if rt.precompiling is not None and rt.precompiling.is_alive():
                during.append(seconds)
            k = plan["k"]
            if rt.recoveries == k + 1:  # on the survivors (or the same mesh, pause-resume)
                plan["since"] = (plan["since"] or 0) + 1
                if plan["since"] >= 12:
                    health.set_up(3 - k)
                    plan.update(k=k + 1, next_fault=n + 8, since=None, down=False)
        on(tr, before_dispatch=before)
        on(tr, after_complete=after)
        if mode == "pause-resume":
            health.on_wait = lambda h, r: h.set_up(*range(4))

    tr, _ = runtime_run(cfg, ManualHealth(4), setup=setup)
    rows, recs = [], tr.events.records
    for r, fault_t in enumerate(plan["faults"], start=1):
        det = next(x for x in recs if x["event"] == "elastic_detected" and x["recovery"] == r)
        rest = next(x for x in recs if x["event"] == "elastic_restored" and x["recovery"] == r)
        i = next(i for i, x in enumerate(recs)
                 if x["event"] == "elastic_first_step" and x["recovery"] == r)
        first = recs[i]
        later = []  # the steps after the first on the same mesh, until it changes again
        for x in recs[i + 1:]:
            if x["event"] in ("elastic_resize", "elastic_detected"):
                break
            if x["event"] == "step":
                later.append(x["seconds"])
        normal = statistics.median(later)
        to_first = _ts(first) - _ts(rest)  # the step's compile (or not), then the step
        one = {x["event"]: x for x in recs if x.get("recovery") == r}
        rows.append({"detection": _ts(det) - fault_t,
                     "cleanup": one["elastic_cleanup_done"]["seconds"],
                     "wait": one["elastic_slices_ready"]["seconds"], "restore": rest["seconds"],
                     "first step": first["seconds"], "restored → first step": to_first,
                     "normal step": normal, "÷ normal step": to_first / normal,
                     "total": _ts(first) - fault_t, "steps lost": det["last_step"] - rest["step"]})
    extra = {"background compile": plan["compile"][0] if plan["compile"] else 0.0,
             "step while compiling": statistics.median(during) if during else 0.0}
    return [dict(row, **extra) for row in rows]


def steps_lost(tmp: str, snapshot_period: int, faults: tuple[int, ...] = (16, 34, 47)) -> list[int]:
    cfg = cfg_for(tmp, steps=faults[-1] + 8, checkpoint_period=20,
                  snapshot_period=snapshot_period, max_slice_losses=5)
    faults = list(faults)

    total = len(faults)

    def setup(tr, rt, health):
        def hook(session, n):
            if faults and n == faults[0] and rt.recoveries == total - len(faults):
                faults.pop(0)
                health.set_down(2)
        on(tr, before_dispatch=hook)
        health.on_wait = lambda h, r: h.set_up(2)

    tr, _ = runtime_run(cfg, ManualHealth(4), setup=setup)
    dets, rest = tr.events.of("elastic_detected"), tr.events.of("elastic_restored")
    return [d["last_step"] - r["step"] for d, r in zip(dets, rest, strict=True)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=30)
    ap.add_argument("--only-overhead", action="store_true")
    ap.add_argument("--only-recovery", action="store_true")
    ap.add_argument("--runs", type=int, default=1, help="recovery runs per variant")
    ap.add_argument("--resizes", type=int, default=4, help="faults per recovery run (1-4)")
    ns = smoke_args(ap, "one block, one fault per run: checks it runs", blocks=1, runs=1,
                    resizes=1)
    faults = (16,) if ns.smoke else (16, 34, 47)
    setup_logging(io.StringIO(), logging.INFO)  # log lines are formatted but not printed
    with tempfile.TemporaryDirectory(prefix="bench-elastic-", ignore_cleanup_errors=True) as tmp:
        if not ns.only_recovery:
            overhead(tmp, ns.blocks)
        if ns.only_overhead:
            return
        variants = {  # name -> recovery() arguments; a seed of its own each (see recovery)
            "pause-resume (same mesh)": dict(mode="pause-resume", seed=0),
            "replica-resize, precompiled + warmed": dict(mode="replica-resize", seed=0),
            "replica-resize, precompiled, not warmed": dict(mode="replica-resize", warm=False,
                                                            seed=2),
            "replica-resize, compiled on demand": dict(mode="replica-resize", precompile=False,
                                                       seed=1),
        }
        if ns.smoke:  # each mode once: the other two differ only by the runtime's flags
            variants = dict(list(variants.items())[:2])
        rows: dict[str, list[dict]] = {name: [] for name in variants}
        for run in range(ns.runs):  # variants alternate, so load drift hits each alike
            for name, kw in variants.items():
                kw = dict(kw, seed=kw["seed"] + 10 * run)
                rows[name] += recovery(tmp, resizes=ns.resizes, **kw)
        keys = list(rows["pause-resume (same mesh)"][0])
        print(f"\nmedians over {ns.runs} run(s) x {ns.resizes} faults per variant; load average "
              f"{os.getloadavg()[0]:.1f} at the end\n")
        print("| seconds (median) | n | " + " | ".join(keys) + " |")
        print("|---" * (len(keys) + 2) + "|")
        for name, rs in rows.items():
            med = {k: statistics.median(r[k] for r in rs) for k in keys}
            print(f"| {name} | {len(rs)} | " + " | ".join(
                f"{med[k]:g}" if k == "steps lost" else f"{med[k]:.3f}" for k in keys) + " |")
        ratios = {name: [round(r["÷ normal step"], 2) for r in rs] for name, rs in rows.items()}
        print("\n" + "\n".join(f"- {name}: ÷ normal step per fault {v}"
                                for name, v in ratios.items()))
        ck, snap = steps_lost(tmp, 0, faults), steps_lost(tmp, 2, faults)
        at = ", ".join(map(str, faults))
        print(f"\n| recovery source | steps lost per fault (faults at {at}) | mean |\n"
              "|---|---|---|")
        print(f"| checkpoints only (every 20) | {ck} | {statistics.mean(ck):.1f} |")
        print(f"| + host snapshots (every 2) | {snap} | {statistics.mean(snap):.1f} |")


if __name__ == "__main__":
    main()
