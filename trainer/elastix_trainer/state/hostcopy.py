"""A host copy of the state taken while the steps go on (``--snapshot-copy overlap`` and
``staged``): what the copy is for, when it began, and, for a staged copy, the thread that reads
it from the devices. The training loop lands it (``train.Trainer._land``); ``state.snapshot``
says why these copy modes exist and what each measured on a chip."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

import jax
import numpy as np

from elastix_trainer.state.snapshot import host_numpy


@dataclasses.dataclass
class HostCopy:
    """A host copy of step ``step``'s state taken while later steps run: by the next step
    (``--snapshot-copy overlap``) or read from a copy on the devices by a thread (``staged``,
    :meth:`fetch`). It lands, as a snapshot or a checkpoint's copy, once it is whole
    (``Trainer._land``)."""

    step: int
    data_state: dict
    snapshot: bool
    """It becomes the host snapshot once it lands."""
    checkpoint: bool
    """A checkpoint of ``step`` is written from it once it lands."""
    began: float
    host: object = None
    """The copy: the state's arrays in pinned host memory (set at the copying dispatch), or
    numpy arrays (a staged copy, set by its reader once whole)."""
    finite: object = None
    """A device scalar: the copied state held no NaN or inf."""
    blocking: float = 0.0
    """Seconds the loop waited to start it."""
    done: threading.Event | None = None
    """A staged copy's read to the host has ended (``fetch``); None for any other copy."""
    ended: float | None = None
    """When that read ended (``time.monotonic``)."""
    error: BaseException | None = None
    """What that read raised: the copy is never kept."""

    def fetch(self, on_device, finite, check: Callable[[], None]) -> None:
        """Read ``on_device`` (the staged copy: device arrays) and ``finite`` (its device
        scalar) to host memory in a thread, every array's transfer started first, then have
        ``check`` (the hosts' verdict on the copy) raise if it failed; ``done`` is set when it
        has all ended. The read's end is taken before the verdict, as for a boundary copy."""
        self.done = threading.Event()

        def read(tree, finite) -> None:
            try:
                for x in jax.tree.leaves(tree):
                    x.copy_to_host_async()
                self.host = host_numpy(tree)
                self.finite = bool(np.asarray(finite))
                self.ended = time.monotonic()
                del tree  # its device memory goes as soon as the host copy exists
                check()
            except BaseException as e:  # noqa: BLE001 - raised where the copy lands
                self.error = e
            finally:
                self.done.set()

        threading.Thread(target=read, args=(on_device, finite),
                         name=f"elastix-host-copy-{self.step}", daemon=True).start()
