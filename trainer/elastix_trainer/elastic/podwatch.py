"""A Kubernetes watch on the workload's worker pods, from the head pod: hints for the probe.

Pathways decides whether a slice is up (``PathwaysHealth``'s probe); this module only tells it
*when* to look. The Kubernetes API knows within about a second that a worker pod's container
exited or that its replacement became Ready, while the probe re-checks a down slice only every
``poll`` seconds. So a worker pod that turns Ready, changes, or goes away calls ``on_hint``, and
the health source probes at once instead of at its next poll.

A pod event is a hint, never a verdict: a pod can be rescheduled, relabelled or deleted for
reasons that cost the slice nothing (and a slice can be down while its pods look fine). Nothing
here marks a slice lost or live; only the probe does.

It must never fail or slow the run. Every problem ends in the same place, the probe polling as
it did before: no in-cluster config or no workload name (one log line, no watch), no permission
(401/403: one line naming the grant, the watch stops), anything else (one line per outage, then
reconnects with backoff). A watch that ends normally (``timeoutSeconds``) reconnects from where
it was; one whose resourceVersion expired (410) lists again.

In-cluster access is ``elastix_trainer.obs.kube``'s (the official client's in-cluster loader),
shared with the head's other API caller, the recovery point.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Any

from elastix.protocol import envvars
from elastix.protocol.jobset import JOB_INDEX, JOBSET_NAME, REPLICATED_JOB_NAME, WORKER_JOB
from elastix_trainer.obs.events import log
from elastix_trainer.obs.kube import denied, in_cluster

GRANT_HINT = ("grant the head pod's service account get, list and watch on pods in its "
              "namespace (a Role and RoleBinding; `elastix workload create` makes them)")

Hint = Callable[[int | None, bool], None]
"""``on_hint(slice, gone)``: a worker pod of ``slice`` (None: unknown) changed; ``gone``: it
terminated or was deleted (so a live slice may have been lost), else it may have come up."""


def _ready(pod: dict) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _gone(event: str, pod: dict) -> bool:
    """Deleted, being deleted, or its containers finished: the pod no longer serves its slice."""
    phase = (pod.get("status") or {}).get("phase")
    return (event == "DELETED" or bool((pod.get("metadata") or {}).get("deletionTimestamp"))
            or phase in ("Failed", "Succeeded"))


def _slice(pod: dict) -> int | None:
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(JOB_INDEX)
    return int(value) if value is not None and str(value).isdigit() else None


class PodWatch:
    """Watches the worker pods of one JobSet on a daemon thread and calls ``on_hint``.

    Args:
        api_client: a ``kubernetes.client.ApiClient`` (in-cluster, or a test's fake server).
        namespace: the workload's namespace.
        workload: the JobSet's name.
        on_hint: see :data:`Hint`; called on the watch thread, so it must not block.
        timeout_seconds: how long one watch request lasts before the server ends it.
        backoff: (first, max) seconds between reconnects after an error.
    """

    def __init__(self, api_client: Any, namespace: str, workload: str, on_hint: Hint,
                 timeout_seconds: int = 300, backoff: tuple[float, float] = (1.0, 30.0)) -> None:
        self.api, self.namespace, self.on_hint = api_client, namespace, on_hint
        self.selector = f"{JOBSET_NAME}={workload},{REPLICATED_JOB_NAME}={WORKER_JOB}"
        self.timeout_seconds = timeout_seconds
        self.backoff = backoff
        self.state = "starting"  # "watching", "retrying" or "off" (why is in the one log line)
        self.connects = 0  # watch requests made (a test counts reconnects)
        self._ready: dict[str, bool] = {}  # pod uid -> Ready, to tell "became Ready" from noise
        self._listed: dict[str, bool] | None = None  # what the last list saw (None: no list yet)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="elastix-pod-watch")

    def start(self) -> PodWatch:
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop at the next event or reconnect (the thread is a daemon: exit never waits)."""
        self._stop.set()

    def _run(self) -> None:
        from kubernetes.client.exceptions import ApiException

        delay, logged = self.backoff[0], False
        rv = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    rv = self._list()
                rv = self._watch(rv)
                delay, logged = self.backoff[0], False
            except ApiException as err:
                if denied(err):
                    # The line first, then the state: whoever waits on "off" finds it said.
                    log.info("elastix: pod watch off (HTTP %s from the API server: may not "
                             "list/watch pods in namespace %s): slices are re-probed on their "
                             "poll only; %s", err.status, self.namespace, GRANT_HINT)
                    self.state = "off"
                    return
                if err.status == 410:  # our resourceVersion is too old: list afresh
                    rv = None
                    continue
                logged = self._retry(f"HTTP {err.status}", logged)
                rv = None
                self._stop.wait(delay)
                delay = min(delay * 2, self.backoff[1])
            except Exception as err:  # noqa: BLE001 - a broken stream must not end the run
                logged = self._retry(f"{type(err).__name__}: {err}", logged)
                rv = None
                self._stop.wait(delay)
                delay = min(delay * 2, self.backoff[1])

    def _retry(self, why: str, logged: bool) -> bool:
        if not logged:
            log.info("elastix: pod watch interrupted (%s): reconnecting with backoff; slices "
                     "are re-probed on their poll meanwhile", why)
        self.state = "retrying"
        return True

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    def _list(self) -> str:
        """Seed each pod's Ready state; the list's version. The first list is the baseline (no
        hint); a re-list after a broken watch hints once if a pod went away, appeared or
        changed readiness meanwhile: those events were missed, and the poll would be late."""
        resp = self._core().list_namespaced_pod(self.namespace, label_selector=self.selector,
                                                _preload_content=False, _request_timeout=20)
        if not 200 <= resp.status <= 299:  # unpreloaded answers are not checked for us
            from kubernetes.client.exceptions import ApiException

            raise ApiException(status=resp.status, reason=resp.reason)
        body = json.loads(resp.data or b"{}")
        before, self._ready = self._listed, {p["metadata"]["uid"]: _ready(p)
                                             for p in body.get("items") or []}
        self._listed = dict(self._ready)
        if before is not None and self._ready != before:
            gone = any(not self._ready.get(uid, False) for uid, up in before.items() if up)
            self.on_hint(None, gone)
        return (body.get("metadata") or {}).get("resourceVersion") or ""

    def _watch(self, rv: str) -> str:
        """One watch request from ``rv``, until the server ends it; the last version seen."""
        from kubernetes import watch

        w = watch.Watch()
        self.connects += 1
        self.state = "watching"
        # Raw dicts (deserialize=False): the pod models are strict and we read four fields.
        # With timeout_seconds set, Watch makes exactly one request and surfaces a 410 to us.
        for event in w.stream(self._core().list_namespaced_pod, self.namespace,
                              label_selector=self.selector, resource_version=rv or None,
                              timeout_seconds=self.timeout_seconds, deserialize=False,
                              _request_timeout=(10, self.timeout_seconds + 30)):
            if self._stop.is_set():
                w.stop()
                break
            kind, pod = event.get("type"), event.get("object") or {}
            if kind == "BOOKMARK" or not isinstance(pod, dict) or "metadata" not in pod:
                continue
            rv = pod["metadata"].get("resourceVersion") or rv
            self._event(kind, pod)
        return rv

    def _event(self, kind: str, pod: dict) -> None:
        uid = pod["metadata"].get("uid", "")
        gone = _gone(kind, pod)
        ready = False if gone else _ready(pod)
        was = self._ready.get(uid)
        if gone:
            self._ready.pop(uid, None)
        else:
            self._ready[uid] = ready
        if gone or ready != was or kind == "ADDED":
            self.on_hint(_slice(pod), gone or (was is True and not ready))


def start_from_env(on_hint: Hint) -> PodWatch | None:
    """The head's watch, when it can run here; None (with one log line saying why) when not.

    ``ELASTIX_POD_WATCH=0`` turns it off silently.
    """
    if os.environ.get(envvars.POD_WATCH, "1") == "0":
        return None
    access = in_cluster("pod watch", "slices are re-probed on their poll only")
    if access is None:
        return None
    return PodWatch(access.api, access.namespace, access.workload, on_hint).start()
