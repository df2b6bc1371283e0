"""The local backend's stand-in devices: make CPU devices fail the way a lost slice's chips do.

Off Pathways the trainer's devices are this process's CPUs standing in for the slices' chips.
They never fail by themselves, and they go on computing after a slice host process is gone,
where a TPU step that needs a dead slice fails or hangs. ``LocalStandIn`` is the hook object
(``train.Hooks``) that closes that gap, attached only where the devices are stand-ins
(``program.assemble``), so the training loop holds none of this:

- the fault seam: the compiled step starts with ``fault.seam`` (its ``step_prologue``), armed
  before each dispatch from the health source, so a step on a mesh with a slice down fails
  inside XLA with ``DATA_LOSS``, as on Pathways;
- the gate: a step whose slice lost a host before it completed did not complete (it waits for
  the health source to say so, then fails as Pathways would);
- the timeline: which step the run held at a given moment, so work done after a loss dated
  after the fact (a host's exit, its last heartbeat) is not kept (``discard_after``).
"""

from __future__ import annotations

import collections
import time

import jax

from elastix_trainer.elastic.health import HealthSource, lost
from elastix_trainer.elastic.local import fault
from elastix_trainer.obs.events import log
from elastix_trainer.train import Hooks, Session, Trainer

DETECTION_SLACK = 0.5
"""Seconds the gate waits beyond the health source's timeout for the loss to be reported."""


class LocalStandIn(Hooks):
    """The stand-in devices' failure behaviour for ``trainer``, from ``health``.

    Args:
        trainer: the trainer it is attached to (its snapshots and checkpoints are what
            ``discard_after`` forgets).
        health: the slice health the verdicts come from.
    """

    order = 100
    """Last before each dispatch: the verdict is fixed from the health as every other hook
    (a test failing a slice at step 6) left it."""

    step_prologue = staticmethod(fault.seam)

    def __init__(self, trainer: Trainer, health: HealthSource) -> None:
        self.trainer, self.health = trainer, health
        # (monotonic time, step) of every completed or restored step, newest last: which state
        # the run held at a given moment (a slice's loss is dated after the fact).
        self.timeline: collections.deque[tuple[float, int]] = collections.deque(maxlen=100_000)
        self.slice_ids: frozenset[int] = frozenset()  # the mesh of the session running

    def before_dispatch(self, session: Session, n: int) -> None:
        self.slice_ids = session.slice_ids
        fault.arm(n, lost(session.slice_ids, self.health))

    def verify_complete(self, session: Session, n: int, done_at: float) -> None:
        """A step whose slice lost a host before it completed did not complete.

        Once the health source knows a host of this mesh exited (``losses(exact=True)``), this
        waits for the detection (the heartbeat timeout; the fault seam fails the steps
        dispatched meanwhile) and raises as Pathways would.
        """
        gone = self.health.losses(session.slice_ids, exact=True)
        if not gone or min(gone.values()) > done_at:
            return
        deadline = min(gone.values()) + self.health.timeout + DETECTION_SLACK
        while not lost(session.slice_ids, self.health) and time.monotonic() < deadline:
            time.sleep(0.01)
        raise jax.errors.JaxRuntimeError(
            f"DATA_LOSS: slice(s) {sorted(gone)} of the mesh lost a host before step {n} "
            f"completed (elastix local fault seam)")

    def after_complete(self, session: Session, n: int, done_at: float, seconds: float) -> None:
        self.timeline.append((done_at, n))

    def after_restore(self, source: str, step: int) -> None:
        self.timeline.append((time.monotonic(), step))

    def step_at(self, t: float) -> int | None:
        """The step whose state the run held at monotonic time ``t`` (None: before the record)."""
        for when, step in reversed(self.timeline):
            if when <= t:
                return step
        return None

    def known_good(self) -> int | None:
        """The newest step held before every host of the mesh was last known alive
        (``HealthSource.vouched``): a loss found later is dated after it, so
        ``discard_after`` keeps it. -1: none yet."""
        t = self.health.vouched(self.slice_ids)
        if t is None:
            return None
        step = self.step_at(t)
        return -1 if step is None else step

    def discard_after(self, t: float) -> tuple[int, int] | None:
        """Forget the work done after monotonic time ``t``, when a slice was already gone.

        Steps completed after ``t`` ran on the stand-in devices of a dead slice: they are not
        counted (``last_completed`` goes back), and the snapshots and checkpoints of those steps
        are never restored. What counts is when a step *completed*, not when its host copy
        ended: the state of a step completed before ``t`` is the same bytes whenever it is
        copied (a kill 3 ms after step 340 used to drop the snapshot and delete the committed
        checkpoint of 340, whose copies ended after the kill). A committed checkpoint is never
        deleted here: the checkpointer un-commits an in-flight save of a discarded step before
        reporting it committed, and only skips one it already reported. Returns (kept step,
        last step before) when something went back, else None.
        """
        tr = self.trainer
        good = self.step_at(t)
        before = tr.last_completed
        newest_kept = good if good is not None else -1
        for snap in tr.snapshots.drop_newer(newest_kept):
            log.warning("elastix: the host snapshot of step %d holds a step completed after a "
                        "slice was gone: dropped", snap.step)
        if tr.ckpt is not None:
            for step in tr.ckpt.void_newer(newest_kept, since=t):
                log.warning("elastix: the checkpoint of step %d holds a step completed after a "
                            "slice was gone: it is never restored", step)
        if good is None or good >= before:
            return None
        tr.last_completed = good
        log.warning("elastix: steps %d-%d completed after a slice was gone (on the local "
                    "backend's stand-in devices; on TPU they could not have): not kept",
                    good + 1, before)
        return good, before

    def disarm(self) -> None:
        """After a slice loss, once no device can still read a verdict: forget them all."""
        fault.disarm()

    def drain(self) -> None:
        """At the end of a run: await what the steps dispatched, so a failed step's error does
        not resurface in JAX's exit handlers."""
        fault.drain()
