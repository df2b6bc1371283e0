"""The elastic runtime: survive slice loss in the same process.

It runs the trainer and, when a step fails because a slice went away (a ``JaxRuntimeError``
whose status says so, or the health source), it logs the event, settles any in-flight async
checkpoint inside a guard (a failed write simply did not commit), deletes uncommitted step
directories, waits for enough slices, restores the newest of (host snapshot, committed
checkpoint) onto the new mesh and re-enters the loop. Same PID; Python objects survive.

Modes: ``pause-resume`` waits for every slice. ``replica-resize`` continues at once on the
survivors (at least ``min_slices``) with a smaller global batch and scales back up at the next
step boundary after slices return, once any in-flight save has settled.

Budgets are separate: slice losses (``max_slice_losses``) and other errors
(``max_other_errors``; an error in user code is never retried as a slice loss). An exhausted
budget ends the run with a clear error; committed checkpoints are left intact.

Errors that no retry can help (``Diverged``, ``Terminated``, ``FinalSaveFailed``,
``CheckpointsUnreadable``, ``SliceWaitTimeout``, ``TrainingFailed``: every ``ElastixError``)
carry their own message, hint and exit code; ``run`` is the one place that turns one into the
run's ``Outcome``. The runtime attaches itself to the trainer as a ``Hooks`` object and knows
only ``Hooks``, ``Devices`` and ``HealthSource``: the trainer's devices (the local stand-in,
``program.build_trainer``) hear of a failure through ``Devices.after_failure`` and add to the
detection event through ``Devices.loss_details``. Nothing the run completed is ever undone.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable

import jax

from elastix.errors import ElastixError, UsageError
from elastix.protocol import eventspec
from elastix_trainer.elastic.classify import SliceLost, classify, error_line
from elastix_trainer.elastic.health import HealthSource, SliceWaitTimeout, WaitStopped, lost
from elastix_trainer.mesh import on_pathways
from elastix_trainer.obs.events import EventLog, log
from elastix_trainer.seams import Hooks, Session
from elastix_trainer.state.checkpoint import SaveTimeout
from elastix_trainer.train import Terminated, Trainer

START_GRACE_SECONDS = 30.0  # replica-resize: how long start-up waits for every slice



def min_slices(cfg, total: int) -> int:
    """The fewest slices the run trains on: ``--min-slices``, else under replica-resize all
    but one (at least one), else (pause-resume) all of them."""
    resize = cfg.elastic_mode == "replica-resize"
    return cfg.min_slices or (max(1, total - 1) if resize else total)

class TrainingFailed(ElastixError):
    """The run ended without completing (exit code 1)."""


@dataclasses.dataclass
class Outcome:
    """How a run ended: ``completed`` or ``failed`` (with the reason)."""

    status: str
    reason: str
    step: int
    hint: str | None = None
    """What helps, when re-running from the committed checkpoints would not."""
    exit_code: int = 1
    """The process's exit code when the run did not complete (143 after SIGTERM)."""


