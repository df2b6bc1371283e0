"""Checkpoint stall: how long ``Checkpointer.save()`` blocks the training loop.

For each layout (slices x CPU devices per slice, as the local backend lays them out: see
``default_devices_per_slice`` in ``cli/elastix/backends/local/plan.py``) a child process with
``XLA_FLAGS=--xla_force_host_platform_device_count=<slices x devices>`` trains the ``tiny`` and
``small`` presets with ``Trainer.train`` and saves every ``--period`` steps, in turn with

- **elastix**: the trainer's ``Checkpointer`` (async save), and
- **orbax**: Orbax's plain async ``CheckpointManager`` (``StandardSave`` of the same state, one
  manager made at the first save, as the Orbax docs show it),

runs interleaved (elastix, orbax, elastix, orbax, ...) in that one process. The wall time of
each ``save()`` call is measured around the call (the first save of a run separately) and set
against the median step time of the same run (steps after the first 3, the step right after a
save excluded). The elastix runs go first, so the process's one-time costs (importing Orbax,
starting TensorStore) fall on elastix's first save of ``tiny``: the worse case for elastix.
The ``blocking_seconds`` the ``checkpoint_committed`` event reports is printed beside the
measured time, so a drift between the two shows. The median of the steps right after a save is
printed last: the write runs beside them (CPU, the GIL), so what a save costs outside ``save()``
shows there.

Nothing asserts a timing. Run by hand from the repo root::

    .venv/bin/python bench/bench_checkpoint_stall.py [--layouts 4x2,2x2] [--rounds 3]

``--smoke`` runs the smallest case (one layout, ``tiny``, one round of 12 steps): it checks
that the bench runs on today's trainer (the suite's slow tier runs it), its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchcli import smoke_args

TARGET = {"tiny": 0.25, "small": 0.05}  # median stall / median step


class PlainOrbax:
    """Orbax's plain async CheckpointManager behind what ``Trainer.train`` and
    ``Trainer.finish`` ask of a checkpointer (``state.checkpoint.Checkpointer``'s face).

    Retention is Orbax's own (the manager's ``max_to_keep``, applied as each save finalises);
    ``retire`` applies the same rule once more to what the manager lists and deletes what it
    finds beyond it, so the trainer's call does what it says (on a healthy run Orbax has left
    nothing, and it returns ``[]``). Orbax's wait has no timeout: ``settle`` waits without one.
    """

    def __init__(self, directory: str, period: int, max_to_keep: int = 3) -> None:
        self.directory, self.period, self.max_to_keep = directory, period, max_to_keep
        self.mgr, self.blocked, self.error = None, [], None

    def due(self, step: int) -> bool:
        return self.period > 0 and step % self.period == 0

    def save(self, step: int, state, data_state: dict, **_) -> None:
        import orbax.checkpoint as ocp

        t0 = time.perf_counter()
        if self.mgr is None:
            self.mgr = ocp.CheckpointManager(
                directory=self.directory,
                options=ocp.CheckpointManagerOptions(max_to_keep=self.max_to_keep, create=True,
                                                     enable_async_checkpointing=True))
        self.mgr.save(step, args=ocp.args.StandardSave(state))
        self.blocked.append(time.perf_counter() - t0)

    def in_flight(self) -> bool:
        return self.mgr is not None and self.mgr.is_saving_in_progress()

    def settle(self, timeout=None) -> bool | None:
        """True once the save in flight committed, False if it failed, None if none was made."""
        if self.mgr is None:
            return None
        try:
            self.mgr.wait_until_finished()
        except Exception as e:  # noqa: BLE001 - a failed save is reported, as the trainer's
            self.error = (str(e).splitlines() or [type(e).__name__])[0]
            return False
        self.error = None
        return True

    def last_error(self) -> str | None:
        return self.error

    def committed_steps(self) -> list[int]:
        return sorted(self.mgr.all_steps()) if self.mgr else []

    def latest_committed(self) -> int | None:
        steps = self.committed_steps()
        return steps[-1] if steps else None

    def retire(self) -> list[int]:
        """Delete the committed steps beyond the newest ``max_to_keep``; returns them."""
        if self.mgr is None or self.in_flight():
            return []
        gone = self.committed_steps()[:-self.max_to_keep]
        for step in gone:
            self.mgr.delete(step)
        return gone

    def close(self) -> None:
        if self.mgr is not None:
            self.mgr.close()


def one_run(kind: str, preset: str, slices: int, steps: int, period: int, tmp: str) -> dict:
    from elastix_trainer.config import from_mapping
    from elastix_trainer.obs.events import EventLog
    from elastix_trainer.train import Trainer

    ckdir = os.path.join(tmp, f"{kind}-{preset}-{time.time_ns()}")
    cfg = from_mapping(dict(preset=preset, steps=steps, batch_per_device=4, seq_len=64,
                            num_slices=slices, checkpoint_dir=ckdir, checkpoint_period=period,
                            max_to_keep=3))
    tr = Trainer(cfg, EventLog(None))
    session = tr.start(range(slices))  # nothing to restore: a fresh directory
    blocked: list[float] = []
    if kind == "orbax":
        tr.ckpt.close()  # the trainer's own checkpointer (its writer thread) is not used
        tr.ckpt = PlainOrbax(ckdir, period)
        blocked = tr.ckpt.blocked
    else:
        save = tr.ckpt.save

        def timed(step, state, data_state, **kw):
            t0 = time.perf_counter()
            save(step, state, data_state, **kw)
            blocked.append(time.perf_counter() - t0)

        tr.ckpt.save = timed
    tr.train(session)
    tr.finish()
    after_save = {s + 1 for s in range(period, steps + 1, period)}
    secs = [r["seconds"] for r in tr.events.of("step") if r["step"] > 3 and
            r["step"] not in after_save]
    # The step after a save runs beside the background write (CPU and the GIL): what the write
    # costs the loop outside save() shows there.
    next_secs = [r["seconds"] for r in tr.events.of("step") if r["step"] in after_save]
    reported = [r["blocking_seconds"] for r in tr.events.of("checkpoint_committed")]
    return {"step": statistics.median(secs), "first": blocked[0], "later": blocked[1:],
            "reported": reported, "next": statistics.median(next_secs)}


def warm_up(preset: str, slices: int) -> None:
    from elastix_trainer.config import from_mapping
    from elastix_trainer.obs.events import EventLog
    from elastix_trainer.train import Trainer

    cfg = from_mapping(dict(preset=preset, steps=3, batch_per_device=4, seq_len=64,
                            num_slices=slices))
    tr = Trainer(cfg, EventLog(None))
    tr.train(tr.start(range(slices)))


def child(args) -> None:
    """One layout, in this process (XLA_FLAGS already set by the parent)."""
    from elastix_trainer.obs.events import quiet_libraries

    quiet_libraries()
    slices = int(args.layout.split("x")[0])
    out = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for preset in args.presets.split(","):
            warm_up(preset, slices)  # compile, without saving: the first save is measured
            runs: dict[str, list[dict]] = {"elastix": [], "orbax": []}
            for _ in range(args.rounds):
                for kind in ("elastix", "orbax"):
                    runs[kind].append(one_run(kind, preset, slices, args.steps, args.period, tmp))
            out[preset] = runs
    print(json.dumps(out))


def _q(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def report(layout: str, data: dict) -> None:
    print(f"\n### {layout} (slices x CPU devices per slice)\n")
    print("| preset | saver | median step (ms) | first save blocks, median of runs (ms) | "
          "first save of the first run (ms) | later saves block, median / p90 (ms) | "
          "median / step | target | event blocking_seconds, median (ms) | "
          "step after a save, median (ms) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for preset, runs in data.items():
        for kind, rs in runs.items():
            step = statistics.median(r["step"] for r in rs)
            later = [x for r in rs for x in r["later"]]
            first = statistics.median(r["first"] for r in rs)
            med = statistics.median(later)
            reported = [x for r in rs for x in r["reported"]]
            rep = f"{statistics.median(reported) * 1e3:.1f}" if reported else "-"
            nxt = statistics.median(r["next"] for r in rs)
            ratio = med / step
            goal = TARGET[preset]
            print(f"| {preset} | {kind} | {step * 1e3:.1f} | {first * 1e3:.1f} "
                  f"({first / step:.2f} steps) | {rs[0]['first'] * 1e3:.1f} | "
                  f"{med * 1e3:.1f} / {_q(later, 0.9) * 1e3:.1f} | "
                  f"{ratio:.3f} | {'met' if ratio <= goal else 'missed'} (<= {goal}) | {rep} | "
                  f"{nxt * 1e3:.1f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layouts", default="4x2,2x2", help="comma-separated SLICESxDEVICES")
    ap.add_argument("--rounds", type=int, default=3, help="runs per saver (interleaved)")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--period", type=int, default=5)
    ap.add_argument("--presets", default="tiny,small", help="comma-separated, of " + str(list(TARGET)))
    ap.add_argument("--dir", default=None, help="where checkpoints go (default: the temp dir)")
    ap.add_argument("--layout", help=argparse.SUPPRESS)  # set in the child
    args = smoke_args(ap, "the smallest case: 2x2, tiny, 1 round of 12 steps (checks it runs)",
                      layouts="2x2", presets="tiny", rounds=1, steps=12)
    if args.layout:
        child(args)
        return 0
    print(f"{time.strftime('%Y-%m-%d %H:%M')} UTC, load average {os.getloadavg()[0]:.2f}, "
          f"{os.cpu_count()} CPUs, every {args.period} steps, {args.steps} steps, "
          f"{args.rounds} runs per saver")
    for layout in args.layouts.split(","):
        s, d = (int(x) for x in layout.split("x"))
        env = dict(os.environ, JAX_PLATFORMS="cpu",
                   XLA_FLAGS=f"--xla_force_host_platform_device_count={s * d}")
        cmd = [sys.executable, __file__, "--layout", layout, "--rounds", str(args.rounds),
               "--steps", str(args.steps), "--period", str(args.period), "--presets", args.presets]
        if args.dir:
            cmd += ["--dir", args.dir]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if out.returncode != 0:  # the child's own traceback says why, not a CalledProcessError
            sys.stderr.write(out.stderr[-6000:])
            raise SystemExit(f"layout {layout}: the measuring process exited {out.returncode}")
        report(layout, json.loads(out.stdout.strip().splitlines()[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
