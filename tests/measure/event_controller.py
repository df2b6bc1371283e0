"""A JAX-free controller for the measurement driver's tests, run by the real local backend.

It follows docs/events.md: events to ``$ELASTIX_EVENTS_FILE`` (unless ``--no-events``) and the same
events as log lines on stdout. It steps every ``--step-delay`` s, "commits a checkpoint" every
``--ckpt-every`` steps, and when a slice's heartbeats stop it recovers in the same process:
detected, cleanup, wait for slices, restore the last checkpoint step, first step.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time

from measure_helpers import log_line

from elastix_trainer.elastic.local.health import LocalHeartbeatHealth


class Out:
    def __init__(self, path: str | None) -> None:
        self.f = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115

    def __call__(self, event: str, **kw) -> None:
        now = dt.datetime.now(dt.timezone.utc)
        rec = {"ts": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "event": event, "pid": os.getpid(),
               **kw}
        if self.f:
            self.f.write(json.dumps(rec) + "\n")
            self.f.flush()
        print(log_line(rec), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100000)
    ap.add_argument("--step-delay", type=float, default=0.05)
    ap.add_argument("--ckpt-every", type=int, default=5)
    ap.add_argument("--ckpt-at", type=int, default=None, help="also commit at this one step")
    ap.add_argument("--no-events", action="store_true")
    ap.add_argument("--until-file", default=None,
                    help="also stop (completed) at the first step after this file exists")
    ap.add_argument("--garble-when", default=None,
                    help="once this file exists, follow each elastic_detected with a line that "
                         "is JSON but no event (a reader's damage after a fault)")
    args = ap.parse_args()
    out = Out(None if args.no_events else os.environ["ELASTIX_EVENTS_FILE"])
    n = int(os.environ["ELASTIX_NUM_SLICES"])
    out("run_start", num_slices=n, devices=n * 2, config={})
    health = LocalHeartbeatHealth.from_env(n)
    health.wait_for(n, timeout=60)
    step, ckpt, recovery, first_after = 0, 0, 0, False
    while step < args.steps and not (args.until_file and os.path.exists(args.until_file)):
        if len(health.live_slices()) < n:
            recovery += 1
            out("elastic_detected", recovery=recovery, kind="slice_lost", error="DATA_LOSS: gone",
                last_step=step, live_slices=len(health.live_slices()),
                lost_slices=sorted(set(range(n)) - health.live_slices()))
            if args.garble_when and os.path.exists(args.garble_when) and out.f:
                out.f.write('{"not": "an event"}\n')
                out.f.flush()
            out("elastic_cleanup_done", recovery=recovery, seconds=0.001)
            t0 = time.monotonic()
            health.wait_for(n, timeout=60)
            out("elastic_slices_ready", recovery=recovery, live_slices=n, required_slices=n,
                seconds=time.monotonic() - t0)
            out("elastic_restored", recovery=recovery, source="checkpoint", step=ckpt,
                bytes=4096, seconds=0.0)
            step, first_after = ckpt, True
            continue
        t0 = time.monotonic()
        time.sleep(args.step_delay)
        step += 1
        secs = time.monotonic() - t0
        out("step", step=step, seconds=secs, loss=1.0 / step, live_slices=n,
            tflops_per_device=0.0, global_batch=8)
        if first_after:
            out("elastic_first_step", recovery=recovery, step=step, seconds=secs)
            first_after = False
        if step % args.ckpt_every == 0 or step == args.ckpt_at:
            out("checkpoint_save_started", step=step)
            out("checkpoint_committed", step=step, seconds=0.001, bytes=4096,
                blocking_seconds=0.001)
            ckpt = step
    out("run_end", status="completed", reason="steps", step=step)
    health.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
