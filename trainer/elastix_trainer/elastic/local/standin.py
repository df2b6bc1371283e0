"""The local backend's stand-in devices: CPU devices that fail when a lost slice's chips would.

Off Pathways the trainer's devices are this process's CPUs standing in for the slices' chips.
They never fail by themselves, and they would go on computing after a slice host process is
gone, where a TPU step that needs a dead slice fails or hangs. ``LocalStandIn`` is the
trainer's ``seams.Devices`` that makes them fail *in time*, given only where the devices are
stand-ins (``program.build_trainer``), so the training loop holds none of this. One contract:
**a device operation that needs a dead or hung host fails, when it would on TPU**; nothing that
completed is ever undone afterwards.

- The fault seam: the compiled step starts with ``fault.seam`` (its ``step_prologue``), armed
  before each dispatch from the health source, so a step dispatched onto a mesh with a slice
  already down fails inside XLA with ``DATA_LOSS``, as on Pathways.
- The gate: a step counts as complete only once every slice host of the session's mesh has
  answered *after the step's result exists* (``verify_complete``, in the shadow of the next
  step, which is already dispatched). The same holds for a device-to-host copy (a host
  snapshot, a checkpoint's copy) and a restore's host-to-device copy (``verify_transfer``): a
  copy that needed a dead host fails instead of completing, so its state is never kept.
  With the local heartbeats the hosts answer over their own channel
  (``LocalHeartbeatHealth.answer``): a host whose process exited fails the step at once (its
  exit is seen), a hung one (SIGSTOP) holds it, as a collective waits for a hung host, until the
  heartbeat timeout, then ``DATA_LOSS``. Other health sources (a test's manual one, the static
  one of a plain run) have no hosts to ask: the seam alone decides, at dispatch.

Why answers rather than dating the loss afterwards: the devices here run on after a kill, so
any after-the-fact verdict must undo work that was already counted, snapshotted or committed
(the earlier design did: void steps, markers on storage, un-committed directories). An answer
asked for after the result exists cannot be given by a host that died before it, so what is
kept is exactly what a TPU run keeps. ``docs/architecture.md`` has the measured cost.
"""

from __future__ import annotations

import time

import jax

from elastix_trainer.elastic.health import HealthSource, lost
from elastix_trainer.elastic.local import fault
from elastix_trainer.elastic.local.health import LocalHeartbeatHealth
from elastix_trainer.seams import Devices, Session


class LocalStandIn(Devices):
    """The stand-in devices' failure behaviour, from ``health``.

    Args:
        health: the slice health the verdicts come from; with ``LocalHeartbeatHealth`` the
            hosts themselves are asked before a step or a copy counts.
    """

    step_prologue = staticmethod(fault.seam)

    def __init__(self, health: HealthSource) -> None:
        self.health = health
        self._hosts = health if isinstance(health, LocalHeartbeatHealth) else None
        self._roll: dict[tuple[int, int], int] = {}  # the hosts the session's devices live on

    # -- devices -------------------------------------------------------------------------------
    def on_mesh(self, slice_ids: frozenset[int]) -> None:
        """A session starts on ``slice_ids``: its devices live on the hosts there now."""
        if self._hosts is not None:
            self._roll = self._hosts.roll(slice_ids)

    def before_dispatch(self, session: Session, n: int) -> None:
        fault.arm(n, lost(session.slice_ids, self.health))

    def verify_complete(self, session: Session, n: int, done_at: float) -> None:
        """Step ``n`` completed only if every host of the mesh answers after its result."""
        self._require(session.slice_ids, f"before step {n} completed")

    def verify_transfer(self, slice_ids: frozenset[int], what: str) -> None:
        """A copy between the devices and host memory (``what``) needed every host."""
        self._require(slice_ids, f"during the {what}")

    def verify_read_ended(self, slice_ids: frozenset[int], what: str, ended_at: float) -> None:
        """A staged copy whose read ended after a host of its mesh had exited (the pidfd's
        time) or gone silent (its last heartbeat) is dropped: the stand-in's verdict at the
        read's end came before it learned of the loss (about a second late: the fault hunt's
        case, issue 74), and a chip's read from that host would have failed."""
        if self._hosts is None:
            return
        gone = {s: f"its host was lost {ended_at - t:.3f} s before the read ended"
                for s, t in self._hosts.losses(slice_ids).items() if t <= ended_at}
        if gone:
            raise self._lost(gone, f"during the {what}")

    def check_transfer(self, slice_ids: frozenset[int], what: str) -> None:
        """A copy (``what``) is under way: fail it now if a host it needs is already known lost
        (never blocks). On a chip the stand-in's copy would run on to its end, seconds for a
        7 GB state, before ``verify_transfer`` failed it; a TPU copy that needs a dead host
        does not complete, so the loop stops waiting for it here instead."""
        if self._hosts is None:
            return
        gone = self._hosts.gone(slice_ids, self._roll)
        if gone:
            raise self._lost(gone, f"during the {what}")

    def loss_details(self, slice_ids: frozenset[int]) -> dict:
        """``since_loss`` for the detection event: seconds since the host's exit (or its last
        heartbeat), for the measurement; nothing is kept or dropped by it."""
        if self._hosts is None:
            return {}
        gone = self._hosts.losses(slice_ids)
        if not gone:
            return {}
        return {"since_loss": max(0.0, time.monotonic() - min(gone.values()))}

    def after_failure(self) -> None:
        """After a failed step, once no device can still read a verdict: forget them all."""
        fault.disarm()

    def drain(self) -> None:
        """At the end of a run: await what the steps dispatched, so a failed step's error does
        not resurface in JAX's exit handlers."""
        fault.drain()

    # -- the contract ----------------------------------------------------------------------------
    def _require(self, slice_ids: frozenset[int], when: str) -> None:
        if self._hosts is None:
            return
        gone = self._hosts.answer(slice_ids, self._roll)
        if gone:
            raise self._lost(gone, when)

    @staticmethod
    def _lost(gone: dict[int, str], when: str) -> jax.errors.JaxRuntimeError:
        return jax.errors.JaxRuntimeError(
            f"DATA_LOSS: slice(s) {sorted(gone)} of the mesh lost a host {when} "
            f"({'; '.join(gone[s] for s in sorted(gone))}; elastix local stand-in)")
