"""What the stand-in contract costs a step: every slice host answers before a step counts.

One process, 8 CPU devices as 4 slices x 2 (the trainer tests' layout), ``HOSTS`` real slice-host
processes a slice (``python -m elastix.backends.local.host``, heartbeating every 0.2 s as the
local backend's do). For each preset (``tiny``, ``small``) and each round, two runs of the same
trainer, built as ``elastix-train`` builds it (``program.build_trainer``: the local stand-in
attached), alternating which goes first:

- **seam only**: ``StaticHealth``: no hosts to ask; the step's fault seam alone (what a plain
  CPU run has, and what every step cost before the contract);
- **contract**: ``LocalHeartbeatHealth`` fed by the real hosts: each step, and each host copy,
  counts only once every host of the mesh has answered a ping sent after its result exists.

Step = median of a run's steps after the first 3 (snapshots every 5 steps, no checkpoints, so
both arms do the same host copies). Also reported: one ``answer`` round trip with the loop idle
(median and p90 of 200). Nothing asserts a timing. From the repo root::

    .venv/bin/python bench/bench_contract.py [--rounds 3] [--steps 60]

``--smoke`` runs the smallest case (``tiny``, one round of 5 steps, 20 round trips): it checks
that the bench runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

from benchcli import smoke_args

from elastix.protocol.heartbeat import new_key  # noqa: E402
from elastix_trainer.config import from_mapping  # noqa: E402
from elastix_trainer.elastic.health import StaticHealth  # noqa: E402
from elastix_trainer.elastic.local.health import LocalHeartbeatHealth  # noqa: E402
from elastix_trainer.obs.events import EventLog  # noqa: E402
from elastix_trainer.program import build_trainer  # noqa: E402

SLICES, HOSTS = 4, 2


def start_hosts(addr: str, key: str) -> list[subprocess.Popen]:
    procs = []
    for s in range(SLICES):
        for h in range(HOSTS):
            env = dict(os.environ, ELASTIX_LOCAL_HEALTH=addr, ELASTIX_SLICE=str(s),
                       ELASTIX_HOST=str(h), ELASTIX_HEARTBEAT_KEY=key)
            procs.append(subprocess.Popen([sys.executable, "-m", "elastix.backends.local.host"],
                                          env=env, stdout=subprocess.DEVNULL))
    return procs


def median_step(preset: str, steps: int, health) -> float:
    cfg = from_mapping(dict(preset=preset, steps=steps, batch_per_device=4, seq_len=64,
                            num_slices=SLICES, snapshot_period=5))
    tr, _ = build_trainer(cfg, EventLog(None), health)
    tr.train(tr.start(range(SLICES)))
    tr.finish()
    return statistics.median(r["seconds"] for r in tr.events.of("step")[3:])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--presets", default="tiny,small", help="comma-separated")
    args = smoke_args(ap, "tiny, one round of 5 steps: checks it runs",
                      rounds=1, steps=5, presets="tiny")
    presets = args.presets.split(",")
    sock_dir = tempfile.mkdtemp(prefix="elastix-bench-")  # 0700, as the supervisor's
    addr, key = f"unix:{sock_dir}/health.sock", new_key()
    health = LocalHeartbeatHealth(addr, SLICES, hosts_per_slice=HOSTS, key=key)
    procs = start_hosts(addr, key)
    try:
        health.wait_for(SLICES, 60)
        roll = health.roll(range(SLICES))
        trips = []
        for _ in range(20 if args.smoke else 200):
            t0 = time.perf_counter()
            assert health.answer(range(SLICES), roll) == {}
            trips.append(time.perf_counter() - t0)
        trips.sort()
        arms = {"seam only": lambda: StaticHealth(SLICES), "contract": lambda: health}
        got: dict[tuple[str, str], list[float]] = {}
        for preset in presets:
            median_step(preset, 8, StaticHealth(SLICES))  # compile once, off the clock
            for r in range(args.rounds):
                order = list(arms) if r % 2 == 0 else list(reversed(arms))
                for arm in order:
                    got.setdefault((preset, arm), []).append(
                        median_step(preset, args.steps, arms[arm]()))
    finally:
        health.close()
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(sock_dir, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"answer round trip, {SLICES} x {HOSTS} hosts, loop idle: median "
          f"{statistics.median(trips) * 1e3:.3f} ms, p90 {trips[int(0.9 * len(trips))] * 1e3:.3f} ms")
    print()
    print("| preset | seam only: median step per round (ms) | contract (ms) | contract ÷ seam, "
          "per round | median ratio |")
    print("|---|---|---|---|---|")
    for preset in presets:
        a, b = got[(preset, "seam only")], got[(preset, "contract")]
        ratios = [y / x for x, y in zip(a, b, strict=True)]
        print(f"| {preset} | {', '.join(f'{x * 1e3:.1f}' for x in a)} | "
              f"{', '.join(f'{y * 1e3:.1f}' for y in b)} | "
              f"{', '.join(f'{q:.3f}' for q in ratios)} | {statistics.median(ratios):.3f} |")
    print(f"\nload average (1 min) at the end: {load:.2f}")


if __name__ == "__main__":
    main()
