"""Elastic runtime benchmarks (CPU, 8 fake devices as 4 slices x 2, tiny preset, global batch
32 x 64 tokens), all in one process and one run:

1. overhead: step time of the trainer's loop under the runtime (events to a file, log lines,
   health checks, hooks; no checkpoints) against a bare loop of the same compiled step (fault
   seam included) on the same data (device_put, step, float(loss)), alternating in blocks of
   10 steps on one session;
2. recovery from a real fault (a slice set down; the next step fails inside XLA) to the next
   completed step, split into detection, cleanup, wait, restore and first step (compile
   included when the mesh is new), for pause-resume (same mesh: compiled step reused) and
   replica-resize (new 3-slice mesh: recompile);
3. steps lost per fault with host snapshots every 2 steps against checkpoints only (every 20),
   faults at steps 16, 34 and 47.

    .venv/bin/python bench/bench_elastic.py [--blocks 30] [--only-overhead]

Prints Markdown for docs/benchmarks.md. Nothing asserts a timing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import logging
import os
import shutil
import statistics
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402

from elastix_trainer.config import from_mapping  # noqa: E402
from elastix_trainer.elastic import ElasticRuntime  # noqa: E402
from elastix_trainer.events import EventLog, setup_logging  # noqa: E402
from elastix_trainer.health import ManualHealth, StaticHealth  # noqa: E402
from elastix_trainer.train import Trainer  # noqa: E402

BASE = dict(preset="tiny", batch_per_device=4, seq_len=64, num_slices=4, warmup_steps=5)


def cfg_for(tmp: str, **kw):
    return from_mapping({**BASE, "checkpoint_dir": os.path.join(tmp, f"ck{time.time_ns()}"), **kw})


def runtime_run(cfg, health, events_path=None, setup=None):
    events = EventLog(events_path)
    tr = Trainer(cfg, events, health)
    rt = ElasticRuntime(tr, health)
    if setup:
        setup(tr, rt, health)
    out = rt.run()
    events.close()
    assert out.status == "completed", out
    return tr, rt


def _bare_block(tr: Trainer, s, steps: int, lag: bool) -> list[float]:
    """The same compiled step on the same data, nothing else: device_put, step, float(loss);
    with ``lag``, the loss of step N is read after step N+1 is dispatched (as the trainer does)."""
    times, t_prev, pending = [], time.monotonic(), None
    for _ in range(steps):
        batch = jax.device_put(tr.data.next_batch(s.global_batch), s.fns.batch_sharding)
        s.state, loss = s.fns.step(s.state, batch)
        s.step += 1
        if lag and pending is None:
            pending = loss
            continue
        float(pending if lag else loss)
        pending = loss if lag else None
        now = time.monotonic()
        times.append(now - t_prev)
        t_prev = now
    if pending is not None:
        float(pending)
        times.append(time.monotonic() - t_prev)
    return times[1:]


def overhead(tmp: str, blocks: int, block: int = 10) -> None:
    """Blocks of ``block`` steps alternate in one process on one session: bare loop, then the
    trainer's loop with the runtime's hooks installed (events to a file, log lines, health
    checks). Fine-grained alternation keeps the shared VM's load drift out of the ratio."""
    cfg = from_mapping({**BASE, "steps": 10**6})
    events = EventLog(os.path.join(tmp, "ev.jsonl"))
    health = StaticHealth(4)
    tr = Trainer(cfg, events, health)
    ElasticRuntime(tr, health)  # installs its per-step hooks, as under run()
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


