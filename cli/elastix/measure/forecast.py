"""A discrete-event simulation of a training run at a size the user names (issue 52).

``elastix workload advise`` ranks periods with a first-order model; this module plays the run
out instead: failures arrive, recoveries take what the run measured, replacements queue when
the spares run out, and failures overlap (a loss during a recovery, during a restart's start-up,
during a save). Goodput and slice-weighted goodput keep the definitions of
:mod:`elastix.measure.goodput`: productive time is the kept steps' own time, weighted for the
second by the live slices they ran on over the full mesh's.

Pure: no clock, no I/O; the random generator is passed in, so a seed fixes a run.

Checked against Meta's analytical ETTR (Kokolis et al., HPCA 2025, arXiv 2410.21680, "analytical
approximation of E[ETTR]"): ``(1 - N r_f (u0 + dt_cp / 2)) / (1 + w_cp / dt_cp)``, read in a
transcription, not in the paper (where, and what is unverified: ``meta_ettr`` in
tests/measure/test_forecast.py, docs/forecast.md).

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


class _Sim:
    """One run under one policy: the clocks, the slices, and one method per event
    (:func:`simulate` picks the earliest clock and calls its method).

    ``mode`` is run (training), recover (until ``done_at``) or wait (for slices; ``done_at``
    then holds when detection ends); ``kind`` the recovery under way (restart or in-process).
    """

    def __init__(self, c: Costs, sc: Scenario, policy: str, rng: random.Random) -> None:
        self.c, self.sc, self.policy, self.rng = c, sc, policy, rng
        self.full = sc.slices
        self.run = _Run()
        self.in_use, self.spares = sc.slices, sc.spare_slices
        self.repairs: list[float] = []  # a heap of the times failed slices come back
        self.mode, self.kind = "run", ""
        self.run_from, self.done_at, self.after = 0.0, math.inf, 0.0
        self.head_rate = 1.0 / sc.head_mtbf if sc.head_mtbf else 0.0
        self.fail_at = self.next_fail(0.0)
        self.head_at = rng.expovariate(self.head_rate) if self.head_rate else math.inf

    def next_fail(self, now: float) -> float:
        """The next slice failure: the hosts in use are one Poisson stream (memoryless, so
        redrawn whenever the slices in use change)."""
        rate = self.in_use * self.sc.hosts_per_slice / self.sc.host_mtbf
        return now + self.rng.expovariate(rate) if rate > 0 else math.inf

    def needed(self) -> int:
        """Slices the recovery under way waits for."""
        return self.sc.min_slices if self.policy == "replica-resize" \
            and self.kind == "in-process" else self.full

    def stop_running(self, now: float) -> None:
        """Book the training since ``run_from``: the steps done and the saves committed."""
        run = self.run
        done, ck, sn = _progress(self.c, self.sc, run.step, now - self.run_from)
        if done > run.step:
            run.segments.append((run.step, done, self.in_use / self.full))
        if self.in_use < self.full:
            run.fewer += now - self.run_from
        run.step = done
        run.ckpt = ck if ck is not None else run.ckpt
        run.snap = sn if sn is not None else run.snap

    def begin(self, now: float, new_kind: str) -> None:
        """Start (or start over) a recovery; a restart under way stays one."""
        if new_kind == "restart" or self.kind != "restart":
            self.kind = new_kind
        if self.kind == "restart":
            self.after = _sample(self.rng, self.c.restart)
            ready = now
        else:
            self.after = _sample(self.rng, self.c.after_wait)
            ready = now + _sample(self.rng, self.c.before_wait)
        if self.in_use < self.needed():
            self.mode, self.done_at = "wait", ready
        else:
            self.mode, self.done_at = "recover", ready + self.after

    def restart(self, t: float) -> None:
        """Back to the newest checkpoint; the host snapshots die with the controller."""
        _keep(self.run, self.run.ckpt)
        self.run.snap = None
        self.begin(t, "restart")

    def on_head(self, t: float) -> None:
        self.head_at = t + self.rng.expovariate(self.head_rate)
        self.run.restarts += 1
        self.restart(t)

    def on_fail(self, t: float) -> None:
        self.in_use -= 1
        heapq.heappush(self.repairs, t + _sample(self.rng, self.c.replace))
        while self.in_use < self.full and self.spares:
            self.spares, self.in_use = self.spares - 1, self.in_use + 1
        starting = self.mode != "run" and self.kind == "restart"  # lost during a start-up
        if self.policy == "restart" or starting:
            self.run.restarts += not starting  # a start-up lost starts over: one restart
            self.restart(t)
        else:
            if self.mode == "run":  # else lost during a recovery: it starts over, no more lost
                self.run.recoveries += 1
                _keep(self.run, max(self.run.ckpt, self.run.snap or 0))
            self.begin(t, "in-process")
        self.fail_at = self.next_fail(t)

    def on_repair(self, t: float) -> None:
        """A repaired slice joins the run if it lacks one, else becomes a spare."""
        heapq.heappop(self.repairs)
        if self.in_use >= self.full:
            self.spares += 1
            return
        self.in_use += 1
        self.fail_at = self.next_fail(t)
        if self.mode == "wait" and self.in_use >= self.needed():
            self.mode, self.done_at = "recover", max(t, self.done_at) + self.after
        elif self.mode == "run":  # replica-resize grows back: restore and first step
            self.stop_running(t)
            self.kind = "in-process"
            self.mode, self.done_at = "recover", t + _sample(self.rng, self.c.after_wait)

    def on_done(self, t: float) -> None:
        """The recovery ends: training steps again."""
        self.mode, self.kind, self.done_at, self.run_from = "run", "", math.inf, t

    def play(self) -> Outcome:
        end = self.sc.seconds
        while True:
            repair_at = self.repairs[0] if self.repairs else math.inf
            done_at = self.done_at if self.mode == "recover" else math.inf
            t = min(self.fail_at, self.head_at, repair_at, done_at, end)
            if t >= end:
                break
            if self.mode == "run" and t in (self.fail_at, self.head_at):
                self.stop_running(t)
            if t == self.head_at:
                self.on_head(t)
            elif t == self.fail_at:
                self.on_fail(t)
            elif t == repair_at:
                self.on_repair(t)
            else:
                self.on_done(t)
        if self.mode == "run":
            self.stop_running(end)
        run, step = self.run, self.c.step
        prod = sum(b - a for a, b, _ in run.segments) * step
        weighted = sum((b - a) * w for a, b, w in run.segments) * step
        return Outcome(prod / end, weighted / end, run.steps_lost, run.fewer, run.restarts,
                       run.recoveries)


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
    return _Sim(c, sc, policy, rng).play()
