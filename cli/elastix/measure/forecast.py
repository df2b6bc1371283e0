"""A discrete-event simulation of a training run at a size the user names (issue 52).

``elastix workload advise`` ranks periods with a first-order model; this module plays the run
out instead: failures arrive, recoveries take what the run measured, replacements queue when
the spares run out, and failures overlap (a loss during a recovery, during a restart's start-up,
during a save). Goodput and slice-weighted goodput keep the definitions of
:mod:`elastix.measure.goodput`: productive time is the kept steps' own time, weighted for the
second by the live slices they ran on over the full mesh's.

Pure: no clock, no I/O; the random generator is passed in, so a seed fixes a run.

Why a plain loop and not SimPy: the run is one process whose next event is always the earliest
of four clocks (the next slice failure, the next controller failure, the next repaired slice,
the end of the current recovery). A ``min`` over them, with a heap for the repairs, is shorter
than SimPy's processes and interrupts, needs no dependency, and is fast enough (the benchmark).
Steps and saves are not events: between failures the run is deterministic, so how far it got
and which saves committed are computed in closed form (:func:`_progress`); a fleet's thousands
of hosts are one superposed Poisson stream at ``in use x hosts per slice / host MTBF``
(memoryless, so redrawn whenever the slices in use change).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import random
from collections.abc import Sequence

POLICIES = ("restart", "pause-resume", "replica-resize")


@dataclasses.dataclass(frozen=True)
class Costs:
    """What a run measured, as the simulation samples it (seconds).

    Recovery costs are samples, one per measured recovery (drawn whole, so a slow restore and
    its slow first step stay together); stalls are medians (a save's stall varies little).
    """

    step: float
    checkpoint_stall: float
    snapshot_stall: float
    before_wait: tuple[float, ...]
    """In-process recoveries: detection + cleanup, before waiting for slices."""
    after_wait: tuple[float, ...]
    """In-process recoveries: restore + first step, once the slices are there."""
    restart: tuple[float, ...]
    """Restarts: a new controller's start-up to its first step (all its phases)."""
    replace: tuple[float, ...]
    """The platform's time to replace a failed slice (samples; one value: a constant)."""


@dataclasses.dataclass(frozen=True)
class Scenario:
    """The training at the size the user names."""

    slices: int
    hosts_per_slice: int
    host_mtbf: float  # seconds, one host's
    head_mtbf: float | None  # seconds, the controller's; None: it never fails
    spare_slices: int
    seconds: float  # how long the run is simulated
    checkpoint_period: int | None  # steps; None: no checkpoints
    snapshot_period: int  # steps; 0: no host snapshots
    min_slices: int  # replica-resize trains on no fewer

    def with_periods(self, checkpoint: int | None, snapshot: int) -> Scenario:
        return dataclasses.replace(self, checkpoint_period=checkpoint, snapshot_period=snapshot)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One simulated run."""

    goodput: float
    slice_weighted_goodput: float
    steps_lost: int
    fewer_slices_seconds: float  # training on fewer slices than the full mesh
    restarts: int
    recoveries: int  # in-process


def _last_multiple(period: int | None, lo: int, hi: int) -> int | None:
    """The largest multiple of ``period`` in ``(lo, hi]``, or None."""
    if not period or hi <= lo:
        return None
    m = hi - hi % period
    return m if m > lo else None


def _count(period: int | None, lo: int, hi: int) -> int:
    """Multiples of ``period`` in ``(lo, hi]``."""
    return hi // period - lo // period if period and hi > lo else 0


def _progress(c: Costs, sc: Scenario, s0: int, elapsed: float
              ) -> tuple[int, int | None, int | None]:
    """Steps done after ``elapsed`` seconds of training from step ``s0``, and the newest
    checkpoint and snapshot that committed (None: none in that stretch).

    A save's stall follows its step (as goodput places it); a failure inside the stall loses
    that save, the step stays done.
    """
    cp, sp = sc.checkpoint_period, sc.snapshot_period

    def t_of(k: int) -> float:  # seconds to finish step s0 + k and its saves
        return (k * c.step + _count(cp, s0, s0 + k) * c.checkpoint_stall
                + _count(sp, s0, s0 + k) * c.snapshot_stall)

    lo, hi = 0, int(elapsed / c.step) + 1  # t_of(hi) > elapsed: stalls only add
    while lo < hi:  # largest k with t_of(k) <= elapsed
        mid = (lo + hi + 1) // 2
        if t_of(mid) <= elapsed:
            lo = mid
        else:
            hi = mid - 1
    saved = s0 + lo
    done = saved + 1 if t_of(lo) + c.step <= elapsed else saved  # its save was cut short
    return done, _last_multiple(cp, s0, saved), _last_multiple(sp, s0, saved)


@dataclasses.dataclass
class _Run:
    """The mutable state of one simulated run (:func:`simulate`)."""

    step: int = 0  # steps kept so far (where training stands or resumes)
    ckpt: int = 0  # newest committed checkpoint (0: the initial state, always restorable)
    snap: int | None = None  # newest host snapshot, in the controller's memory
    segments: list[tuple[int, int, float]] = dataclasses.field(default_factory=list)
    steps_lost: int = 0
    restarts: int = 0
    recoveries: int = 0
    fewer: float = 0.0


def _sample(rng: random.Random, xs: Sequence[float]) -> float:
    return xs[0] if len(xs) == 1 else xs[rng.randrange(len(xs))]


def _keep(run: _Run, upto: int) -> None:
    """Roll back to step ``upto``: later steps are lost (to be re-done)."""
    if run.step > upto:
        run.steps_lost += run.step - upto
    run.step = upto
    while run.segments and run.segments[-1][1] > upto:
        a, b, w = run.segments.pop()
        if a < upto:
            run.segments.append((a, upto, w))


def simulate(c: Costs, sc: Scenario, policy: str, rng: random.Random) -> Outcome:
    """Play one run of ``sc.seconds`` under ``policy`` (one of :data:`POLICIES`).

    - restart: every failure restarts the controller, which restores the newest checkpoint
      once all slices are there (host snapshots die with it).
    - pause-resume: a slice failure is recovered in process, from the newest of snapshot and
      checkpoint, once a replacement is there (a spare at once, else the next repaired slice).
    - replica-resize: as pause-resume when a replacement is ready; else training goes on with
      fewer slices (no fewer than ``min_slices``) and grows back when one is (an in-process
      restore and first step, no step lost).

    A controller failure restarts under every policy. A failure during a recovery starts that
    recovery over from its detection (a restart's start-up too); a repaired slice joins the
    run if it lacks one, else becomes a spare. Spares do not fail (they are idle).
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}")
    full, end = sc.slices, sc.seconds
    run = _Run()
    in_use, spares = full, sc.spare_slices
    repairs: list[float] = []
    t = 0.0
    mode, kind = "run", ""  # mode: run | recover (until done_at) | wait (for slices)
    run_from, done_at, after = 0.0, math.inf, 0.0
    head_rate = 1.0 / sc.head_mtbf if sc.head_mtbf else 0.0

    def next_fail(now: float) -> float:
        rate = in_use * sc.hosts_per_slice / sc.host_mtbf
        return now + rng.expovariate(rate) if rate > 0 else math.inf

    def needed() -> int:
        return sc.min_slices if policy == "replica-resize" and kind == "in-process" else full

    def stop_running(now: float) -> None:
        done, ck, sn = _progress(c, sc, run.step, now - run_from)
        if done > run.step:
            run.segments.append((run.step, done, in_use / full))
        if in_use < full:
            run.fewer += now - run_from
        run.step = done
        run.ckpt = ck if ck is not None else run.ckpt
        run.snap = sn if sn is not None else run.snap

    def begin(now: float, new_kind: str) -> tuple[str, float]:
        """Start (or start over) a recovery: (mode, when it ends)."""
        nonlocal kind, after
        if new_kind == "restart" or kind != "restart":
            kind = new_kind
        if kind == "restart":
            after = _sample(rng, c.restart)
            ready = now
        else:
            after = _sample(rng, c.after_wait)
            ready = now + _sample(rng, c.before_wait)
        if in_use < needed():
            return "wait", ready  # done_at holds when detection ends, until slices come
        return "recover", ready + after

    fail_at = next_fail(0.0)
    head_at = rng.expovariate(head_rate) if head_rate else math.inf
    while True:
        repair_at = repairs[0] if repairs else math.inf
        t = min(fail_at, head_at, repair_at, done_at if mode == "recover" else math.inf, end)
        if t >= end:
            break
        if mode == "run" and t in (fail_at, head_at):
            stop_running(t)
        if t == head_at:
            head_at = t + rng.expovariate(head_rate)
            run.restarts += 1
            _keep(run, run.ckpt)
            run.snap = None
            mode, done_at = begin(t, "restart")
        elif t == fail_at:
            in_use -= 1
            heapq.heappush(repairs, t + _sample(rng, c.replace))
            while in_use < full and spares:
                spares, in_use = spares - 1, in_use + 1
            starting = mode != "run" and kind == "restart"  # lost during a start-up
            if policy == "restart" or starting:
                run.restarts += not starting  # a start-up lost starts over: one restart
                _keep(run, run.ckpt)
                run.snap = None
                mode, done_at = begin(t, "restart")
            else:
                if mode == "run":  # else lost during a recovery: it starts over, no more lost
                    run.recoveries += 1
                    _keep(run, max(run.ckpt, run.snap or 0))
                mode, done_at = begin(t, "in-process")
            fail_at = next_fail(t)
        elif t == repair_at:
            heapq.heappop(repairs)
            if in_use < full:
                in_use += 1
                fail_at = next_fail(t)
                if mode == "wait" and in_use >= needed():
                    mode, done_at = "recover", max(t, done_at) + after
                elif mode == "run":  # replica-resize grows back: restore and first step
                    stop_running(t)
                    kind = "in-process"
                    mode, done_at = "recover", t + _sample(rng, c.after_wait)
            else:
                spares += 1
        else:  # the recovery ends: training steps again
            mode, kind, done_at, run_from = "run", "", math.inf, t
    if mode == "run":
        stop_running(end)
    prod = sum(b - a for a, b, _ in run.segments) * c.step
    weighted = sum((b - a) * w for a, b, w in run.segments) * c.step
    return Outcome(prod / end, weighted / end, run.steps_lost, run.fewer, run.restarts,
                   run.recoveries)
