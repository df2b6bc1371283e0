"""Orbax checkpoints that are chosen from storage, never from a manager's memory.

Why not ``CheckpointManager.latest_step()``: a manager records a step as soon as the blocking
half of an async ``save()`` returns, so a reused manager can name a step whose background write
later failed (the failure behind maxtext#5260). Here the restore step is the newest step that is
*committed on storage* - a plain ``<step>`` directory on a local disk (Orbax renames
``<step>.orbax-checkpoint-tmp`` when it commits), or a ``<step>`` directory holding
``commit_success.txt`` on GCS. Uncommitted directories are never read and are deleted only when
no save is in flight. After an elastic event the manager is thrown away and a new one is made.

What a save costs the loop (issue 15): only a copy of the state to host memory (a memcpy on
CPU), or nothing when a host snapshot of the same step was just taken. Orbax then writes that
host copy on a thread of ours, with a manager made at start-up. Handing Orbax the device arrays
instead cost the loop its per-save async machinery (≈ 40 ms, more than a whole ``tiny`` step)
and, on the first save, compiling a slice per shard (≈ 2 s). The exception is
``--pathways-persistence``: there the TPU hosts write their own shards, so Orbax gets the device
arrays as before.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
import weakref
from typing import Any

from elastix.protocol import eventspec
from elastix_trainer.obs.events import EventLog, log
from elastix_trainer.state.manager import ManagerSlot, first_line, pathways_persistence, save_args
from elastix_trainer.state.restore import check_matches, read
from elastix_trainer.state.snapshot import host_copy
from elastix_trainer.state.store import COMMIT_MARKER, CheckpointsUnreadable, Store

__all__ = ["COMMIT_MARKER", "Checkpointer", "CheckpointsUnreadable", "SaveTimeout", "check_matches"]


@dataclasses.dataclass
class PendingSave:
    """The save in flight: set by ``save``, settled by ``_finish`` (possibly on another thread)."""

    step: int
    start: float
    """``time.monotonic()`` when the save began."""
    blocking: float
    """Seconds ``save()`` held the training loop (waiting for the previous save included)."""
    entered: float = 0.0
    """``time.monotonic()`` when ``save()`` was called (before waiting for the previous save)."""
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    """Set once the save has settled, committed or not."""
    ok: bool | None = None
    """True committed, False failed; None while in flight."""
    error: str | None = None
    """Why it did not commit (the first line of the error)."""


SETTLE_TIMEOUT = 1200.0
"""Seconds to wait for a background write before giving up on it: Orbax's own default for an
async save (``AsyncOptions.timeout_secs``, orbax-checkpoint 0.12)."""


class _Writer:
    """The thread that writes a checkpointer's saves, one after another, for its whole life.

    One thread made at start-up rather than one per save: starting a thread made ``save()``
    wait for the new thread to be scheduled (≈ 1 ms on 2 busy cores, a quarter of a ``small``
    save's stall). Its first job is the checkpointer's one-time set-up. It holds its
    checkpointer weakly and ends once that is gone, or once the checkpointer has given it up
    (``abandon``: a write hung past the timeout, and later saves must not queue behind it).
    """

    POLL = 5.0  # seconds between checks that the checkpointer still wants this thread

    def __init__(self, owner: Checkpointer) -> None:
        self._owner = weakref.ref(owner)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.abandoned = False
        self.thread = threading.Thread(target=self._run, daemon=True, name="elastix-ckpt-writer")
        self.thread.start()

    def put(self, job: tuple[str, tuple]) -> None:
        """Queue ``(method name, args)``: the method is looked up on the checkpointer when the
        job runs (a bound method in the queue would hold it strongly)."""
        self._jobs.put(job)

    def abandon(self) -> None:
        self.abandoned = True
        self._jobs.put(None)  # wakes an idle thread so that it ends

    def _run(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self.POLL)
            except queue.Empty:
                job = None
            if self.abandoned:
                return
            owner = self._owner()
            if owner is None:
                return
            if job is not None:
                name, args = job
                getattr(owner, name)(*args)
            # Idle, hold neither the checkpointer (weakly held) nor the last host copy.
            del owner, job


class SaveTimeout(TimeoutError):
    """A background checkpoint write did not settle in time (it is treated as not committed)."""


class Checkpointer:
    """Periodic or continuous, async or blocking Orbax saves plus committed-only restores.

    Args:
        directory: local path or ``gs://`` URL.
        period: save every ``period`` steps (0 disables periodic saves).
        events: where ``checkpoint_*`` events go.
        continuous: save whenever the previous save has committed (``period`` is then ignored).
        async_save: write in the background; only the device-to-host copy blocks the loop.
        max_to_keep: committed steps to keep.
    """

    def __init__(self, directory: str, period: int, events: EventLog, *, continuous: bool = False,
                 async_save: bool = True, max_to_keep: int = 3,
                 settle_timeout: float = SETTLE_TIMEOUT) -> None:
        self._store = Store(directory, events)
        self.directory = self._store.directory
        self.period, self.continuous, self.async_save = period, continuous, async_save
        self.max_to_keep = max_to_keep
        self.settle_timeout = settle_timeout
        self.events = events
        self._slot = ManagerSlot(self.directory, max_to_keep, async_save)
        self._pending: PendingSave | None = None
        self._lock = threading.Lock()
        self.last_verify: tuple[bool, float] | None = None
        """(verified against its manifest, seconds) of the last restore."""
        # One-time set-up (importing Orbax, making the manager and the directory) runs now on
        # the writer, beside compilation, instead of inside the first save.
        self._writer = _Writer(self)
        self._writer.put(("_set_up", ()))

    @property
    def damaged(self) -> dict[int, str]:
        """Committed steps that failed to read (step -> the error's first line): skipped."""
        return self._store.damaged

    @property
    def void(self) -> set[int]:
        """Steps saved here that completed after a slice was gone: never restored."""
        return self._store.void

    # -- saving --------------------------------------------------------------------------------
    def _set_up(self) -> None:
        self._slot.prepare()

    def due(self, step: int) -> bool:
        """Whether ``step`` should be saved under the policy."""
        if self.continuous:
            return not self.in_flight()
        return self.period > 0 and step % self.period == 0

    def in_flight(self) -> bool:
        """A save started and not yet settled (committed or failed)."""
        with self._lock:
            return self._pending is not None and not self._pending.done.is_set()

    def save(self, step: int, state: Any, data_state: dict, *, host_state: Any = None) -> None:
        """Start saving ``state`` (device arrays, already known good) at ``step``.

        Returns once the state is copied to host memory (the next step may donate the device
        buffers); the write goes on in the background when ``async_save``.

        Args:
            host_state: a host copy of ``state`` already taken at this step (a snapshot's):
                written as it is, so the state is not copied a second time.
        """
        entered = time.monotonic()
        if self.settle() is False:  # one save at a time: Orbax would block on it anyway
            # A manager whose background write failed re-raises that old error from the next
            # save(): start over with a fresh one, and free the half-written directory.
            self.reset()
            self.cleanup_uncommitted()
        if self._store.reclaim(step):  # a damaged or void directory of this step moved aside
            self.reset()  # the manager listed the old directory as this step
        self.events.emit(eventspec.CHECKPOINT_SAVE_STARTED, step=step)
        start = time.monotonic()
        data_state = dict(data_state)
        if pathways_persistence():  # the hosts write their shards: Orbax copies device arrays
            mgr = self._slot.get()
            try:
                mgr.save(step, args=save_args(state, data_state), force=True)
            except Exception as e:
                self._failed(step, first_line(e))
                raise
            write = None
        else:
            mgr, write = None, host_state if host_state is not None else host_copy(state)
        self._store.copied(step)
        pending = PendingSave(step, start, 0.0, entered)
        if not self.async_save:
            with self._lock:
                self._pending = pending
            self._finish(mgr, pending, write, data_state)
            return
        with self._lock:  # _finish reads ``blocking`` under the lock: it is set first
            self._pending = pending
            if self._writer.abandoned:  # the last one hung in a write: never queue behind it
                self._writer = _Writer(self)
            self._writer.put(("_finish", (mgr, pending, write, data_state)))
            pending.blocking = time.monotonic() - entered  # handing it over included

    def _finish(self, mgr, pending: PendingSave, host: Any = None,
                data_state: dict | None = None) -> None:
        """Write ``host`` (a host copy; None: ``mgr`` already has the device arrays) or wait
        for Orbax's background write, then check storage (the only source of truth).

        Whatever fails here (the write, listing storage, counting bytes, writing the event), the
        save is settled in ``finally``: a waiter in ``settle()`` must never wait for a thread
        that died (an events file on a full disk once hung the next save for good).
        """
        step = pending.step
        try:
            try:
                if mgr is None:
                    mgr = self._slot.get()
                    mgr.save(step, args=save_args(host, data_state), force=True)
                mgr.wait_until_finished()
            except Exception as e:  # a failed write is "not committed", whatever it was
                pending.error = first_line(e)
            seconds = time.monotonic() - pending.start
            with self._lock:
                if not self.async_save:  # the loop waited for the write too
                    pending.blocking = time.monotonic() - pending.entered
                blocking = pending.blocking
            if pending.error is None and step in self.committed_steps():
                pending.error = self._store.declare(step)
            if pending.error is None:
                pending.ok = True  # on storage: true even if reporting it fails below
                nbytes = self._store.step_bytes(step)
                self.events.emit(eventspec.CHECKPOINT_COMMITTED, step=step, seconds=seconds,
                                 bytes=nbytes, blocking_seconds=blocking)
            else:
                pending.error = pending.error or "not committed on storage"
                self._failed(step, pending.error)
        except Exception as e:  # noqa: BLE001 - reported, and the save still settles
            pending.error = pending.error or first_line(e)
            log.warning("elastix: settling the checkpoint of step %d failed: %s", step,
                        first_line(e))
        finally:
            pending.ok = bool(pending.ok)
            pending.done.set()

    def _failed(self, step: int, error: str) -> None:
        self.events.emit(eventspec.CHECKPOINT_SAVE_FAILED, step=step, error=error)

    def settle(self, timeout: float | None = None) -> bool | None:
        """Wait for the in-flight save, if any. Returns True (committed), False (failed) or None
        (nothing was in flight). Never raises for a failed save: it is simply not committed.

        Raises:
            SaveTimeout: the write did not settle within ``timeout`` (default the checkpointer's
                ``settle_timeout``): a hung write becomes an error, never a silent wait.
        """
        with self._lock:
            pending = self._pending
        if pending is None:
            return None
        wait = self.settle_timeout if timeout is None else timeout
        if not pending.done.wait(wait):
            raise SaveTimeout(f"the checkpoint write of step {pending.step} did not finish in "
                              f"{wait:g} s")
        return pending.ok

    def last_error(self) -> str | None:
        """Why the last settled save did not commit (None if it did, or nothing was saved)."""
        with self._lock:
            return self._pending.error if self._pending is not None else None

    def reset(self) -> None:
        """Drop the manager after an elastic event (its in-memory step list may be wrong).

        A write that does not settle in time is abandoned with the manager: its directory is
        uncommitted, so it is never restored.
        """
        try:
            self.settle()
        except SaveTimeout as e:
            log.warning("elastix: %s; abandoning it (it is not committed)", e)
            self._writer.abandon()  # the next save gets a new thread
        finally:
            self._slot.drop()
            with self._lock:
                self._pending = None

    close = reset

    # -- storage view --------------------------------------------------------------------------
    def committed_steps(self) -> list[int]:
        """Steps whose directory is committed on storage, ascending."""
        return self._store.committed_steps()

    def latest_committed(self) -> int | None:
        """The newest committed step that is neither damaged nor void, or None."""
        return self._store.latest_committed()

    def uncommitted(self) -> list[str]:
        """Names of step directories that never committed."""
        return self._store.uncommitted()

    def cleanup_uncommitted(self) -> list[str]:
        """Delete uncommitted step directories (only once no save is in flight)."""
        if self.in_flight():
            return []
        return self._store.remove_uncommitted()

    def void_newer(self, step: int, since: float) -> list[int]:
        """Void the steps after ``step`` that this process saved after monotonic time
        ``since`` (they completed after a slice was gone); returns them. A save of one still in
        flight will not commit; one already reported committed stays on storage, skipped."""
        return self._store.void_newer(step, since)

    def mark_damaged(self, step: int, error: BaseException) -> None:
        """Remember that committed ``step`` cannot be read, say so, and go on without it.

        Its directory is left where it is (never delete what may be recovered by hand) until
        a save of the same step moves it aside as ``<step>.damaged``.
        """
        self._store.mark_damaged(step, error)

    def unreadable(self) -> CheckpointsUnreadable:
        """The error for "nothing committed can be read" (every damaged step named)."""
        return self._store.unreadable()

    # -- restoring ------------------------------------------------------------------------------
    def restore(self, step: int, abstract_state: Any) -> tuple[Any, dict, int]:
        """Read committed ``step`` onto the shardings in ``abstract_state``, its files first
        checked against the checksums of its commit.

        Returns:
            (state, data_state, bytes read).
        """
        if step not in self.committed_steps():
            raise ValueError(f"step {step} is not committed in {self.directory}")
        self.verify(step)
        return read(self._slot.get(), self.directory, step, abstract_state)

    def verify(self, step: int) -> bool:
        """Check committed ``step``'s files against its manifest (``Store.verify``)."""
        self.last_verify = self._store.verify(step)
        return self.last_verify[0]
