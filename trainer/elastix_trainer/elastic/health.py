"""Which slices are alive: pluggable health sources.

- ``PathwaysHealth``: pathwaysutils' own probe (a tiny pmap per slice, failures classified by
  ``is_error_due_to_slice_down``); reused, not rewritten. On GKE a watch on the worker pods
  (``elastix_trainer.elastic.podwatch``) says when to probe, never what the answer is.
- ``LocalHeartbeatHealth`` (``elastix_trainer.elastic.local.health``, the local backend's): heartbeats
  from local slice-host processes; imported only when ``ELASTIX_LOCAL_HEALTH`` is set.
- ``StaticHealth``: every slice always up (plain CPU runs).
- ``ManualHealth``: tests flip slices down/up; ``on_wait`` lets a test bring slices back exactly
  when the runtime starts waiting, with no sleeps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from elastix.errors import ElastixError
from elastix.protocol.heartbeat import DEFAULT_TIMEOUT

WAIT_HINT = ("`elastix workload status` shows the missing slice's hosts; a longer "
             "--slice-wait-timeout waits longer (on GKE a hung TPU VM's pod is evicted after "
             "about 5 min), and replica-resize with --min-slices below the slice count goes on "
             "without it")
"""What helps a run that gave up waiting for slices (a slice that never came back)."""


class SliceWaitTimeout(ElastixError, TimeoutError):
    """Not enough slices came up in time (raised by every health source's ``wait_for``).

    An ``ElastixError`` with its hint, so the run ends with it as it is; still a
    ``TimeoutError`` for callers that only know the standard library's."""

    def __init__(self, message: str, hint: str | None = WAIT_HINT) -> None:
        super().__init__(message, hint)


class WaitStopped(Exception):
    """A wait for slices was given up because ``stop()`` said the process is stopping.

    Why: a head told to stop (SIGTERM: its workload deleted) while it waits for a lost slice
    used to wait on for the whole ``--slice-wait-timeout``, and was SIGKILLed at the end of its
    grace period holding a host snapshot newer than any checkpoint. Not a ``TimeoutError``: the
    run did not give up on its slices, it was asked to end."""


def stopped(stop: Callable[[], bool] | None, live: frozenset[int], required: int) -> None:
    """Raise ``WaitStopped`` if ``stop`` says so (every source's ``wait_for`` calls it)."""
    if stop is not None and stop():
        raise WaitStopped(f"stopped while waiting for slices ({len(live)} of {required} live)")


class HealthSource:
    """The view of slice health the elastic runtime and the local stand-in use.

    ``live_slices`` and ``wait_for`` are what every source must say; ``probe`` and ``close``
    have defaults for a source that knows no more.
    """

    timeout: float = DEFAULT_TIMEOUT
    """Seconds after a host stops counting by which the source says its slice is down (the
    heartbeat timeout): how long a step on a slice already lost may wait for that verdict."""

    def live_slices(self) -> frozenset[int]:
        """Current view, non-blocking."""
        raise NotImplementedError

    def wait_for(self, required: int, timeout: float,
                 stop: Callable[[], bool] | None = None) -> frozenset[int]:
        """Block until >= ``required`` slices are live; raise ``SliceWaitTimeout`` after
        ``timeout`` seconds or, at the source's next check after ``stop()`` turns true (0.1 s
        for heartbeats, the probe interval of at most 5 s on Pathways: inside a pod's 30 s
        grace), ``WaitStopped``."""
        raise NotImplementedError

    def probe(self) -> frozenset[int]:
        """A fresh view: a blocking check now where the source has one (Pathways), else the
        current view (already fresh for heartbeats, static and manual sources)."""
        return self.live_slices()

    def close(self) -> None:
        """Stop any background work."""


class StaticHealth(HealthSource):
    """All ``num_slices`` slices, always live."""

    def __init__(self, num_slices: int) -> None:
        self._all = frozenset(range(num_slices))

    def live_slices(self) -> frozenset[int]:
        return self._all

    def wait_for(self, required: int, timeout: float,
                 stop: Callable[[], bool] | None = None) -> frozenset[int]:
        if required > len(self._all):
            raise SliceWaitTimeout(f"only {len(self._all)} slices exist, {required} required")
        return self._all


class ManualHealth(HealthSource):
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

    def wait_for(self, required: int, timeout: float,
                 stop: Callable[[], bool] | None = None) -> frozenset[int]:
        self.waits.append(required)
        if self.on_wait is not None:
            self.on_wait(self, required)
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._live) < required:
                stopped(stop, frozenset(self._live), required)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SliceWaitTimeout(
                        f"{len(self._live)} of {required} required slices live after {timeout:g} s")
                self._cond.wait(left if stop is None else min(left, 0.1))
            return frozenset(self._live)


