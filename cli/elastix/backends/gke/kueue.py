"""Kueue, as GKE ``status`` and ``workload create`` see it: the Workload that holds a queued
JobSet, its place in the queue, and whether a queue or priority named on the command line exists.

A JobSet with the label ``kueue.x-k8s.io/queue-name`` is suspended by Kueue's webhook at
creation (kueue ``pkg/controller/jobframework/defaults.go`` L36-47 @ v0.19.2) and resumed when
its Workload is admitted. Kueue creates that Workload owned by the JobSet (a controller owner
reference) and labels it ``kueue.x-k8s.io/job-uid`` with the JobSet's uid
(``pkg/controller/jobframework/reconciler.go`` L1621, L1630); it is found by that label, the
owner reference confirming it. Why it waits is in its conditions ``QuotaReserved`` and
``Admitted`` (``apis/kueue/v1beta2/workload_types.go`` L931-939) and in
``status.admissionChecks`` (L662, L796-830: a check in state Pending or Retry holds it). Its
position comes from the visibility API (``visibility.kueue.x-k8s.io/v1beta1``
``localqueues/Q/pendingworkloads``, ``apis/visibility/v1beta1/types.go`` L66-90), which a
cluster may not serve (an aggregated API server of Kueue's own).
"""

from __future__ import annotations

from typing import Any

from elastix.backends.base import QueueStatus
from elastix.clients import kueue as kq
from elastix.clients.kube import api_path
from elastix.errors import BackendError, NotFoundError
from elastix.workload import labels

GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # the stored version first; 0.19 serves both
JOB_UID = "kueue.x-k8s.io/job-uid"
VISIBILITY = "visibility.kueue.x-k8s.io/v1beta1"
HOLDING = ("Pending", "Retry")  # admission-check states that keep a Workload from admission


def queue_name(jobset: dict) -> str | None:
    """The LocalQueue a JobSet names, if any."""
    return ((jobset.get("metadata") or {}).get("labels") or {}).get(labels.QUEUE_NAME)


def _true(wl: dict, kind: str) -> tuple[bool | None, dict | None]:
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c.get("status") == "True", c
    return None, None


def queue_status(queue: str, workload: dict | None, pending: list[dict] | None,
                 visibility: str | None) -> QueueStatus:
    """Build a :class:`QueueStatus` from the Workload (None: not created yet) and the
    visibility API's pending workloads of its LocalQueue (None: not read, ``visibility`` says
    why)."""
    if workload is None:
        return QueueStatus(queue=queue, visibility=visibility)
    name = workload["metadata"]["name"]
    reserved, rc = _true(workload, "QuotaReserved")
    admitted, ac = _true(workload, "Admitted")
    conds = [c for c in (rc, ac) if c and c.get("message") and c.get("status") != "True"]
    message = max(conds, key=lambda c: c.get("lastTransitionTime") or "")["message"] \
        if conds else None
    checks = [{"name": str(c.get("name")), "state": str(c.get("state")),
               "message": str(c.get("message") or "")}
              for c in (workload.get("status") or {}).get("admissionChecks") or []
              if c.get("state") in HOLDING]
    position = cluster_position = None
    if pending is not None:
        mine = next((p for p in pending if (p.get("metadata") or {}).get("name") == name), None)
        if mine is not None:
            position = mine.get("positionInLocalQueue")
            cluster_position = mine.get("positionInClusterQueue")
        elif not admitted and not reserved:  # with quota it has left the queue: no position
            visibility = "not in the queue's pending list (being admitted, or just requeued)"
    return QueueStatus(queue=queue, workload=name, quota_reserved=reserved, admitted=admitted,
                       message=message, pending_checks=checks, position=position,
                       cluster_position=cluster_position, visibility=visibility)


def reasons(q: QueueStatus) -> list[str]:
    """The why-stuck lines of a queued workload."""
    if q.workload is None:
        return [f"queued in LocalQueue {q.queue}: Kueue has no Workload for it yet (is Kueue "
                "running, and does the LocalQueue exist?)"]
    if q.admitted:
        return []
    where = f"LocalQueue {q.queue}"
    if q.position is not None:
        where += f", position {q.position + 1}"
        if q.cluster_position is not None:
            where += f" ({q.cluster_position + 1} in its ClusterQueue)"
    state = "quota reserved, not admitted" if q.quota_reserved else "no quota reserved"
    out = [f"Kueue Workload {q.workload} in {where}: {state}"
           + (f": {q.message}" if q.message else "")]
    out += [f"admission check {c['name']} {c['state']}" + (f": {c['message']}" if c['message']
                                                           else "") for c in q.pending_checks]
    if q.visibility:
        out.append(f"queue position not shown: {q.visibility}")
    return out


