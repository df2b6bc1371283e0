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
from collections.abc import Callable
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


def host_copy(state: Any) -> Any:
    """``state`` (device arrays) copied to host memory as numpy arrays; a checkpoint writes the
    same copy when a snapshot of its step was just taken."""
    return jax.tree.map(np.asarray, jax.device_get(state))


class SnapshotStore:
    """Keeps the newest snapshot (one state's worth of host RAM).

    One is enough because a snapshot is kept only once its copy has completed: a copy that
    needed a lost host fails (``check``, the local stand-in's verdict; on TPU the copy itself
    fails) and leaves the previous snapshot in place. Nothing kept is ever dropped afterwards.
    """

    def __init__(self, events: EventLog) -> None:
        self.events = events
        self.latest: Snapshot | None = None
        """The newest snapshot kept, or None."""

    def take(self, step: int, state: Any, data_state: dict, *, emit: bool = True,
             check: Callable[[str], None] | None = None) -> Snapshot:
        """Copy ``state`` (device arrays) to host memory now and keep it. ``check("host
        snapshot")`` runs once the copy has ended: if it raises, the copy failed and is not
        kept."""
        start = time.monotonic()
        host = host_copy(state)
        if check is not None:
            check("host snapshot")
        nbytes = int(sum(x.nbytes for x in jax.tree.leaves(host)))
        snap = Snapshot(step, host, dict(data_state), nbytes)
        self.latest = snap
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

    def clear(self) -> None:
        """Forget every snapshot."""
        self.latest = None