def recovery(tmp: str, mode: str, precompile: bool = True) -> dict:
    extra = {"elastic_mode": mode, "min_slices": 3} if mode == "replica-resize" else {}
    # A distinct seed per variant: compiled steps are kept per process and config, and the
    # on-demand variant must not find the precompiled variant's.
    cfg = cfg_for(tmp, steps=30, checkpoint_period=10, seed=0 if precompile else 1, **extra)
    fault_at = {}

    during: dict[int, float] = {}  # step -> seconds, while the background compile runs

    def setup(tr, rt, health):
        rt.precompile = precompile

        def after(trainer, n, seconds):
            if rt.precompiling is not None and rt.precompiling.is_alive():
                during[n] = seconds
        tr.after_step.append(after)

        def hook(trainer, n):
            if n == 16 and not fault_at:
                if rt.precompiling is not None:  # the background compile has had its time
                    t0 = time.monotonic()
                    rt.precompiling.join()
                    fault_at["waited"] = time.monotonic() - t0
                fault_at["t"] = time.time()
                health.set_down(3)
        tr.before_step.append(hook)
        if mode == "pause-resume":
            health.on_wait = lambda h, r: h.set_up(3)

    tr, _ = runtime_run(cfg, ManualHealth(4), setup=setup)
    ev = tr.events
    first = ev.of("elastic_first_step")[0]
    restored = ev.of("elastic_restored")[0]
    to_first = _ts(first) - _ts(restored)  # the step's compile (or not), then the step
    # A normal step on the same (new) mesh: the steps after the first one (median).
    normal = statistics.median(r["seconds"] for r in ev.of("step")[-(30 - first["step"]):])
    det = ev.of("elastic_detected")[0]
    return {"detection": _ts(det) - fault_at["t"],
            "cleanup": ev.of("elastic_cleanup_done")[0]["seconds"],
            "wait": ev.of("elastic_slices_ready")[0]["seconds"],
            "restore": ev.of("elastic_restored")[0]["seconds"],
            "first step": first["seconds"],
            "total": _ts(first) - fault_at["t"],
            "steps lost": det["last_step"] - ev.of("elastic_restored")[0]["step"],
            "restored → first step": to_first,
            "÷ normal step": to_first / normal,
            "waited for precompile": fault_at.get("waited", 0.0),
            "step while precompiling": statistics.median(during.values()) if during else 0.0}


def steps_lost(tmp: str, snapshot_period: int) -> list[int]:
    cfg = cfg_for(tmp, steps=55, checkpoint_period=20, snapshot_period=snapshot_period,
                  max_slice_losses=5)
    faults = [16, 34, 47]

    def setup(tr, rt, health):
        def hook(trainer, n):
            if faults and n == faults[0] and rt.recoveries == 3 - len(faults):
                faults.pop(0)
                health.set_down(2)
        tr.before_step.append(hook)
        health.on_wait = lambda h, r: h.set_up(2)

    tr, _ = runtime_run(cfg, ManualHealth(4), setup=setup)
    dets, rest = tr.events.of("elastic_detected"), tr.events.of("elastic_restored")
    return [d["last_step"] - r["step"] for d, r in zip(dets, rest, strict=True)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=30)
    ap.add_argument("--only-overhead", action="store_true")
    ns = ap.parse_args()
    setup_logging(io.StringIO(), logging.INFO)  # log lines are formatted but not printed
    tmp = tempfile.mkdtemp(prefix="bench-elastic-")
    try:
        overhead(tmp, ns.blocks)
        if ns.only_overhead:
            return
        rows = {m: recovery(tmp, m) for m in ("pause-resume", "replica-resize")}
        rows["replica-resize, compiled on demand"] = recovery(tmp, "replica-resize", False)
        keys = list(rows["pause-resume"])
        print("\n| seconds | " + " | ".join(keys) + " |")
        print("|---" * (len(keys) + 1) + "|")
        for mode, r in rows.items():
            print(f"| {mode} | " + " | ".join(
                str(r[k]) if k == "steps lost" else f"{r[k]:.3f}" for k in keys) + " |")
        ck, snap = steps_lost(tmp, 0), steps_lost(tmp, 2)
        print("\n| recovery source | steps lost per fault (faults at 16, 34, 47) | mean |\n"
              "|---|---|---|")
        print(f"| checkpoints only (every 20) | {ck} | {statistics.mean(ck):.1f} |")
        print(f"| + host snapshots (every 2) | {snap} | {statistics.mean(snap):.1f} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
