"""A stand-in controller for the local backend's tests: no JAX, same health contract.

It waits for every slice, then "steps" every ``--step-delay`` seconds, printing log lines in the
trainer's format (docs/events.md). When a slice goes missing it prints the slice-down line, waits
for the replacement and goes on, in the same process. Exits 0 after ``--steps`` steps, or with
``--fail-after N`` exits 3 after N steps (a crashing user program; with ``--fail-when FILE``, at
the first step from N on at which FILE exists). With ``--events`` it also
writes the trainer's recovery events (docs/events.md) to ``ELASTIX_EVENTS_FILE``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time

from elastix.protocol import eventspec, timefmt
from elastix_trainer.elastic.local.health import LocalHeartbeatHealth


def log(msg: str) -> None:
    now = dt.datetime.now(dt.timezone.utc)
    print(now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z {msg}", flush=True)


def emit(args, event: str, **fields) -> None:
    if not args.events:
        return
    record = {"ts": timefmt.iso_us(), "event": event, "pid": os.getpid(), **fields}
    with open(os.environ["ELASTIX_EVENTS_FILE"], "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--step-delay", type=float, default=0.1)
    ap.add_argument("--fail-after", type=int, default=None)
    ap.add_argument("--fail-when", default=None)
    ap.add_argument("--events", action="store_true")
    args = ap.parse_args()
    n = int(os.environ["ELASTIX_NUM_SLICES"])
    emit(args, eventspec.RUN_START, num_slices=n, devices=0, config={})
    log(f"controller pid {os.getpid()} slices {n} devices/slice "
        f"{os.environ.get('ELASTIX_DEVICES_PER_SLICE', 'all')} xla {os.environ['XLA_FLAGS']} "
        f"jax {os.environ['JAX_PLATFORMS']} head {os.environ.get('PATHWAYS_HEAD')}")
    health = LocalHeartbeatHealth.from_env(n)
    live = health.wait_for(n, timeout=60)
    log(f"elastix: sufficient slices active: {len(live)} >= {n} (waited 0.000 s)")
    step, recovery = 0, 0
    while step < args.steps:
        live = health.live_slices()
        if len(live) < n:
            recovery += 1
            lost = sorted(set(range(n)) - live)
            log(f"elastix: slice down, retrying (recovery {recovery}, slices lost {lost}, "
                f"last step {step}): DATA_LOSS: slice host heartbeat missing")
            emit(args, eventspec.ELASTIC_DETECTED, recovery=recovery, kind="slice_lost",
                 error="DATA_LOSS: slice host heartbeat missing", last_step=step,
                 live_slices=len(live), lost_slices=lost)
            t0 = time.monotonic()
            live = health.wait_for(n, timeout=60)
            waited = time.monotonic() - t0
            log(f"elastix: sufficient slices active: {len(live)} >= {n} (waited {waited:.3f} s)")
            emit(args, eventspec.ELASTIC_SLICES_READY, recovery=recovery, live_slices=len(live),
                 required_slices=n, seconds=round(waited, 6))
            continue
        time.sleep(args.step_delay)
        step += 1
        log(f"completed step: {step}, seconds: {args.step_delay:.3f}, live slice count: {n}")
        if (args.fail_after is not None and step >= args.fail_after
                and (args.fail_when is None or os.path.exists(args.fail_when))):
            log("user code failed")
            return 3
    health.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
