"""Host-memory snapshots of the train state, taken every K steps (K << checkpoint period).

Why our own and not Orbax's ``Snapshotter`` (orbax.checkpoint.experimental.v1 ...pathways):
that one keeps per-replica copies in the TPU hosts' *pinned host memory* through pathwaysutils'
experimental split/concatenate-by-mesh-axis ops, which need Pathways (no CPU path to test), and
it silently skips a snapshot when the previous one is still copying, so which step a recovery
returns to would depend on timing. Ours copies the state of a chosen step, always
(exact-match recovery tests), stores the data-iterator position with the arrays, and restores
onto any mesh through the target shardings (a snapshot taken on 4 slices restores onto 3).

Three ways to copy (``--snapshot-copy``). ``sync`` copies at the step boundary, the loop
waiting, 512 MiB a device of transfers in flight at a time (``hostcopy.COPY_WINDOW_BYTES``):
a memcpy on CPU, 0.3-0.4 s for 1.3 GB on a v5e chip, and 2.0-3.2 s for qwen3-0.6b's 7.15 GB.
Every array's transfer started at once (``device_get``, as before) took 5.4-6.4 s for that
state; 6.5 GiB side by side in one process: 4.6-5.7 s at once, 2.2-2.3 s through the window
(docs/benchmarks.md, issue 58's ninth session).
``staged`` (``auto``'s choice where the device holds a second state beside the compiled step)
copies the state on the device at the boundary (``StepFns.stage``: milliseconds at HBM speed;
the next step may then donate and overwrite the original) and a thread reads that copy to
host memory while the next steps run; it counts once the read has ended whole, and a copy
still in flight lands before the next one starts, so at most two host copies exist and no
snapshot is skipped. On a v5e chip, bench-1g: 0.008-0.012 s blocking against 0.24-0.36 s for
``sync`` (docs/benchmarks.md). It needs the device memory of one more state, which a state
that fills the chip (qwen3-0.6b at batch 16) does not leave: ``auto`` then takes ``sync``.
``overlap`` has the next step copy the state it was given into pinned host memory while it
computes (``StepFns.step_copy``: the step's input, which forward and backward only read, can
be copied by XLA's DMA beside the compute, and the donated buffers are overwritten only by the
update at its end), so the loop waits for nothing but that step; the copy counts, and
``keep`` makes it the snapshot, only once that step has completed and the copy is whole. On a
v5e chip it lost: the pinned copy ran at 0.8-0.9 GB/s and held its step for the copy's whole
length, and donating the previous copy's pinned buffers to the step did not make XLA reuse
them (docs/benchmarks.md). Why not ``copy_to_host_async`` of the state itself beside the next
step: the next step donates the buffers being read, so its launch waits for the copy; and a
copy of the new state returned by the step itself could only start after the update, at the
step's end.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from elastix.protocol import eventspec, timefmt
from elastix_trainer.obs.events import EventLog
from elastix_trainer.state import hostcopy


@dataclasses.dataclass
class Snapshot:
    """One host copy."""

    step: int
    host_state: Any  # pytree of numpy arrays
    data_state: dict
    nbytes: int


def host_copy(state: Any, probe: Callable[[], None] | None = None) -> Any:
    """``state`` (device arrays) copied to host memory as numpy arrays, ``COPY_WINDOW_BYTES``
    a device of transfers in flight at a time (``hostcopy.copy_window``); a checkpoint writes
    the same copy when a snapshot of its step was just taken. ``probe`` runs between the
    copy's parts and may raise to stop it (a copy that needed a host now lost:
    ``Devices.check_transfer``)."""
    return hostcopy.read_windowed(state, hostcopy.copy_window(state), probe)


def host_numpy(host_state: Any) -> Any:
    """A host copy as numpy arrays: a copy taken by a step into pinned host memory is a tree of
    jax arrays there (``Trainer.overlap_copies``), read out here (Orbax writes numpy)."""
    return jax.tree.map(lambda x: np.asarray(x) if isinstance(x, jax.Array) else x, host_state)


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
             check: Callable[[str], None] | None = None,
             probe: Callable[[str], None] | None = None) -> Snapshot:
        """Copy ``state`` (device arrays) to host memory now and keep it. ``check("host
        snapshot")`` runs once the copy has ended, ``probe("host snapshot")`` between its
        parts: if either raises, the copy failed and is not kept."""
        start = time.monotonic()
        host = host_copy(state, None if probe is None else lambda: probe("host snapshot"))
        if check is not None:
            check("host snapshot")
        nbytes = int(sum(x.nbytes for x in jax.tree.leaves(host)))
        snap = Snapshot(step, host, dict(data_state), nbytes)
        self.latest = snap
        if emit:
            seconds = time.monotonic() - start
            self.events.emit(eventspec.SNAPSHOT_TAKEN, step=step, seconds=seconds, bytes=nbytes)
        return snap

    def keep(self, step: int, host_state: Any, data_state: dict, copy_seconds: float,
             blocking_seconds: float = 0.0, copy_began: float | None = None) -> Snapshot:
        """Keep a copy of step ``step``'s state taken while later steps ran, once it was found
        whole: by the next step (``StepFns.step_copy``: arrays in pinned host memory), or
        read by a thread from a copy on the devices (``StepFns.stage``: numpy arrays); the
        loop waited ``blocking_seconds`` for it (its start). The previous snapshot is
        dropped: at most this one and the one being copied exist. ``copy_began`` (monotonic)
        dates the copy's start in the event (``copy_began``), so measurement knows which steps
        ran beside it."""
        nbytes = int(sum(x.nbytes for x in jax.tree.leaves(host_state)))
        snap = Snapshot(step, host_state, dict(data_state), nbytes)
        self.latest = snap
        extra = {}
        if copy_began is not None:
            extra["copy_began"] = timefmt.iso_us(
                timefmt.utc_now() - datetime.timedelta(seconds=time.monotonic() - copy_began))
        self.events.emit(eventspec.SNAPSHOT_TAKEN, step=step, seconds=blocking_seconds,
                         bytes=nbytes, copy_seconds=copy_seconds, **extra)
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
