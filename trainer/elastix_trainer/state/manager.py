"""The Orbax side of a checkpointer: its one manager, how a state is saved, an error's one line.

The writer (saves) and the restore share one ``CheckpointManager``; this module makes it, once,
under a lock of its own (see ``ManagerSlot``), and says how a state is handed to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import threading
from typing import Any

import jax
import numpy as np

from elastix.protocol import envvars
from elastix_trainer import storage
from elastix_trainer.obs.events import log

CHUNK_BYTES = 16 << 20
"""Largest stored chunk of a host copy. Orbax writes a numpy array as one chunk, so a device
restoring half of it read and decoded all of it; chunks this size are read only where
needed, by several threads at once."""


def pathways_persistence() -> bool:
    """``--pathways-persistence`` is on (TPU hosts read and write checkpoint data)."""
    return os.environ.get(envvars.PATHWAYS_PERSISTENCE, "") in ("1", "true", "True")


def save_args(state: Any, data_state: dict):
    """Orbax's arguments to save ``state`` (a host copy, or device arrays under persistence)
    and the data iterator's position."""
    import orbax.checkpoint as ocp

    if pathways_persistence():
        item = ocp.args.StandardSave(state)
    else:
        item = ocp.args.PyTreeSave(state, save_args=jax.tree.map(
            lambda _: ocp.SaveArgs(chunk_byte_size=CHUNK_BYTES), state))
    return ocp.args.Composite(state=item, data=ocp.args.JsonSave(data_state))


WRITE_WINDOW_BYTES: int | None = 512 << 20
"""Bytes of host arrays a checkpoint writes at once (None: all at once, as Orbax does; an
array larger than the window is written alone). Why: tensorstore copies each chunk that is not
contiguous in its array while it writes it (the stacked layers are chunked across their inner
axes, so a device restoring a shard reads only its part), and Orbax starts every array's write
together, so a save held those copies for 0.64x of bench-1g's state and 0.61x of qwen3-0.6b's
(7.15 GB) at its peak. With this window: 0.12x of qwen3-0.6b's, its write 13.4-13.8 s against
8.4-12.5 s on local disk (``bench/bench_save_memory.py``; docs/benchmarks.md, "The A/B of
failing the queued steps, and the host memory a checkpoint's write holds"). A write is in the
background; host memory is what ran a TPU VM out."""


class InFlight:
    """A byte budget for concurrent writes on one event loop (Orbax runs each save's writes
    on a loop of its own, so a budget is made for the loop that uses it)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0
        self.loop = asyncio.get_running_loop()
        self.cond = asyncio.Condition()

    def current(self) -> bool:
        return asyncio.get_running_loop() is self.loop

    @contextlib.asynccontextmanager
    async def hold(self, n: int):
        async with self.cond:
            await self.cond.wait_for(lambda: self.used == 0 or self.used + n <= self.limit)
            self.used += n
        try:
            yield
        finally:
            async with self.cond:
                self.used -= n
                self.cond.notify_all()


def read_only(a: np.ndarray) -> bool:
    """Nothing can write ``a``'s bytes through numpy: neither ``a`` nor an array it views."""
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        a = a.base
    return True


class HostCopyRegistry:
    """Orbax's type handlers (its global registry) with one change: a numpy array that nothing
    can write (``flags.writeable`` False) is written as it is, not deep-copied first.

    Orbax's ``NumpyHandler`` copies every host array it is handed before the write starts (a
    guard against the caller changing it meanwhile). The arrays a checkpoint writes here are
    host copies of the state (``snapshot.host_copy``, a staged read, ``host_numpy``): numpy's
    read-only views of buffers JAX owns and never writes again (a donated step leaves them as
    they were). Copying them held a second copy of the state for the whole write: with
    bench-1g's 1.21 GiB state on CPU a save's peak host memory was 1.64x the state beside it,
    0.64x without the copy (docs/benchmarks.md, "The A/B of failing the queued steps, and
    the host memory a checkpoint's write holds"). An array that can be written (or that
    views one) is still copied first.
    """

    def __init__(self) -> None:
        import orbax.checkpoint as ocp

        class ReadOnlyAsIs(ocp.type_handlers.NumpyHandler):
            window: InFlight | None = None

            async def serialize(self, values, infos, args=None):
                values = [v if read_only(v) else v.copy() for v in values]
                return await super().serialize(values, infos, args)

            async def _open_and_write(self, value, tspec, ts_context):
                # Orbax starts every array's write at once; a window bounds the chunk copies
                # tensorstore holds meanwhile (``WRITE_WINDOW_BYTES``)
                window = WRITE_WINDOW_BYTES
                if window is None:
                    return await super()._open_and_write(value, tspec, ts_context)
                if self.window is None or not self.window.current():
                    self.window = InFlight(window)
                async with self.window.hold(value.nbytes):
                    return await super()._open_and_write(value, tspec, ts_context)

        try:
            self._numpy = ReadOnlyAsIs(deepcopy_host_arrays=False)
        except TypeError:  # an Orbax from before the option (and its copy)
            self._numpy = ReadOnlyAsIs()
        self._global = ocp.type_handlers

    def _is_numpy(self, ty: Any) -> bool:
        if isinstance(ty, str):
            return ty == self._numpy.typestr()
        return isinstance(ty, type) and issubclass(ty, np.ndarray)

    def add(self, *args, **kwargs) -> None:
        raise TypeError("elastix's checkpoint handler registry is fixed; register types "
                        "with orbax.checkpoint.type_handlers.register_type_handler")

    def get(self, ty: Any):
        return self._numpy if self._is_numpy(ty) else self._global.get_type_handler(ty)

    def has(self, ty: Any) -> bool:
        return self._is_numpy(ty) or self._global.has_type_handler(ty)


