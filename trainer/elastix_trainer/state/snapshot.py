"""Host-memory snapshots of the train state, taken every K steps (K << checkpoint period).

Why our own and not Orbax's ``Snapshotter`` (orbax.checkpoint.experimental.v1 ...pathways):
that one keeps per-replica copies in the TPU hosts' *pinned host memory* through pathwaysutils'
experimental split/concatenate-by-mesh-axis ops, which need Pathways (no CPU path to test), and
it silently skips a snapshot when the previous one is still copying, so which step a recovery
returns to would depend on timing. Ours copies to the controller's RAM with ``device_get`` at a
step boundary: deterministic (exact-match recovery tests), works on CPU and Pathways alike,
stores the data-iterator position with the arrays, and restores onto any mesh through the
target shardings (a snapshot taken on 4 slices restores onto 3). The cost is a blocking copy per
snapshot, measured in docs/benchmarks.md; for multi-GiB states on Pathways the Orbax snapshotter
is the better fit (the copy stays on the TPU hosts).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import jax
import numpy as np

from elastix.protocol import eventspec
from elastix_trainer.obs.events import EventLog


@dataclasses.dataclass
class Snapshot:
    """One host copy."""

    step: int
    host_state: Any  # pytree of numpy arrays
    data_state: dict
    nbytes: int
    taken_at: float = 0.0  # monotonic time the copy ended (work after a slice's loss is void)


def host_copy(state: Any) -> Any:
    """``state`` (device arrays) copied to host memory as numpy arrays; a checkpoint writes the
    same copy when a snapshot of its step was just taken."""
    return jax.tree.map(np.asarray, jax.device_get(state))


class SnapshotStore:
    """Keeps the two newest snapshots (two states' worth of host RAM), and every snapshot not
    yet known good together with the newest one that is.

    Why two: a snapshot is only known good once the run has gone on past it without a slice
    loss dated before its step (the local backend dates a loss after the fact, see
    ``LocalStandIn.discard_after``). With one slot, a loss 3 ms after step 340 dropped the
    snapshot of 340 and, with it, the only copy: the valid snapshot of 335 had already been
    overwritten and the run went back to checkpoint 320 (or to step 0 right after a session's
    first snapshot). Keeping the previous one until a newer one exists costs one more state in
    host RAM.

    Why more, on the local backend: a hung host's loss is found a heartbeat timeout late, and
    the stand-in devices go on meanwhile, a snapshot every few steps. With two slots those
    snapshots (all void once the loss is found) pushed out the snapshot of the last step before
    the loss, and the run went back to step 0. So a snapshot newer than ``known_good`` (the
    newest step no later loss can undo, ``Hooks.known_good``) is kept until that is known,
    and so is the newest one not newer: at most a heartbeat timeout's worth of snapshots.
    Where no loss is dated after the fact (TPU, Pathways) every step is known good at once
    and two are kept.
    """

    SLOTS = 2

    def __init__(self, events: EventLog) -> None:
        self.events = events
        self.slots: list[Snapshot] = []  # oldest first

    @property
    def latest(self) -> Snapshot | None:
        """The newest snapshot kept, or None."""
        return self.slots[-1] if self.slots else None

    def take(self, step: int, state: Any, data_state: dict, *, emit: bool = True,
             known_good: int | None = None) -> Snapshot:
        """Copy ``state`` (device arrays) to host memory now; ``known_good``: the newest step
        no slice loss found later can undo (None: every step)."""
        start = time.monotonic()
        host = host_copy(state)
        nbytes = int(sum(x.nbytes for x in jax.tree.leaves(host)))
        snap = Snapshot(step, host, dict(data_state), nbytes, time.monotonic())
        # A snapshot of an older step (the run went back) makes the newer ones meaningless.
        older = [s for s in self.slots if s.step < step]
        kept = {id(s) for s in older[-(self.SLOTS - 1):]}
        good = [s for s in older if known_good is None or s.step <= known_good]
        if good:
            kept.add(id(good[-1]))
        self.slots = [s for s in older if id(s) in kept
                      or (known_good is not None and s.step > known_good)] + [snap]
        if emit:
            seconds = time.monotonic() - start
            self.events.emit(eventspec.SNAPSHOT_TAKEN, step=step, seconds=seconds, bytes=nbytes)
        return snap

    def restore(self, abstract_state: Any) -> tuple[Any, Snapshot]:
        """The latest snapshot placed onto the shardings of ``abstract_state``."""
        if self.latest is None:
            raise LookupError("no snapshot taken yet")
        snap = self.latest
        state = jax.tree.map(lambda x, a: jax.device_put(x, a.sharding), snap.host_state,
                             abstract_state)
        return state, snap

    def drop_newer(self, step: int | None) -> list[Snapshot]:
        """Drop the snapshots of steps after ``step`` (None: all); returns them."""
        gone = [s for s in self.slots if step is None or s.step > step]
        self.slots = [s for s in self.slots if s not in gone]
        return gone

    def clear(self) -> None:
        """Forget every snapshot."""
        self.slots = []