class PathwaysHealth(HealthSource):
    """pathwaysutils' slice probe, told when to look by a watch on the worker pods.

    ``live_slices()`` returns the last view (never blocks the training loop). ``probe()``
    checks every slice now (the classifier calls it when an error arrives: a cached view can
    be up to ``poll`` seconds old, exactly the window in which Pathways reports a lost slice).
    A background thread re-checks only the slices last seen down, every ``poll`` seconds, as
    pathwaysutils' own ``Manager`` does (``_check_inactive_slices``): live slices need no probe,
    their failures arrive as errors.

    On GKE the head also watches its worker pods (``elastix_trainer.elastic.podwatch``): a pod that
    turns Ready or changes wakes the thread to re-check the down slices now, and one that
    terminates or is deleted makes it check every slice now, so ``live_slices()`` drops a lost
    slice before the next error says so. The watch only says *when* to probe; the probe alone
    says which slices are up, because a pod event is not a slice's fate (a pod may be
    rescheduled or deleted for reasons that cost the slice nothing). Without the watch (no
    permission, not in a pod) everything works as before, on the poll.

    ``wait_for`` probes every ``min(poll, 5)`` seconds like pathwaysutils' ``wait_for_slices``,
    whose loop it repeats because that one sleeps in ``time.sleep``, which a pod event cannot
    cut short.

    Args:
        slice_to_devices: slice index -> its devices (default: from ``jax.devices()``).
        poll: seconds between re-checks of the slices last seen down.
        active: the probe, ``slice_to_devices -> live slice indices`` (default: pathwaysutils'
            ``get_active_slice_indices``). The seam for tests and benchmarks, which have no
            Pathways to probe.
        pod_watch: start the worker-pod watch from the environment (in a pod).
    """

    def __init__(self, slice_to_devices: dict | None = None, poll: float = 10.0,
                 active: Callable[[dict], Iterable[int]] | None = None,
                 pod_watch: bool = True) -> None:
        if active is None:
            from pathwaysutils.elastic import elastic

            active = elastic.get_active_slice_indices
            if slice_to_devices is None:
                import jax

                slice_to_devices = elastic.get_slice_to_devices(jax.devices())
        self._active = active
        self.slice_to_devices = dict(slice_to_devices or {})
        self.poll = poll
        self._probing = threading.Lock()  # one probe at a time: a view never goes back in time
        self._cond = threading.Condition()
        self._nudges = 0  # pod events so far; waiters wake when it changes
        self._check_all = False  # a pod went away since the last check: probe every slice
        self._stopped = False
        self._live = frozenset(active(self.slice_to_devices))
        self._thread = threading.Thread(target=self._monitor, daemon=True,
                                        name="elastix-pathways-health")
        self._thread.start()
        self.watch = None
        if pod_watch:
            from elastix_trainer.elastic.podwatch import start_from_env

            self.watch = start_from_env(self.nudge)

    def nudge(self, slice: int | None = None, gone: bool = False) -> None:
        """A worker pod (of ``slice``) changed: probe now. ``gone``: probe live slices too."""
        with self._cond:
            self._nudges += 1
            self._check_all = self._check_all or gone
            self._cond.notify_all()

    def _await_nudge(self, seen: int, timeout: float) -> int:
        with self._cond:
            self._cond.wait_for(lambda: self._nudges != seen or self._stopped, timeout)
            return self._nudges

    def _check(self, slices: dict) -> frozenset[int] | None:
        """Probe ``slices``; None if the probe failed (a failed probe is not a verdict)."""
        try:
            return frozenset(self._active(slices))
        except Exception:  # noqa: BLE001 - keep the last view
            return None

    def _monitor(self) -> None:
        seen = 0
        while True:
            seen = self._await_nudge(seen, self.poll)
            with self._cond:
                if self._stopped:
                    return
                check_all, self._check_all = self._check_all, False
            with self._probing:
                if check_all:
                    live = self._check(self.slice_to_devices)
                    if live is not None:
                        self._live = live
                    continue
                down = {i: d for i, d in self.slice_to_devices.items() if i not in self._live}
                back = self._check(down) if down else None
                if back:
                    self._live = self._live | back

    def live_slices(self) -> frozenset[int]:
        return self._live

    def probe(self) -> frozenset[int]:
        """Check every slice now (blocking) and remember the answer."""
        with self._probing:
            self._live = frozenset(self._active(self.slice_to_devices))
            return self._live

    def wait_for(self, required: int, timeout: float,
                 stop: Callable[[], bool] | None = None) -> frozenset[int]:
        start = time.monotonic()
        interval = min(self.poll, 5.0)
        seen = self._nudges
        while True:
            live = self.probe()
            if len(live) >= required:
                return live
            stopped(stop, live, required)
            left = timeout - (time.monotonic() - start)
            if left <= 0:
                raise SliceWaitTimeout(f"{len(live)} of {required} required slices live after "
                                       f"{timeout:g} s")
            seen = self._await_nudge(seen, min(interval, left))

    def close(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self.watch is not None:
            self.watch.close()


def lost(mesh_slices: Iterable[int], health: HealthSource) -> frozenset[int]:
    """Slices of ``mesh_slices`` the health source says are down."""
    return frozenset(mesh_slices) - health.live_slices()
