"""Orbax checkpoints that are chosen from storage, never from a manager's memory.

Why not ``CheckpointManager.latest_step()``: a manager records a step as soon as the blocking
half of an async ``save()`` returns, so a reused manager can name a step whose background write
later failed (the failure behind maxtext#5260). Here the restore step is the newest step that is
*committed on storage* (``store``). Uncommitted directories are never read and are deleted only
when no save is in flight. After an elastic event the manager is thrown away and a new one is
made.

``Checkpointer`` is the face the loop and the elastic runtime see; behind it:

- ``store``: what is on storage (committed, damaged, uncommitted);
- ``writer``: the thread that writes saves, and the save in flight;
- ``restore``: reading a step back, and checking it holds the model being trained;
- ``manager``: the one Orbax manager they share, and how a state is handed to Orbax.

What a save costs the loop is kept to a host copy of the state, so that the checkpoint stall
stays a small fraction of a step (``writer`` says how, ``docs/benchmarks.md`` measures it).

One lock, the manager's (``ManagerSlot``). Every method here is called from one thread, the
training loop's (the elastic runtime drives the loop on it; a signal only sets a flag the loop
reads), so the checkpointer's own fields need none. The writer thread shares two things with
it: the manager (the lock), and the ``PendingSave`` of its job, whose fields each thread writes
in turn, ordered by the queue and by two one-way events (``handed``, ``done``: see there).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from elastix.protocol import eventspec
from elastix_trainer.obs.events import EventLog, log
from elastix_trainer.state.manager import ManagerSlot, first_line, pathways_persistence, save_args
from elastix_trainer.state.restore import check_matches, read
from elastix_trainer.state.snapshot import host_copy
from elastix_trainer.state.store import COMMIT_MARKER, CheckpointsUnreadable, Store
from elastix_trainer.state.writer import (
    SETTLE_TIMEOUT,
    PendingSave,
    SaveTimeout,
    SetUp,
    Write,
    Writer,
    report_failed,
)

__all__ = ["COMMIT_MARKER", "SETTLE_TIMEOUT", "Checkpointer", "CheckpointsUnreadable",
           "SaveTimeout", "check_matches", "pathways_persistence"]


class Checkpointer:
    """Periodic or continuous, async or blocking Orbax saves plus committed-only restores.

    Args:
        directory: local path or ``gs://`` URL.
        period: save every ``period`` steps (0 disables periodic saves).
        events: where ``checkpoint_*`` events go.
        continuous: save whenever the previous save has committed (``period`` is then ignored).
        async_save: write in the background; only the device-to-host copy blocks the loop.
        max_to_keep: intact committed steps to keep (damaged ones are kept too, and not
            counted: ``Store.retire``).
        settle_timeout: seconds a background write may take before it counts as failed.
    """

    def __init__(self, directory: str, period: int, events: EventLog, *, continuous: bool = False,
                 async_save: bool = True, max_to_keep: int = 3,
                 settle_timeout: float = SETTLE_TIMEOUT) -> None:
        self._store = Store(directory, events, max_to_keep)
        self.directory = self._store.directory
        self.period, self.continuous, self.async_save = period, continuous, async_save
        self.max_to_keep = max_to_keep
        self.settle_timeout = settle_timeout
        self.events = events
        self._slot = ManagerSlot(self.directory, async_save)
        self._pending: PendingSave | None = None
        self._stale = False  # left writing through a recovery: the manager goes once it settles
        self.last_verify: tuple[bool, float] | None = None
        """(verified against its manifest, seconds) of the last restore."""
        self._writer = Writer(self)
        self._writer.put(SetUp(self._slot))

    @property
    def damaged(self) -> dict[int, str]:
        """Committed steps that failed to read (step -> the error's first line): skipped."""
        return self._store.damaged

    # -- saving --------------------------------------------------------------------------------
    def due(self, step: int) -> bool:
        """Whether ``step`` should be saved under the policy."""
        if self.continuous:
            return not self.in_flight()
        return self.period > 0 and step % self.period == 0

    def in_flight(self) -> bool:
        """A save started and not yet settled (committed or failed)."""
        pending = self._pending
        return pending is not None and not pending.done.is_set()

    def save(self, step: int, state: Any, data_state: dict, *, host_state: Any = None,
             check: Callable[[str], None] | None = None,
             probe: Callable[[str], None] | None = None) -> None:
        """Start saving ``state`` (device arrays, already known good) at ``step``.

        Returns once the state is copied to host memory (the next step may donate the device
        buffers); the write goes on in the background when ``async_save``.

        Args:
            host_state: a host copy of ``state`` already taken at this step (a snapshot's):
                written as it is, so the state is not copied a second time.
            check: run as ``check("checkpoint copy")`` once this save's own device-to-host
                copy has ended; if it raises (the copy needed a lost host: the local stand-in's
                verdict), nothing is written and the error propagates, as a failed copy does on
                TPU. Not asked with ``--pathways-persistence``, where the hosts copy their own
                shards and a lost one fails the save by itself.
            probe: run as ``probe("checkpoint copy")`` between that copy's parts (it never
                blocks): if it raises, the copy stops there and fails as ``check`` would.

        Raises:
            Whatever ``check`` or ``probe`` raises (the save is then reported failed, never
            started).
        """
        entered = time.monotonic()
        if self._stale:  # a save left writing through a recovery: now its manager goes
            self.reset()
            self.cleanup_uncommitted()
        elif self.settle() is False:  # one save at a time: Orbax would block on it anyway
            # A manager whose background write failed re-raises that old error from the next
            # save(): start over with a fresh one, and free the half-written directory.
            self.reset()
            self.cleanup_uncommitted()
        if self._store.reclaim(step):  # a damaged directory of this step moved aside
            self.reset()  # the manager listed the old directory as this step
        self.events.emit(eventspec.CHECKPOINT_SAVE_STARTED, step=step)
        start = time.monotonic()
        data_state = dict(data_state)
        copied = None  # with persistence the hosts copy their own shards, unseen here
        if pathways_persistence():  # the hosts write their shards: Orbax copies device arrays
            mgr = self._slot.get()
            try:
                mgr.save(step, args=save_args(state, data_state), force=True)
            except Exception as e:
                report_failed(self.events, step, first_line(e))
                raise
            host = None
        else:
            mgr, host, copied = None, host_state, 0.0
            if host is None:
                try:
                    host = host_copy(state, None if probe is None
                                     else lambda: probe("checkpoint copy"))
                    # The copy's end is when its result exists, before the hosts are asked: a
                    # host that answers for it was alive after this, so a save that commits was
                    # never hit before it (the aim's note reads this as the copy's end). Timed
                    # after the answers instead, it would lag them by however long this thread
                    # waited for a core once they came: on a busy machine a fault sent after a
                    # host answered (the save rightly committed) read as one inside the copy.
                    copied = time.monotonic() - start
                    if check is not None:  # every host answers for the copy it took part in
                        check("checkpoint copy")
                except Exception as e:
                    report_failed(self.events, step, first_line(e))
                    raise
        self._pending = pending = PendingSave(step, start, 0.0, entered, copy=copied)
        job = Write(pending, self._slot, self._store, self.events, host, data_state, mgr,
                    waited=not self.async_save)
        if not self.async_save:
            job()
            return
        if self._writer.abandoned:  # the last one hung in a write: never queue behind it
            self._writer = Writer(self)
        self._writer.put(job)
        pending.blocking = time.monotonic() - entered  # handing it over included
        pending.handed.set()

    def settle(self, timeout: float | None = None) -> bool | None:
        """Wait for the in-flight save, if any. Returns True (committed), False (failed) or None
        (nothing was in flight). Never raises for a failed save: it is simply not committed.

        Raises:
            SaveTimeout: the write did not settle within ``timeout`` (default the checkpointer's
                ``settle_timeout``): a hung write becomes an error, never a silent wait.
        """
        pending = self._pending
        if pending is None:
            return None
        return pending.wait(self.settle_timeout if timeout is None else timeout)

    def leave_writing(self, covered_from: int | None) -> bool:
        """After a failure: leave the save in flight writing, instead of waiting for it, when
        a restore cannot want it. That is when it writes a host copy (its bytes are off the
        devices: a lost host cannot touch them) and the state the recovery restores is at
        least as new (``covered_from``: the step of the newest host snapshot, or None). The
        manager, which a recovery drops, is dropped once the write has settled: at the next
        save or restore (``reset``), so a write that hangs still meets ``settle_timeout``.

        Why: a recovery waited here for a background write it does not need. qwen3-0.6b's
        7.15 GB take 18-28 s to write on a v5e machine, longer than its checkpoint period, so
        a save is in flight most of the time, and a loss then waited for the rest of it
        (docs/benchmarks.md). A restore from the snapshot needs none of it.

        Returns:
            True when the save was left writing; False when the caller must settle it as
            before (nothing in flight, the hosts write their own shards, or no snapshot covers
            its step: a restore could then want the checkpoint it is writing).
        """
        pending = self._pending
        if (pending is None or pending.done.is_set() or pending.copy is None
                or pathways_persistence() or covered_from is None
                or covered_from < pending.step):
            return False
        self._stale = True
        return True

    def last_error(self) -> str | None:
        """Why the last settled save did not commit (None if it did, or nothing was saved)."""
        pending = self._pending
        return pending.error if pending is not None else None

    def reset(self, timeout: float | None = None) -> None:
        """Drop the manager after an elastic event (its in-memory step list may be wrong).
        ``timeout``: how long to wait for a write in flight (default ``settle_timeout``).

        A write that does not settle in time is abandoned with the manager: nothing waits for
        it again, and until it finishes its directory is uncommitted, so it is never restored.
        Should Orbax finish it later, it commits then as a whole step (Orbax's commit is one
        rename after every file is written), its checksums are recorded and its commit is
        reported, late; a restore checks it like any other.
        """
        try:
            self.settle(timeout)
        except SaveTimeout as e:
            log.warning("elastix: %s; abandoning it (not committed, so never restored)", e)
            self._writer.abandon()  # the next save gets a new thread
        finally:
            self._slot.drop()
            self._pending = None
            self._stale = False

    close = reset

    # -- storage view --------------------------------------------------------------------------
    def committed_steps(self) -> list[int]:
        """Steps whose directory is committed on storage, ascending."""
        return self._store.committed_steps()

    def latest_committed(self) -> int | None:
        """The newest committed step that is not damaged, or None."""
        return self._store.latest_committed()

    def uncommitted(self) -> list[str]:
        """Names of step directories that never committed."""
        return self._store.uncommitted()

    def cleanup_uncommitted(self) -> list[str]:
        """Delete uncommitted step directories (only once no save is in flight)."""
        if self.in_flight():
            return []
        return self._store.remove_uncommitted()

    def retire(self) -> list[int]:
        """Delete the committed steps ``max_to_keep`` no longer keeps (``Store.retire``), once
        no save is in flight; returns them. A failure (storage unreadable) leaves them on
        storage, more kept and nothing lost, and never fails the save that asked."""
        if self.in_flight():
            return []
        try:
            return self._store.retire()
        except Exception as e:  # noqa: BLE001 - the next save retires them again
            log.warning("elastix: retiring old checkpoints failed (%s): they are kept",
                        first_line(e))
            return []

    def mark_damaged(self, step: int, error: BaseException) -> None:
        """Remember that committed ``step`` cannot be read, say so, and go on without it.

        Its directory is left where it is (never delete what may be recovered by hand) until
        a save of the same step moves it aside as ``<step>.damaged``.
        """
        self._store.mark_damaged(step, error)

    def unreadable(self) -> CheckpointsUnreadable:
        """The error for "nothing committed can be read" (every damaged step named)."""
        return self._store.unreadable()

    # -- restoring -----------------------------------------------------------------------------
    def restore(self, step: int, abstract_state: Any) -> tuple[Any, dict, int]:
        """Read committed ``step`` onto the shardings in ``abstract_state``, its files checked
        against the checksums of its commit; a step that fails them is never returned.

        Each byte is read from storage once. The check runs beside Orbax's read, not before
        it: on a local disk both read the same files at the same time, so the disk serves
        each page once (the other reader finds it in the page cache) and the checksum's pass
        overlaps the read instead of adding to it; on GCS the check compares the recorded
        checksums with the ones GCS keeps for each object (a listing, no download). Checking
        first and reading after cost a whole second pass: restores ran at 0.54 of reading
        the files cold, against 0.98 without checksums (docs/benchmarks.md).

        Returns:
            (state, data_state, bytes read).

        Raises:
            manifest.ChecksumMismatch: a file is not what was committed (the state read is
                dropped; the caller skips the step).
        """
        if self._stale:  # a save left writing through a recovery: now its manager goes
            self.reset()
        if step not in self.committed_steps():
            raise ValueError(f"step {step} is not committed in {self.directory}")
        checking = _Beside(self._store.verify, step)
        try:
            out = read(self._slot.get(), self.directory, step, abstract_state)
        except BaseException:
            checking.result()  # a damaged file is the reason the read failed, if it is one
            raise
        self.last_verify = checking.result()
        return out

    def verify(self, step: int) -> bool:
        """Check committed ``step``'s files against its manifest (``Store.verify``)."""
        self.last_verify = self._store.verify(step)
        return self.last_verify[0]


class _Beside:
    """``fn(*args)`` on a thread of its own; ``result()`` waits and returns or raises its
    outcome."""

    def __init__(self, fn, *args) -> None:
        self._out: tuple[bool, Any] | None = None

        def run() -> None:
            try:
                self._out = (True, fn(*args))
            except BaseException as e:  # noqa: BLE001 - handed to result()
                self._out = (False, e)

        self._thread = threading.Thread(target=run, name="elastix-verify", daemon=True)
        self._thread.start()

    def result(self) -> Any:
        self._thread.join()
        ok, value = self._out
        if not ok:
            raise value
        return value