class ElasticRuntime(Hooks):
    """Runs ``trainer`` to completion through slice losses.

    Args:
        trainer: the trainer (its config carries mode and budgets); the runtime attaches
            itself to it.
        health: slice health.
        clock: monotonic clock (injected so tests and benchmarks control it).
        precompile: replica-resize: compile the step for the meshes one slice smaller in the
            background once a session has completed its first step (off: a resize compiles
            on its critical path).
        warm_up: with ``precompile``, also run each precompiled step once on throw-away zeros,
            so the first step after a resize is not the executable's first run
            (``step.warm_up``). None: on the CPU backend only (``warm_by_default``).
    """

    def __init__(self, trainer: Trainer, health: HealthSource, clock=time.monotonic,
                 precompile: bool = True, warm_up: bool | None = None) -> None:
        cfg = trainer.cfg
        self.trainer, self.health, self.clock = trainer, health, clock
        self.events: EventLog = trainer.events
        self.total = len(trainer.slices)
        self.resize = cfg.elastic_mode == "replica-resize"
        self.min_slices = min_slices(cfg, self.total)
        if self.min_slices > self.total:
            raise UsageError(f"--min-slices {self.min_slices} exceeds the {self.total} slices",
                             hint=f"use --min-slices {self.total} or fewer")
        self.precompile, self.warm_up = precompile, warm_up
        self.recoveries = self.slice_losses = self.other_errors = 0
        self.history: list[tuple[str, str]] = []  # (kind, error type) of every error handled
        self._believed: frozenset[int] = frozenset()  # slices live at the last detection
        # A plain object made before any event; recovery logs prove it is still the same one.
        self.step_times: list[float] = []
        self.precompiling: threading.Thread | None = None  # the background compile, once begun
        self._stop_precompile = threading.Event()
        trainer.add_hooks(self)

    # -- hooks: what the loop tells the runtime ------------------------------------------------
    def after_complete(self, session: Session, n: int, done_at: float, seconds: float) -> None:
        self.step_times.append(seconds)
        if n != session.first_step:
            return
        if self.resize and self.precompile:
            self._precompile_smaller(session.slice_ids)
        if session.recovery is not None:
            self.events.emit(eventspec.ELASTIC_FIRST_STEP, recovery=session.recovery, step=n,
                             seconds=seconds)

    def scale_up_wanted(self, session: Session) -> bool:
        return self.resize and bool(self._live_known() - session.slice_ids)

    def _precompile_smaller(self, ids: frozenset[int]) -> None:
        smaller = [ids - {i} for i in sorted(ids)] if len(ids) > self.min_slices else []
        if smaller:
            warm = warm_by_default() if self.warm_up is None else self.warm_up
            self.precompiling = self.trainer.precompile(smaller, self._stop_precompile, warm)

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> Outcome:
        """Train to ``cfg.steps``; returns the outcome (never raises for training errors).

        The one boundary: an ``ElastixError`` from anywhere in the run becomes the failed
        outcome, with its message, hint and exit code.
        """
        try:
            self._run()
            return Outcome("completed", "all steps done", self.trainer.last_completed)
        except ElastixError as e:
            self._abandon_saves(stopped=isinstance(e, Terminated))
            return Outcome("failed", e.message, self.trainer.last_completed, e.hint, e.exit_code)
        finally:  # the compile in flight finishes; step.py waits for it at exit
            self._stop_precompile.set()

    def _run(self) -> None:
        """Sessions until the last step is committed; raises an ``ElastixError`` to stop."""
        tr = self.trainer
        if tr.ckpt is not None:
            tr.ckpt.cleanup_uncommitted()
        use = self._wait_at_start()
        recovery = None  # the recovery the next session resumes (its restore is that one's)
        while True:
            session = None
            try:
                session = tr.start(use)
                self._verify(session, recovery)
                recovery = None  # said: an error from here on is not that recovery's
                if tr.train(session) == "completed":
                    tr.finish(session)
                    return
                new = self._live_known()
                self._resize_event(session.slice_ids, new, "scale up")
                use = new
            except ElastixError:
                raise  # it says what happened and what helps: no retry would
            except Exception as e:  # noqa: BLE001 - classified below; KeyboardInterrupt passes
                mesh = session.slice_ids if session is not None else frozenset(use)
                del session  # drop references to poisoned arrays before the next attempt
                recovery = self._handle(e, mesh) or recovery  # another error: still that one
                if tr.stop_requested:  # stopping: no recovery, keep what host memory holds
                    raise tr.stop_after_loss() from None
                try:
                    new = self._wait_for_slices(recovery=self.recoveries)
                except WaitStopped:  # asked to stop meanwhile: the slices no longer matter
                    raise tr.stop_after_loss() from None
                except TimeoutError as e2:  # SliceWaitTimeout, or a third-party source's
                    raise SliceWaitTimeout(f"gave up waiting for slices after slice loss: "
                                           f"{e2}") from None
                self._resize_event(mesh, new, "resize")
                use = new

    def _wait_at_start(self) -> frozenset[int]:
        """Slices to start on. replica-resize first gives every slice a grace period to come
        up (hosts start in any order): starting on the first live slice only to scale up a
        moment later would cost two compilations for nothing."""
        if self.resize and self.min_slices < self.total:
            grace = min(self.trainer.cfg.slice_wait_timeout, START_GRACE_SECONDS)
            try:
                return self.health.wait_for(self.total, grace) & frozenset(self.trainer.slices)
            except TimeoutError:
                log.info("elastix: not every slice is up after %.0f s: starting on the live "
                         "ones (replica-resize)", grace)
        try:
            return self._wait_for_slices(recovery=None)
        except TimeoutError as e:  # SliceWaitTimeout, or a third-party source's
            raise SliceWaitTimeout(f"not enough slices to start: {e}") from None

    def _required(self) -> int:
        return self.min_slices if self.resize else self.total

    def _live_known(self) -> frozenset[int]:
        return self.health.live_slices() & frozenset(self.trainer.slices)

    def _verify(self, session: Session, recovery: int | None) -> None:
        """A slice that died during the restore shows up here, not after a wasted step. A
        session that resumes ``recovery`` then says so (``elastic_restored``), and its hooks
        learn it from ``session.recovery``."""
        down = lost(session.slice_ids, self.health)
        if down:
            raise SliceLost(f"slice(s) {sorted(down)} went down during the restore")
        if recovery is None:
            return
        r = session.restored
        if r is None:  # nothing was saved yet: training starts over from step 0
            init = {"source": "init", "step": 0, "bytes": 0, "seconds": 0.0}
            self.events.emit(eventspec.ELASTIC_RESTORED, recovery=recovery, **init)
        else:  # the same instant as the restore's own event and log line
            self.events.emit(eventspec.ELASTIC_RESTORED, at=r["ts"], logged=False,
                             recovery=recovery, source=r["source"], step=r["step"],
                             bytes=r["bytes"], seconds=r["seconds"])
        session.recovery = recovery
        self._proof()

    def _proof(self) -> None:
        # What a user reads: the same process, its Python state carried over. (It named the
        # step-time list's address, an internal detail; the test checks the object itself.)
        log.info("elastix: in-process recovery %d: the same process (pid %d) goes on, its "
                 "Python state kept (%d step times from before the loss)", self.recoveries,
                 os.getpid(), len(self.step_times))

    def _handle(self, error: Exception, mesh: frozenset[int]) -> int | None:
        """Count the error against its budget and clean up. Returns the recovery a slice loss
        starts (None: another error, retried from the newest state); raises
        ``TrainingFailed`` when the budget is spent."""
        kind = classify(error, mesh, self.health)
        self.history.append((kind, type(error).__name__))
        last = self.trainer.last_completed
        cfg = self.trainer.cfg
        if kind == "other":
            self.other_errors += 1
            log.info("elastix: error (not a slice loss) after step %d: %s: %s", last,
                     type(error).__name__, error_line(error))
            if self.other_errors > cfg.max_other_errors:
                raise TrainingFailed(f"{type(error).__name__}: {error_line(error)} (not a slice "
                                     f"loss; --max-other-errors {cfg.max_other_errors})")
            self._cleanup(None)
            return None
        self.slice_losses += 1
        self.recoveries += 1
        r = self.recoveries
        down = sorted(lost(mesh, self.health))
        extra = self.trainer.devices.loss_details(mesh)
        live = self._live_known()
        self.events.emit(eventspec.ELASTIC_DETECTED, recovery=r, kind="slice_lost",
                         error=error_line(error), last_step=last, live_slices=len(live),
                         lost_slices=down, **extra)
        self._believed = mesh - frozenset(down)  # a later loss of these is a second one
        if self.slice_losses > cfg.max_slice_losses:
            self._cleanup(None)
            raise TrainingFailed(f"slice-loss budget exhausted: {self.slice_losses} losses > "
                                 f"--max-slice-losses {cfg.max_slice_losses}")
        self._cleanup(r)
        return r

    def _cleanup(self, recovery: int | None) -> None:
        t0 = self.clock()
        self.trainer.devices.after_failure()
        # a staged copy still being read lands or is dropped now, while the loss's time is
        # known (waiting for the slices forgets it): kept only if its read ended before it
        self.trainer.settle_copy()
        ck = self.trainer.ckpt
        snap = self.trainer.snapshots.latest
        if ck is not None and ck.leave_writing(snap.step if snap is not None else None):
            log.info("elastix: the checkpoint write in flight goes on beside the recovery "
                     "(the snapshot of step %d is as new)", snap.step)
        elif ck is not None:
            try:
                ok = ck.settle()
                if ok is False:
                    log.info("elastix: the in-flight checkpoint did not commit; it is ignored")
            except SaveTimeout as e:  # reset() abandons it: uncommitted, so never restored
                log.warning("elastix: %s; going on without it", e)
            finally:
                ck.reset()
                ck.cleanup_uncommitted()
        seconds = self.clock() - t0
        if recovery is not None:
            self.events.emit(eventspec.ELASTIC_CLEANUP_DONE, recovery=recovery, seconds=seconds)

    def _wait_for_slices(self, recovery: int | None) -> frozenset[int]:
        """Wait for enough slices; a recovery's wait ends early (``WaitStopped``) once a stop
        is requested: a SIGTERM that arrives while a lost slice is awaited must not wait for
        it (on GKE a replaced TPU VM takes minutes, the head's grace 30 s) and be SIGKILLed
        holding a host snapshot newer than any checkpoint."""
        required = self._required()
        t0 = self.clock()
        stop = None
        if recovery is not None:
            watch = _LostAgain(self.health, self._believed, lambda lost, live: self.events.emit(
                eventspec.ELASTIC_LOST_AGAIN, recovery=recovery, lost_slices=sorted(lost),
                live_slices=len(live)))

            def stop() -> bool:
                watch.poll()
                return self.trainer.stop_requested is not None
        live = self.health.wait_for(required, self.trainer.cfg.slice_wait_timeout, stop=stop)
        live = live & frozenset(self.trainer.slices)
        waited = self.clock() - t0
        if recovery is not None:
            self.events.emit(eventspec.ELASTIC_SLICES_READY, recovery=recovery,
                             live_slices=len(live), required_slices=required, seconds=waited)
        return live if self.resize else frozenset(self.trainer.slices)

    def _resize_event(self, old: frozenset[int], new: frozenset[int], why: str) -> None:
        if len(old) != len(new):
            self.events.emit(eventspec.ELASTIC_RESIZE, recovery=self.recoveries,
                             from_slices=len(old), to_slices=len(new), slices=sorted(new), why=why)

    def _abandon_saves(self, stopped: bool = False) -> None:
        """The run failed: drop the checkpointer's in-flight work (never what is committed).
        A write in flight is waited for up to --checkpoint-timeout (it may commit a good
        state), except after a stop (``stopped``): the stop already waited for it within
        --term-save-timeout, and waiting longer would outlast the pod's grace period."""
        ck = self.trainer.ckpt
        if ck is not None:
            try:
                ck.reset(timeout=0.0 if stopped else None)
            except Exception as e:  # the run already failed; keep the first reason
                log.info("elastix: checkpoint cleanup failed: %s", error_line(e))


