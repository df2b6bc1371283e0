"""The head publishes its recovery point on its own JobSet (``elastix.protocol.recovery``).

An ``EventLog`` listener folds the events into the recovery point (the newest committed
checkpoint, its commit time, the steps done since) and a background thread writes it to the
JobSet's annotations with a JSON merge patch (RFC 7386; ``metadata.annotations`` only, so the
JobSet controller's and the user's fields are untouched, and no ``get`` is needed first). So
``kubectl get jobset -o yaml``, ``elastix workload status`` and a scheduler picking a preemption
victim (kueue#477) see what stopping the workload now would cost.

How often: a commit is written as soon as the thread is free (commits come a checkpoint
interval apart, minutes in practice); the steps at risk alone at most every ``every`` seconds
(30 s by default). Every patch is a JobSet update that the JobSet controller reconciles and
every watcher of JobSets (Kueue) receives; one per step (a second or less) would put the
head's step rate on the API server and those controllers, for a count whose use (choosing a
victim) does not change within 30 s. Only the newest value is kept: patches never queue up.

Nothing here may cost a step: the listener only updates the value under a lock and wakes the
thread. A patch the head may not make (401/403: its Role lacks ``patch`` on its JobSet) is one
warning line and the thread stops; a JobSet that is not there (404), likewise; anything else
(an unreachable or slow API server) is one line per outage and a retry with backoff, while
training goes on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from elastix.protocol import jobset, recovery
from elastix_trainer.obs.events import log
from elastix_trainer.obs.kube import denied, in_cluster

GRANT_HINT = ("grant the head pod's service account patch on jobsets.jobset.x-k8s.io named "
              "for its workload (`elastix workload create` makes that Role)")
EVERY = 30.0
"""Seconds between patches that only move the steps at risk (see the module's docstring)."""
REQUEST_TIMEOUT = (5.0, 10.0)
"""(connect, read) seconds of one patch: a hung API server holds this thread, never training."""


class RecoveryPointPublisher:
    """Writes the recovery point to one JobSet's annotations from a daemon thread.

    Args:
        api_client: a ``kubernetes.client.ApiClient`` (in-cluster, or a test's fake server).
        namespace: the JobSet's namespace.
        name: the JobSet's name.
        every: seconds between patches that only move the steps at risk.
        backoff: (first, max) seconds between retries after a failed patch.
        clock: ``time.monotonic`` (injected by tests).
    """

    def __init__(self, api_client: Any, namespace: str, name: str, every: float = EVERY,
                 backoff: tuple[float, float] = (1.0, 60.0),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api, self.namespace, self.name = api_client, namespace, name
        self.every, self.backoff, self.clock = every, backoff, clock
        self.tracker = recovery.Tracker()
        self.state = "running"  # "off" once refused (why is in the one log line)
        self.published: recovery.RecoveryPoint | None = None  # the last value the API took
        self.patches = 0  # patch requests made (tests count them)
        self._urgent = False  # a commit is waiting: write it now, not on the rate limit
        self._last = -float("inf")  # clock() of the last patch request
        self._not_before = -float("inf")  # no patch before this clock() (a retry's backoff)
        self._cond = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="elastix-recovery-point")

    def start(self) -> RecoveryPointPublisher:
        self._thread.start()
        return self

    def attach(self, events) -> RecoveryPointPublisher:
        events.listeners.append(self.on_event)
        return self.start()

    def on_event(self, record: dict[str, Any]) -> None:
        """The listener: O(1), never blocks on the API (called on the training thread, and on
        the checkpoint writer's for commits)."""
        if self.state == "off":
            return
        try:
            with self._cond:
                changed = self.tracker.add(record)
                if changed is None:
                    return
                self._urgent = self._urgent or changed == recovery.COMMIT
                self._cond.notify()
        except Exception as e:  # noqa: BLE001 - a malformed record never costs a step
            log.debug("elastix: recovery point: skipped an event (%s)", e)

    def close(self, wait: float = REQUEST_TIMEOUT[0] + REQUEST_TIMEOUT[1]) -> None:
        """Write what is not written yet (one try), waiting at most ``wait`` seconds: the
        thread is a daemon, so the process's exit never waits for the API."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(timeout=wait)

    # -- the thread ---------------------------------------------------------------------------

    def _due(self) -> tuple[recovery.RecoveryPoint | None, float | None]:
        """Under the lock: (the value to write now, None) or (None, seconds to wait; None:
        until an event or a stop)."""
        point = self.tracker.point()
        if point is None or point == self.published:
            return None, None
        now = self.clock()
        if self._stopping:
            return point, None
        if now < self._not_before:  # backing off after a failure; events do not cut it short
            return None, self._not_before - now
        if self._urgent or now - self._last >= self.every:
            return point, None
        return None, self.every - (now - self._last)

    def _run(self) -> None:
        from kubernetes.client.exceptions import ApiException

        delay, failing = self.backoff[0], False
        while True:
            with self._cond:
                point, wait = self._due()
                while point is None and not self._stopping:
                    self._cond.wait(None if wait is None else max(wait, 0.01))
                    point, wait = self._due()
                if point is None:  # stopping, nothing left to write
                    return
                self._urgent, self._last, final = False, self.clock(), self._stopping
            try:
                self._patch(point)
            except Exception as err:  # noqa: BLE001 - the API never ends the run
                if isinstance(err, ApiException) and (denied(err) or err.status == 404):
                    self._off(err)
                    return
                if not failing:
                    log.info("elastix: recovery point not written to JobSet %s (%s): "
                             "retrying with backoff; training goes on", self.name, _why(err))
                failing = True
                if final:
                    return
                with self._cond:
                    self._urgent = True  # the value is still unwritten: due once the pause ends
                    self._not_before = self.clock() + delay
                delay = min(delay * 2, self.backoff[1])
                continue
            if failing:
                log.info("elastix: recovery point written to JobSet %s again", self.name)
            delay, failing = self.backoff[0], False
            with self._cond:
                self.published, self._not_before = point, -float("inf")
            if final:
                return

    def _patch(self, point: recovery.RecoveryPoint) -> None:
        from kubernetes import client

        self.patches += 1
        client.CustomObjectsApi(self.api).patch_namespaced_custom_object(
            jobset.API_GROUP, jobset.API_VERSION, self.namespace, jobset.PLURAL, self.name,
            {"metadata": {"annotations": point.annotations()}},
            _content_type="application/merge-patch+json", _request_timeout=REQUEST_TIMEOUT)

    def _off(self, err: Any) -> None:
        self.state = "off"
        if err.status == 404:
            log.warning("elastix: recovery point not published: JobSet %s/%s not found (HTTP "
                        "404); training goes on", self.namespace, self.name)
            return
        log.warning("elastix: recovery point not published (HTTP %s from the API server: may "
                    "not patch JobSet %s/%s); training goes on; %s", err.status,
                    self.namespace, self.name, GRANT_HINT)


def _why(err: BaseException) -> str:
    status = getattr(err, "status", None)
    if status:
        return f"HTTP {status}"
    return (f"{type(err).__name__}: {err}".strip().splitlines() or [type(err).__name__])[0][:200]


def attach_from_env(events, account_dir: str | None = None) -> RecoveryPointPublisher | None:
    """On GKE (in a pod, with ``ELASTIX_WORKLOAD``), a publisher attached to ``events``; None
    elsewhere (silent outside a pod: the local backend reads the events file instead).
    ``account_dir``: the service-account mount (default ``kube.ACCOUNT_DIR``)."""
    access = in_cluster("recovery point", "the JobSet carries no recovery point",
                        account_dir=account_dir, quiet_outside_pod=True)
    if access is None:
        return None
    return RecoveryPointPublisher(access.api, access.namespace, access.workload).attach(events)

