"""The writer: one thread that writes a checkpointer's saves, the save in flight, and its settling.

What a save costs the loop is only a copy of the state to host memory (a memcpy on CPU), or
nothing when a host snapshot of the same step was just taken; this thread then has Orbax write
that copy, checks storage (the only source of truth), and settles the ``PendingSave`` the loop
waits on. Handing Orbax the device arrays instead cost the loop its per-save async machinery
(≈ 40 ms, more than a whole ``tiny`` step) and, on the first save, compiling a slice per shard
(≈ 2 s). The exception is ``--pathways-persistence``: there the TPU hosts write their own
shards, so Orbax gets the device arrays and this thread waits for its background write.

Jobs are typed callables (``SetUp``, ``Write``) that hold what they need - the manager slot,
the store, the event log - and never the checkpointer itself, so an idle writer keeps nothing
alive.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from elastix.protocol import eventspec
from elastix_trainer.obs.events import EventLog, log
from elastix_trainer.state.manager import ManagerSlot, first_line, save_args
from elastix_trainer.state.snapshot import host_numpy
from elastix_trainer.state.store import Store

SETTLE_TIMEOUT = 1200.0
"""Seconds to wait for a background write before giving up on it: Orbax's own default for an
async save (``AsyncOptions.timeout_secs``, orbax-checkpoint 0.12)."""


HANDED_TIMEOUT = 60.0
"""Seconds a write waits for ``save()`` to finish handing it over (microseconds, but a loop
interrupted right then must not leave the save unsettled for good)."""


class SaveTimeout(TimeoutError):
    """A background checkpoint write did not settle in time (it is treated as not committed)."""


@dataclasses.dataclass
class PendingSave:
    """The save in flight: made by ``save``, settled by its ``Write`` (possibly on the writer).

    Two one-way signals order what the two threads write: the loop sets ``blocking`` once
    the job is queued, then ``handed``, which the writer waits for before it reads
    ``blocking``; the writer publishes ``ok`` and ``error`` by setting ``done`` last.
    """

    step: int
    start: float
    """``time.monotonic()`` when the save began."""
    blocking: float
    """Seconds ``save()`` held the training loop (waiting for the previous save included)."""
    entered: float = 0.0
    """``time.monotonic()`` when ``save()`` was called (before waiting for the previous save)."""
    copy: float | None = None
    """Seconds from ``start`` until the save's device-to-host copy had its result (0: none
    was made, a snapshot's copy is written; None: the hosts copy their own shards), before
    the hosts answer for it: a save that commits was not hit before it. ``copy_seconds`` in
    its commit."""
    handed: threading.Event = dataclasses.field(default_factory=threading.Event)
    """Set once ``blocking`` holds the whole hand-over, the queue's put included: the writer
    wakes on the same cores and may take the GIL before ``save()`` returns, a wait the loop
    pays as stall."""
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    """Set once the save has settled, committed or not."""
    ok: bool | None = None
    """True committed, False failed; None while in flight."""
    error: str | None = None
    """Why it did not commit (the first line of the error)."""

    def wait(self, timeout: float) -> bool:
        """Whether it committed, once settled.

        Raises:
            SaveTimeout: not settled within ``timeout`` seconds.
        """
        if not self.done.wait(timeout):
            raise SaveTimeout(f"the checkpoint write of step {self.step} did not finish in "
                              f"{timeout:g} s")
        return bool(self.ok)


def report_failed(events: EventLog, step: int, error: str) -> None:
    events.emit(eventspec.CHECKPOINT_SAVE_FAILED, step=step, error=error)


@dataclasses.dataclass
class SetUp:
    """The writer's first job: the one-time set-up (importing Orbax, making the manager and the
    directory) runs beside compilation instead of inside the first save."""

    slot: ManagerSlot

    def __call__(self) -> None:
        self.slot.prepare()


@dataclasses.dataclass
class Write:
    """Write one save and settle it.

    ``host`` is the host copy to write; None: ``mgr`` already holds the device arrays
    (``--pathways-persistence``) and this waits for Orbax's background write. ``waited``: the
    loop runs this itself (not ``async_save``), so its wait counts as blocking.
    """

    pending: PendingSave
    slot: ManagerSlot
    store: Store
    events: EventLog
    host: Any = None
    data_state: dict | None = None
    mgr: Any = None
    waited: bool = False

    def __call__(self) -> None:
        """Whatever fails here (the write, listing storage, counting bytes, writing the event),
        the save is settled in ``finally``: a waiter in ``settle()`` must never wait for a
        thread that died (an events file on a full disk once hung the next save for good)."""
        pending, step = self.pending, self.pending.step
        try:
            self._write()
            seconds = time.monotonic() - pending.start
            if self.waited:  # the loop waited for the write too
                pending.blocking = time.monotonic() - pending.entered
            elif not pending.handed.wait(HANDED_TIMEOUT):
                log.debug("elastix: save() of step %d never finished handing over", step)
            if pending.error is None:
                if step in self.store.committed_steps():
                    self.store.declare(step)  # its checksums, then it is reported committed
                else:
                    pending.error = "not committed on storage"
            if pending.error is None:
                pending.ok = True  # on storage: true even if reporting it fails below
                self.events.emit(eventspec.CHECKPOINT_COMMITTED, step=step, seconds=seconds,
                                 bytes=self.store.step_bytes(step),
                                 blocking_seconds=pending.blocking,
                                 **({} if pending.copy is None else
                                    {"copy_seconds": pending.copy}))
                self._retire()
            else:
                pending.error = pending.error or "not committed on storage"
                report_failed(self.events, step, pending.error)
        except Exception as e:  # noqa: BLE001 - reported, and the save still settles
            pending.error = pending.error or first_line(e)
            log.warning("elastix: settling the checkpoint of step %d failed: %s", step,
                        first_line(e))
        finally:
            pending.ok = bool(pending.ok)
            pending.done.set()

    def _retire(self) -> None:
        """Retire what ``--max-to-keep`` no longer keeps, here on the writer (listing storage
        costs the loop nothing here; on GCS it is a listing and a look per step). A failure
        leaves them on storage and never makes the commit just reported look failed."""
        try:
            self.store.retire()
        except Exception as e:  # noqa: BLE001 - the next commit retires them again
            log.warning("elastix: retiring old checkpoints failed (%s): they are kept",
                        first_line(e))

    def _write(self) -> None:
        """Write (or wait for) the save; a failed write is "not committed", whatever it was."""
        try:
            mgr = self.mgr
            if mgr is None:
                mgr = self.slot.get()
                mgr.save(self.pending.step,
                         args=save_args(host_numpy(self.host), self.data_state), force=True)
            mgr.wait_until_finished()
        except Exception as e:  # noqa: BLE001 - recorded; the save settles as failed
            self.pending.error = first_line(e)


Job = Callable[[], None]


class Writer:
    """The thread that runs a checkpointer's jobs, one after another, for its whole life.

    One thread made at start-up rather than one per save: starting a thread made ``save()``
    wait for the new thread to be scheduled (≈ 1 ms on 2 busy cores, a quarter of a ``small``
    save's stall). It holds its owner weakly and ends once that is gone, or once the owner has
    given it up (``abandon``: a write hung past the timeout, and later saves must not queue
    behind it).
    """

    POLL = 5.0  # seconds between checks that the owner still wants this thread

    def __init__(self, owner: object) -> None:
        self._owner = weakref.ref(owner)
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.abandoned = False
        self.thread = threading.Thread(target=self._run, daemon=True, name="elastix-ckpt-writer")
        self.thread.start()

    def put(self, job: Job) -> None:
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
            if self.abandoned or self._owner() is None:
                return
            if job is not None:
                job()
            del job  # idle, hold nothing: the last host copy is the size of the state