def warm_by_default() -> bool:
    """Run precompiled steps once in the background (``ElasticRuntime.warm_up``) only on the
    CPU backend: there an executable's first run costs about two steps and the state is small;
    on TPU and Pathways the throw-away state would double the state's footprint in HBM."""
    return jax.default_backend() == "cpu" and not on_pathways()


class _LostAgain:
    """Sees a slice lost while a recovery waits for its slices (a second failure inside the
    recovery: on TPU another host dies while the first is replaced) and reports it once, as it
    happens: without it the recovery's events named only the first loss, and a measurement
    without the launcher's kill record (any real failure) could not see the second.

    Polled from the wait's ``stop`` check (every 0.1 s for heartbeats, at each probe on
    Pathways); reads the source's non-blocking view, so a slice lost and back between two polls
    is not seen.
    """

    def __init__(self, health: HealthSource, believed: frozenset[int],
                 report: Callable[[frozenset[int], frozenset[int]], None]) -> None:
        self.health, self.report = health, report
        self.seen = believed  # live when the loss was detected: one lost since, before the
        # wait began (during the cleanup), is a second loss as much as one lost during it

    def poll(self) -> None:
        live = self.health.live_slices()
        lost = self.seen - live
        if lost:
            self.report(lost, live)
        self.seen = live