class KueueReader:
    """Reads for a namespace (an :class:`~elastix.backends.gke.api.Namespace`)."""

    def __init__(self, ns: Any) -> None:
        self.ns = ns

    def _get(self, what: str, path: str, query: dict | None = None) -> dict | None:
        try:
            with self.ns.tr(what, namespace=self.ns.name):
                return self.ns.request("GET", path, query)
        except NotFoundError:
            return None

    def workload(self, jobset: dict) -> dict | None:
        """Kueue's Workload of a JobSet (by ``kueue.x-k8s.io/job-uid``, owner-checked)."""
        uid = (jobset.get("metadata") or {}).get("uid")
        for version in VERSIONS:
            found = self._get("reading Kueue workloads",
                              api_path(f"{GROUP}/{version}", "workloads", None, self.ns.name),
                              {"labelSelector": f"{JOB_UID}={uid}"})
            if found is None:
                continue  # this version is not served
            for wl in found.get("items") or []:
                owners = (wl.get("metadata") or {}).get("ownerReferences") or []
                if any(o.get("uid") == uid for o in owners) or not owners:
                    return wl
            return None
        return None

    def pending(self, queue: str) -> tuple[list[dict] | None, str | None]:
        """The LocalQueue's pending workloads with positions, or (None, why not)."""
        path = api_path(VISIBILITY, "localqueues", queue, self.ns.name, "pendingworkloads")
        try:
            got = self._get("reading Kueue's visibility API", path)
        except BackendError as e:
            return None, (str(e).strip().splitlines() or ["failed"])[0][:160]
        if got is None:
            return None, f"the cluster does not serve Kueue's visibility API ({VISIBILITY})"
        return got.get("items") or [], None

    def status(self, jobset: dict) -> QueueStatus | None:
        """Kueue's view of a JobSet that names a queue and is suspended; None otherwise."""
        queue = queue_name(jobset)
        if not queue or not (jobset.get("spec") or {}).get("suspend"):
            return None
        wl = self.workload(jobset)
        pending, why = (None, None) if wl is None else self.pending(queue)
        return queue_status(queue, wl, pending, why)

    def missing(self, queue: str | None,
                priority: str | None) -> tuple[list[tuple[str, str, str]], list[str]]:
        """Problems ``(field, message, fix)`` for a LocalQueue or PriorityClass that does not
        exist, and notices. Without Kueue the queue label is inert (the JobSet runs at once):
        a notice, not a refusal, so xpk's manifests still run on a cluster without it."""
        problems: list[tuple[str, str, str]] = []
        notices: list[str] = []
        if queue:
            served = kq.served_versions(self.ns.http, self.ns.tr)
            if not served:
                notices.append(f"Kueue is not installed: the label {labels.QUEUE_NAME}={queue} "
                               "has no effect and the workload starts at once (elastix "
                               "cluster create --kueue installs it)")
            elif self._get("looking for the LocalQueue", api_path(
                    f"{GROUP}/{served[0]}", "localqueues", queue, self.ns.name)) is None:
                problems.append((
                    "--queue", f"no Kueue LocalQueue {queue!r} in namespace {self.ns.name}",
                    "list them with kubectl get localqueues; elastix cluster create --kueue "
                    "makes multislice-queue"))
        if priority and self._get("looking for the PriorityClass",
                                  api_path("scheduling.k8s.io/v1", "priorityclasses",
                                           priority)) is None:
            problems.append(("--priority", f"no PriorityClass {priority!r} on the cluster (the "
                             "API server would refuse every pod naming it)",
                             "elastix cluster create --kueue makes very-low, low, medium, high "
                             "and very-high (xpk's)"))
        return problems, notices

    def queue_by_default(self, jobset: dict) -> str | None:
        """Name xpk's LocalQueue on a JobSet that names none, as xpk does for every Pathways
        JobSet, when Kueue is served and the namespace has that LocalQueue (``cluster create
        --kueue`` makes it); the notice that says so. Kueue installed without it: the notice
        that the workload bypasses Kueue, so that its quota does not count these TPUs."""
        if queue_name(jobset):
            return None
        queue = kq.DEFAULT_LOCAL_QUEUE
        try:
            served = kq.served_versions(self.ns.http, self.ns.tr)
            found = served and self._get("looking for the LocalQueue", api_path(
                f"{GROUP}/{served[0]}", "localqueues", queue, self.ns.name))
        except BackendError as e:
            # Not a reason to refuse the create (the platform would take it): said, and the
            # create goes on; its own request says whether the API server works.
            return (f"could not look for Kueue's LocalQueue {queue} ({e.message}): the workload "
                    "is submitted without a queue (queue it with --queue NAME)")
        if not served:
            return None  # no Kueue: nothing to queue in
        if found is None:
            return (f"Kueue is installed but no --queue was given and namespace {self.ns.name} "
                    f"has no LocalQueue {queue}: this workload bypasses Kueue, whose quota "
                    "does not count its TPUs (queue it with --queue NAME; kubectl get "
                    "localqueues)")
        jobset.setdefault("metadata", {}).setdefault("labels", {})[labels.QUEUE_NAME] = queue
        return (f"queued in Kueue LocalQueue {queue} (cluster create --kueue made it; xpk "
                "queues every workload there): --queue NAME picks another")

    def pods_ready_notice(self) -> str | None:
        """What the installed Kueue's WaitForPodsReady does to this elastic workload when a
        slice is missing, one line; None when it keeps it admitted (or Kueue is absent)."""
        found = kq.read(self.ns.http, self.ns.tr)
        if not found.served:
            return None
        pr = found.pods_ready()
        if pr is None:
            return (f"Kueue's configuration was not read (ConfigMap {kq.NAMESPACE}/"
                    f"{kq.CONFIG_MAP} {found.config_problem}): Kueue v0.19 and later evict and "
                    "requeue a workload whole, every slice, once a slice has been missing for "
                    "30m unless waitForPodsReady says otherwise (docs/gke.md, Queues: Kueue)")
        return pr.effect()
