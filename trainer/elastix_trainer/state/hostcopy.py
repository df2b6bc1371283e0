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

READ_WINDOW_BYTES: int | None = 128 << 20
"""Bytes of a staged copy's read in flight at once (None: every array's transfer started
first). Why a window: on a v5e chip, with every array of bench-1g's 1.3 GB state started at
once, the steps' own small transfers (the loss the loop reads) queued behind the read, and the
steps beside each read lost 0.16-0.31 s in all (18 reads); read 128 MiB at a time (its largest
array is 125 MiB) they lost 0.006-0.041 s (18 reads), and the read took as long (0.65-1.07 s
against 0.56-1.12 s; docs/benchmarks.md, issue 58's fifth session)."""


COPY_WINDOW_BYTES: int | None = 512 << 20
"""Bytes of a boundary copy's transfers in flight at once per device the state spans
(``snapshot.host_copy``: a sync snapshot, a checkpoint's own copy; ``copy_window``). Why a
window: on a v5e chip (one device) 6.5 GiB read to the host in 2.2-2.3 s through it, against
4.6-5.7 s with every transfer started at once, side by side in one process (1 GiB: 2.3 s;
256 MiB: 2.7 s). Why per device: that chip is the only one measured; a state spread over more
devices (a pod slice, Pathways' many hosts) moves more bytes at once, so there the window
grows with them (at 64 devices, 32 GiB: about every transfer at once, as before it). And
between its parts the copy asks whether it can still complete (``Devices.check_transfer``);
what a copy that cannot leaves running is at most the window. On the local backend with its
head on a v5e chip, a kill during qwen3-0.6b's 7.15 GB copy (5.4-6.4 s then) was seen only
at the copy's end: detection took 1.5 and 4.2 s of a 5.4 and 8.6 s recovery
(docs/benchmarks.md, issue 58's ninth session)."""


def copy_window(tree) -> int | None:
    """``COPY_WINDOW_BYTES`` times the number of devices ``tree``'s arrays span."""
    if COPY_WINDOW_BYTES is None:
        return None
    devices = set()
    for x in jax.tree.leaves(tree):
        if isinstance(x, jax.Array):
            devices |= x.sharding.device_set
    return COPY_WINDOW_BYTES * max(1, len(devices))


def read_windowed(tree, window: int | None, probe: Callable[[], None] | None = None):
    """``tree`` (device arrays) read to host numpy arrays, with at most ``window`` bytes of
    transfers started and not yet read (an array larger than the window goes alone).
    ``probe`` runs before each wait for a transfer: if it raises, the read stops there, with
    at most ``window`` bytes of transfers left running (every array's, with no window)."""
    leaves, treedef = jax.tree.flatten(tree)
    limit = float("inf") if window is None else window
    sizes = [x.nbytes if isinstance(x, jax.Array) else 0 for x in leaves]
    out: list = [None] * len(leaves)
    done = inflight = 0

    def read_oldest() -> None:
        nonlocal done, inflight
        if probe is not None:
            probe()
        out[done] = np.asarray(leaves[done])
        inflight -= sizes[done]
        done += 1

    for i, x in enumerate(leaves):
        while done < i and inflight + sizes[i] > limit:
            read_oldest()
        if sizes[i]:
            x.copy_to_host_async()
        inflight += sizes[i]
    while done < len(leaves):
        read_oldest()
    return jax.tree.unflatten(treedef, out)


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
    slice_ids: frozenset[int] | None = None
    """The slices whose devices held the state it copies (a staged copy's)."""

    def fetch(self, on_device, finite, check: Callable[[], None],
              probe: Callable[[], None] | None = None) -> None:
        """Read ``on_device`` (the staged copy: device arrays) and ``finite`` (its device
        scalar) to host memory in a thread, ``READ_WINDOW_BYTES`` at a time, then have
        ``check`` (the hosts' verdict on the copy) raise if it failed; ``done`` is set when it
        has all ended. ``probe`` (``Devices.check_transfer``) runs between the read's parts:
        a copy that can no longer complete ends there, failed. The read's end is taken before
        the verdict, as for a boundary copy."""
        self.done = threading.Event()

        def read(tree, finite) -> None:
            try:
                self.host = read_windowed(tree, READ_WINDOW_BYTES, probe)
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
