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
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time

import jax

from elastix.errors import ElastixError, UsageError
from elastix.protocol import eventspec
from elastix_trainer.elastic.classify import SliceLost, classify, error_line
from elastix_trainer.elastic.health import (
    HealthSource,
    SliceWaitTimeout,
    WaitStopped,
    lost,
    )
from elastix_trainer.elastic.local import fault
from elastix_trainer.mesh import on_pathways
from elastix_trainer.obs.events import EventLog, log
from elastix_trainer.state.checkpoint import CheckpointsUnreadable, SaveTimeout
from elastix_trainer.train import Diverged, FinalSaveFailed, Session, Terminated, Trainer

START_GRACE_SECONDS = 30.0  # replica-resize: how long start-up waits for every slice
WAIT_HINT = ("`elastix workload status` shows the missing slice's hosts; a longer "
             "--slice-wait-timeout waits longer (on GKE a hung TPU VM's pod is evicted after "
             "about 5 min), and replica-resize with --min-slices below the slice count goes on "
             "without it")
"""The hint of a run that gave up waiting for slices (a slice that never came back)."""


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


class ElasticRuntime:
    """Runs ``trainer`` to completion through slice losses.

    Args:
        trainer: the trainer (its config carries mode and budgets).
        health: slice health.
        clock: monotonic clock (injected so tests and benchmarks control it).
    """

    def __init__(self, trainer: Trainer, health: HealthSource, clock=time.monotonic) -> None:
        cfg = trainer.cfg
        self.trainer, self.health, self.clock = trainer, health, clock
        self.events: EventLog = trainer.events
        self.total = len(trainer.slices)
        self.resize = cfg.elastic_mode == "replica-resize"
        self.min_slices = cfg.min_slices or (max(1, self.total - 1) if self.resize else self.total)
        if self.min_slices > self.total:
            raise UsageError(f"--min-slices {self.min_slices} exceeds the {self.total} slices",
                             hint=f"use --min-slices {self.total} or fewer")
        self.recoveries = self.slice_losses = self.other_errors = 0
        self.history: list[tuple[str, str]] = []  # (kind, error type) of every error handled
        # A plain object made before any event; recovery logs prove it is still the same one.
        self.step_times: list[float] = []
        self._first_step_of: int | None = None
        self._precompile_for: frozenset[int] | None = None  # a session's slices, until step 1
        self.precompiling = None  # the background compile's thread, once started
        self._stop_precompile = threading.Event()
        trainer.after_step.append(self._after_step)
        if self.resize:
            trainer.scale_up_check = self._scale_up_wanted

    precompile = True
    """replica-resize: compile the step for the meshes one slice smaller in the background once
    a session has completed its first step (off: a resize compiles on its critical path)."""

    warm_up: bool | None = None
    """With ``precompile``: also run each precompiled step once on throw-away zeros, so the
    first step after a resize is not the executable's first run (``step.warm_up``). None: on
    the CPU backend only (the local backend, where it was measured to matter); on TPU and
    Pathways it would need a second copy of the state in the surviving slices' memory."""

    def _after_step(self, trainer: Trainer, step: int, seconds: float) -> None:
        self.step_times.append(seconds)
        if self._precompile_for is not None:
            ids, self._precompile_for = self._precompile_for, None
            smaller = [ids - {i} for i in sorted(ids)] if len(ids) > self.min_slices else []
            if smaller:
                warm = warm_by_default() if self.warm_up is None else self.warm_up
                self.precompiling = trainer.precompile(smaller, self._stop_precompile, warm)
        if self._first_step_of is not None:
            r, self._first_step_of = self._first_step_of, None
            self.events.emit(eventspec.ELASTIC_FIRST_STEP, recovery=r, step=step, seconds=seconds)

    def _scale_up_wanted(self, s: Session) -> bool:
        return bool((self.health.live_slices() & frozenset(self.trainer.slices)) - s.slice_ids)

    def _required(self) -> int:
        return self.min_slices if self.resize else self.total

    def run(self) -> Outcome:
        """Train to ``cfg.steps``; returns the outcome (never raises for training errors)."""
        try:
            return self._run()
        finally:  # the compile in flight finishes; step.py waits for it at exit
            self._stop_precompile.set()

    def _run(self) -> Outcome:
        tr = self.trainer
        if tr.ckpt is not None:
            tr.ckpt.cleanup_uncommitted()
        try:
            use = self._wait_at_start()
        except TimeoutError as e:  # SliceWaitTimeout from every health source, or a third party's
            return self._fail(f"not enough slices to start: {e}", hint=WAIT_HINT)
        while True:
            session = None
            try:
                session = tr.start(use)
                self._verify(session)
                if self.resize and self.precompile:
                    self._precompile_for = session.slice_ids
                if tr.train(session) == "completed":
                    try:
                        tr.finish(session)
                    except (FinalSaveFailed, SaveTimeout) as e:
                        return self._fail(str(e), hint="make the storage writable again (free "
                                          "space, fix access), then re-run with the same "
                                          "--checkpoint-dir: it resumes from the newest "
                                          "committed step")
                    return Outcome("completed", "all steps done", tr.last_completed)
                new = self._live_known()
                forget = getattr(self.health, "forget", None)
                if forget is not None:  # what befell them outside the mesh is history
                    forget(new - session.slice_ids)
                self._resize_event(session.slice_ids, new, "scale up")
                use = new
            except SliceWaitTimeout as e:
                return self._fail(str(e), hint=WAIT_HINT)
            except TrainingFailed as e:
                return self._fail(str(e))
            except CheckpointsUnreadable as e:
                return self._fail(e.message, hint=e.hint)
            except Terminated as e:
                outcome = self._fail(str(e), hint="it stopped on request; re-run with the same "
                                     "--checkpoint-dir to resume")
                return dataclasses.replace(outcome, exit_code=143)
            except Diverged as e:
                return self._fail(str(e), hint="lower --lr (or check the data); every committed "
                                  "checkpoint holds a finite state")
            except Exception as e:  # noqa: BLE001 - classified below; KeyboardInterrupt passes
                mesh = session.slice_ids if session is not None else frozenset(use)
                del session  # drop references to poisoned arrays before the next attempt
                outcome = self._handle(e, mesh)
                if outcome is not None:
                    return outcome
                if tr.stop_requested:  # stopping: no recovery, keep what host memory holds
                    return self._stopped_after_loss()
                try:
                    new = self._wait_for_slices(recovery=self.recoveries)
                except WaitStopped:  # asked to stop meanwhile: the slices no longer matter
                    return self._stopped_after_loss()
                except TimeoutError as e2:
                    return self._fail(f"gave up waiting for slices after slice loss: {e2}",
                                      hint=WAIT_HINT)
                self._resize_event(mesh, new, "resize")
                use = new

    def _stopped_after_loss(self) -> Outcome:
        """The run ends on request after a slice loss, with what host memory held committed
        (``Trainer.stop_after_loss``); exit code 143."""
        outcome = self._fail(str(self.trainer.stop_after_loss()), hint="it stopped on request; "
                             "re-run with the same --checkpoint-dir to resume")
        return dataclasses.replace(outcome, exit_code=143)

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
        return self._wait_for_slices(recovery=None)

    def _live_known(self) -> frozenset[int]:
        return self.health.live_slices() & frozenset(self.trainer.slices)

    def _verify(self, session: Session) -> None:
        """A slice that died during the restore shows up here, not after a wasted step."""
        down = lost(session.slice_ids, self.health)
        if down:
            raise SliceLost(f"slice(s) {sorted(down)} went down during the restore")
        if self._pending_restore_event:
            self._pending_restore_event = False
            r = session.restored
            if r is None:  # nothing was saved yet: training starts over from step 0
                init = {"source": "init", "step": 0, "bytes": 0, "seconds": 0.0}
                self.events.emit(eventspec.ELASTIC_RESTORED, recovery=self.recoveries, **init)
            else:  # the same instant as the restore's own event and log line
                self.events.emit(eventspec.ELASTIC_RESTORED, at=r["ts"], logged=False,
                                 recovery=self.recoveries, source=r["source"], step=r["step"],
                                 bytes=r["bytes"], seconds=r["seconds"])
            self._first_step_of = self.recoveries
            self._proof()

    _pending_restore_event = False

    def _proof(self) -> None:
        log.info("elastix: in-process recovery %d: pid %d unchanged; object %#x made before the "
                 "first event still holds %d step times", self.recoveries, os.getpid(),
                 id(self.step_times), len(self.step_times))

    def _handle(self, error: Exception, mesh: frozenset[int]) -> Outcome | None:
        """Count the error against its budget and clean up; an Outcome means stop."""
        kind = classify(error, mesh, self.health)
        self.history.append((kind, type(error).__name__))
        last = self.trainer.last_completed
        if kind == "other":
            self.other_errors += 1
            log.info("elastix: error (not a slice loss) after step %d: %s: %s", last,
                     type(error).__name__, error_line(error))
            if self.other_errors > self.trainer.cfg.max_other_errors:
                return self._fail(f"{type(error).__name__}: {error_line(error)} (not a slice loss;"
                                  f" --max-other-errors {self.trainer.cfg.max_other_errors})")
            self._cleanup(None)
            return None
        self.slice_losses += 1
        self.recoveries += 1
        r = self.recoveries
        gone = getattr(self.health, "losses", lambda slices: {})(mesh)
        down = sorted(lost(mesh, self.health) | gone.keys())
        extra = {}
        if gone:
            # Local backend: the loss is dated (a host's exit or last heartbeat); work after it
            # ran on stand-in devices and is not kept (Trainer.discard_after).
            since = min(gone.values())
            self.trainer.discard_after(since)
            last = self.trainer.last_completed
            extra["since_loss"] = max(0.0, self.clock() - since)
        live = self._live_known()
        self.events.emit(eventspec.ELASTIC_DETECTED, recovery=r, kind="slice_lost",
                         error=error_line(error), last_step=last, live_slices=len(live),
                         lost_slices=down, **extra)
        if self.slice_losses > self.trainer.cfg.max_slice_losses:
            self._cleanup(None)
            return self._fail(f"slice-loss budget exhausted: {self.slice_losses} losses > "
                              f"--max-slice-losses {self.trainer.cfg.max_slice_losses}")
        self._cleanup(r)
        self._pending_restore_event = True
        return None

    def _cleanup(self, recovery: int | None) -> None:
        t0 = self.clock()
        fault.disarm()
        ck = self.trainer.ckpt
        if ck is not None:
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
        stop = (lambda: self.trainer.stop_requested is not None) if recovery is not None else None
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

    def _fail(self, reason: str, hint: str | None = None) -> Outcome:
        ck = self.trainer.ckpt
        if ck is not None:
            try:
                ck.reset()
            except Exception as e:  # the run already failed; keep the first reason
                log.info("elastix: checkpoint cleanup failed: %s", error_line(e))
        return Outcome("failed", reason, self.trainer.last_completed, hint)


def warm_by_default() -> bool:
    """Run precompiled steps once in the background (``ElasticRuntime.warm_up``) only on the
    CPU backend: there an executable's first run costs about two steps and the state is small;
    on TPU and Pathways the throw-away state would double the state's footprint in HBM."""
    return jax.default_backend() == "cpu" and not on_pathways()