def new_manager(directory: str, async_save: bool):
    """A ``CheckpointManager`` on ``directory`` whose listing elastix never trusts (the restore
    step is read from storage: see ``store``), and which deletes nothing: ``--max-to-keep`` is
    applied by ``Store.retire``, which knows damaged steps (Orbax counts them as kept)."""
    import orbax.checkpoint as ocp

    if pathways_persistence():
        # Hosts write their own shards: Orbax's Pathways array handler refuses OCDBT
        # ("OCDBT not supported for Pathways"), and MaxText documents
        # checkpoint_storage_use_ocdbt "Set to 0 for Pathways".
        state = ocp.StandardCheckpointHandler(use_ocdbt=False)
    else:
        # Uncompressed: zstd bought ~8 % of a float state's bytes and cost a restore most
        # of its time (it decoded at a fifth of the disk's read speed; docs/benchmarks.md).
        # Checkpoints written compressed still restore: the codec is in their metadata.
        # Host copies are written as they are (``HostCopyRegistry``).
        state = ocp.PyTreeCheckpointHandler(use_compression=False,
                                            type_handler_registry=HostCopyRegistry())
    return ocp.CheckpointManager(
        storage.epath(directory),
        item_handlers={"state": state, "data": ocp.JsonCheckpointHandler()},
        options=ocp.CheckpointManagerOptions(
            max_to_keep=None, create=True,
            # A host copy is written on our own thread, synchronously there; only
            # device arrays (persistence) need Orbax's async copy-then-write.
            enable_async_checkpointing=async_save and pathways_persistence(),
            # Our own cleanup runs only when nothing is in flight (see cleanup_uncommitted).
            cleanup_tmp_directories=False,
        ),
    )


class ManagerSlot:
    """The checkpointer's manager, made on first use and dropped after an elastic event.

    Why a lock: three threads may want the manager at once, the writer's start-up job (making
    it beside compilation), a write, and a restore or a ``--pathways-persistence`` save on the
    loop's thread; without it two of them could each make one on the same directory. It is not
    shared with anything the loop asks every step (``in_flight``): making a manager imports
    Orbax and can take seconds, and the loop must never wait for that to learn whether a save
    is in flight.
    """

    def __init__(self, directory: str, async_save: bool) -> None:
        self._args = (directory, async_save)
        self._mgr = None
        self._lock = threading.Lock()

    def get(self):
        with self._lock:
            if self._mgr is None:
                self._mgr = new_manager(*self._args)
            return self._mgr

    def prepare(self) -> None:
        """Make the manager now (the writer's first job); a failure is the first save's to
        report, when it makes the manager again."""
        try:
            self.get()
        except Exception as e:  # noqa: BLE001 - the first save makes it again and reports it
            log.debug("elastix: preparing the checkpoint manager failed: %s", first_line(e))

    def drop(self) -> None:
        """Forget the manager (its in-memory step list may be wrong) and close it."""
        with self._lock:
            mgr, self._mgr = self._mgr, None
        if mgr is not None:
            try:
                mgr.close()
            except Exception as e:  # a manager that saw a failed save may fail to close
                # with that save's error, already reported as checkpoint_save_failed.
                log.debug("elastix: closing the old checkpoint manager failed: %s",
                          first_line(e))


# Orbax's read errors end with "See full TensorStore details: <bound method ... spec of
# TensorStore({...": a repr of a pybind11 method, useless in a line for a user. The reason it
# stands for is the error's cause (e.g. "OUT_OF_RANGE: ... byte range ... is not valid").
_TENSORSTORE_TAIL = re.compile(r"\s*See full TensorStore details:.*", re.S)


def first_line(e: BaseException) -> str:
    """One readable line of an error (storage and Orbax errors run to pages)."""
    text = str(e).strip()
    cut = _TENSORSTORE_TAIL.sub("", text)
    line = (cut.splitlines() or [type(e).__name__])[0].strip() or type(e).__name__
    if cut != text and e.__cause__ is not None:
        line = f"{line.rstrip('.')}: {first_line(e.__cause__)}"
    return line[:500]
