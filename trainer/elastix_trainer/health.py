"""Which slices are alive: pluggable health sources.

- ``PathwaysHealth``: pathwaysutils' own probe (a tiny pmap per slice, failures classified by
  ``is_error_due_to_slice_down``) and its ``wait_for_slices``; reused, not rewritten.
- ``LocalHeartbeatHealth`` (``elastix_trainer.local_health``, the local backend's): heartbeats
  from local slice-host processes; imported only when ``ELASTIX_LOCAL_HEALTH`` is set.
- ``StaticHealth``: every slice always up (plain CPU runs).
- ``ManualHealth``: tests flip slices down/up; ``on_wait`` lets a test bring slices back exactly
  when the runtime starts waiting, with no sleeps.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable


class SliceWaitTimeout(TimeoutError):
    """Not enough slices came up in time (raised by every health source's ``wait_for``)."""


@runtime_checkable
class HealthSource(Protocol):
    """The view of slice health the elastic runtime uses."""

    def live_slices(self) -> frozenset[int]:
        """Current view, non-blocking."""
        ...

    def wait_for(self, required: int, timeout: float) -> frozenset[int]:
        """Block until >= ``required`` slices are live; raise on timeout."""
        ...

    def close(self) -> None:
        """Stop any background work."""
        ...


class StaticHealth:
    """All ``num_slices`` slices, always live."""

    def __init__(self, num_slices: int) -> None:
        self._all = frozenset(range(num_slices))

    def live_slices(self) -> frozenset[int]:
        return self._all

    def wait_for(self, required: int, timeout: float) -> frozenset[int]:
        if required > len(self._all):
            raise SliceWaitTimeout(f"only {len(self._all)} slices exist, {required} required")
        return self._all

    def close(self) -> None:
        pass


class ManualHealth:
    """Slices set down/up by the caller (tests, demos). Thread-safe."""

    def __init__(self, num_slices: int) -> None:
        self.num_slices = num_slices
        self._live = set(range(num_slices))
        self._cond = threading.Condition()
        self.on_wait: Callable[[ManualHealth, int], None] | None = None
        self.waits: list[int] = []  # `required` of every wait_for call

    def set_down(self, *slices: int) -> None:
        with self._cond:
            self._live.difference_update(slices)
            self._cond.notify_all()

    def set_up(self, *slices: int) -> None:
        with self._cond:
            self._live.update(slices)
            self._cond.notify_all()

    def live_slices(self) -> frozenset[int]:
        with self._cond:
            return frozenset(self._live)

    def wait_for(self, required: int, timeout: float) -> frozenset[int]:
        self.waits.append(required)
        if self.on_wait is not None:
            self.on_wait(self, required)
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._live) < required:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SliceWaitTimeout(
                        f"{len(self._live)} of {required} required slices live after {timeout:g} s")
                self._cond.wait(left)
            return frozenset(self._live)

    def close(self) -> None:
        pass


def probe(health: HealthSource) -> frozenset[int]:
    """A fresh view: the source's ``probe()`` when it has one (a blocking check now), else its
    ``live_slices()`` (already current for heartbeats, static and manual sources)."""
    fresh = getattr(health, "probe", None)
    return fresh() if fresh is not None else health.live_slices()


class PathwaysHealth:
    """pathwaysutils' slice probe.

    ``live_slices()`` returns the last view (never blocks the training loop). ``probe()``
    checks every slice now (the classifier calls it when an error arrives: a cached view can
    be up to ``poll`` seconds old, exactly the window in which Pathways reports a lost slice).
    A background thread re-checks only the slices last seen down, every ``poll`` seconds, as
    pathwaysutils' own ``Manager`` does (``_check_inactive_slices``): live slices need no probe,
    their failures arrive as errors. ``wait_for`` is pathwaysutils' ``wait_for_slices`` with a
    timeout (raised as SliceWaitTimeout).
    """

    def __init__(self, slice_to_devices: dict | None = None, poll: float = 10.0) -> None:
        from pathwaysutils.elastic import elastic

        self._elastic = elastic
        if slice_to_devices is None:
            import jax

            slice_to_devices = elastic.get_slice_to_devices(jax.devices())
        self.slice_to_devices = dict(slice_to_devices)
        self.poll = poll
        self._live = frozenset(elastic.get_active_slice_indices(self.slice_to_devices))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._monitor, daemon=True,
                                        name="elastix-pathways-health")
        self._thread.start()

    def _monitor(self) -> None:
        while not self._stop.wait(self.poll):
            down = {i: d for i, d in self.slice_to_devices.items() if i not in self._live}
            if not down:
                continue
            try:
                back = frozenset(self._elastic.get_active_slice_indices(down))
            except Exception:  # a failed probe is not a verdict; keep the last view
                continue
            self._live = self._live | back

    def live_slices(self) -> frozenset[int]:
        return self._live

    def probe(self) -> frozenset[int]:
        """Check every slice now (blocking) and remember the answer."""
        self._live = frozenset(self._elastic.get_active_slice_indices(self.slice_to_devices))
        return self._live

    def wait_for(self, required: int, timeout: float) -> frozenset[int]:
        try:
            live = self._elastic.wait_for_slices(
                slice_count=required, poll_interval=min(self.poll, 5.0), timeout=timeout,
                slice_to_devices=self.slice_to_devices)
        except TimeoutError as e:  # pathwaysutils lets this escape un-retried; make it ours
            raise SliceWaitTimeout(str(e)) from None
        self._live = frozenset(live)
        return self._live

    def close(self) -> None:
        self._stop.set()


def on_pathways() -> bool:
    """True when JAX talks to Pathways through the IFRT proxy."""
    return "proxy" in os.environ.get("JAX_PLATFORMS", "")


def lost(mesh_slices: Iterable[int], health: HealthSource) -> frozenset[int]:
    """Slices of ``mesh_slices`` the health source says are down."""
    return frozenset(mesh_slices) - health.live_slices()
