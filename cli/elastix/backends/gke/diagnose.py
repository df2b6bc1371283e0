"""What the cluster says about one workload, for ``elastix workload inspect`` (a bundle).

Read-only and bounded: the JobSet and its Jobs' status, each pod with its last events, the
nodes of each pool (healthy of total; TPU pools by their accelerator and topology labels), and
Kueue's Workload for the JobSet where Kueue serves one. A part the credentials may not read
(Nodes are cluster-scoped; Kueue may not be installed) is a line in ``unreadable``, never a
failure of the whole bundle. The JobSet's environment values are hidden by the caller
(:mod:`elastix.workload.redact`): this returns the objects as read.
"""

from __future__ import annotations

from typing import Any

from elastix.backends.gke.api import Namespace
from elastix.clients.kube import api_path
from elastix.errors import ElastixError
from elastix.workload import labels, platform

EVENTS_PER_OBJECT = 5
"""The newest events kept per pod (and for the JobSet and each Job): what says why now."""


def diagnose(ns: Namespace, name: str) -> dict[str, Any]:
    """The bundle's cluster sections for JobSet ``name`` (which :meth:`Namespace.jobset` has
    found to be a Pathways workload: its errors propagate)."""
    js = ns.jobset(name)
    sel = f"{labels.JOBSET_NAME}={name}"
    pods, _ = ns.pods(sel)
    jobs = ns.jobs(sel)
    unreadable: list[str] = []
    events = _events(ns, unreadable)
    md = js.get("metadata") or {}
    out: dict[str, Any] = {
        "manifest": {"apiVersion": js.get("apiVersion"), "kind": js.get("kind"),
                     "metadata": {k: md.get(k) for k in (
                         "name", "namespace", "uid", "creationTimestamp", "labels",
                         "annotations")},
                     "spec": js.get("spec") or {}},
        "jobset_status": js.get("status") or {},
        "jobset_events": _of(events, "JobSet", name),
        "jobs": [_job(j, events) for j in jobs],
        "pods": [_pod(p, events) for p in sorted(pods, key=_pod_order)],
        "nodes": _pools(ns, unreadable),
        "kueue": _kueue(ns, js, unreadable),
    }
    out["unreadable"] = unreadable
    return out


def _events(ns: Namespace, unreadable: list[str]) -> list[dict]:
    try:
        return ns.get("reading events", "events").get("items") or []
    except ElastixError as e:
        unreadable.append(f"events: {e.message}")
        return []


def _of(events: list[dict], kind: str, name: str) -> list[dict[str, Any]]:
    """The newest :data:`EVENTS_PER_OBJECT` events of one object, oldest first."""
    mine = [e for e in events if (e.get("involvedObject") or {}).get("kind") == kind
            and (e.get("involvedObject") or {}).get("name") == name]
    mine.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return [{"type": e.get("type"), "reason": e.get("reason"), "message": e.get("message"),
             "count": e.get("count"), "last": e.get("lastTimestamp") or e.get("eventTime")}
            for e in mine[-EVENTS_PER_OBJECT:]]


def _job(job: dict, events: list[dict]) -> dict[str, Any]:
    md = job.get("metadata") or {}
    lab = md.get("labels") or {}
    return {"name": md.get("name"), "replicated_job": lab.get(labels.REPLICATED_JOB_NAME),
            "index": lab.get(labels.JOB_INDEX), "status": job.get("status") or {},
            "events": _of(events, "Job", md.get("name"))}


def _pod_order(pod: dict) -> tuple:
    lab = (pod.get("metadata") or {}).get("labels") or {}
    head = lab.get(labels.REPLICATED_JOB_NAME) == labels.HEAD_JOB
    return (not head, _int(lab.get(labels.JOB_INDEX)), _int(lab.get(labels.JOB_COMPLETION_INDEX)),
            (pod.get("metadata") or {}).get("name", ""))


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return -1


def _pod(pod: dict, events: list[dict]) -> dict[str, Any]:
    from elastix.backends.gke.status import pod_info

    info = pod_info(pod)
    st = pod.get("status") or {}
    return {"name": info.name, "role": info.role, "slice": info.slice, "host": info.host,
            "phase": info.phase, "reason": info.reason, "restarts": info.restarts,
            "node": info.node, "conditions": st.get("conditions") or [],
            "containers": [{"name": c.get("name"), "ready": c.get("ready"),
                            "restarts": c.get("restartCount"), "state": c.get("state"),
                            "last_state": c.get("lastState")}
                           for c in st.get("containerStatuses") or []],
            "events": _of(events, "Pod", info.name)}


def _pools(ns: Namespace, unreadable: list[str]) -> list[dict[str, Any]] | None:
    """Nodes per pool: healthy (Ready, schedulable) of total, and the unhealthy ones' names."""
    try:
        with ns.tr("listing nodes"):
            nodes = ns.request("GET", api_path("v1", "nodes")).get("items") or []
    except ElastixError as e:
        unreadable.append(f"nodes: {e.message} (they are cluster-scoped: a namespaced "
                          "identity may not list them)")
        return None
    pools: dict[str, dict[str, Any]] = {}
    for n in nodes:
        md = n.get("metadata") or {}
        lab = md.get("labels") or {}
        pool = pools.setdefault(lab.get(platform.NODEPOOL_LABEL) or md.get("name", "?"), {
            "accelerator": lab.get(platform.ACCELERATOR_LABEL),
            "topology": lab.get(platform.TOPOLOGY_LABEL), "healthy": 0, "total": 0,
            "unhealthy": []})
        pool["total"] += 1
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (n.get("status") or {}).get("conditions") or [])
        if ready and not (n.get("spec") or {}).get("unschedulable"):
            pool["healthy"] += 1
        else:
            pool["unhealthy"].append(md.get("name"))
    return [{"pool": name, **p} for name, p in sorted(pools.items())]


def _kueue(ns: Namespace, js: dict, unreadable: list[str]) -> dict[str, Any] | None:
    """The LocalQueue the JobSet names and Kueue's Workload for it (its conditions), with the
    position while it waits; None when it names no queue."""
    from elastix.backends.gke.kueue import KueueReader, queue_name

    queue = queue_name(js)
    if not queue:
        return None
    from elastix.clients.kueue import served_versions

    reader = KueueReader(ns)
    try:
        if not served_versions(ns.http, ns.tr):
            return {"queue": queue, "installed": False}  # the label has no effect
        wl = reader.workload(js)
        waiting = reader.status(js)
    except ElastixError as e:
        unreadable.append(f"kueue: {e.message}")
        return {"queue": queue}
    out: dict[str, Any] = {"queue": queue, "installed": True, "workload": None,
                           "conditions": []}
    if wl is not None:
        out["workload"] = (wl.get("metadata") or {}).get("name")
        out["conditions"] = (wl.get("status") or {}).get("conditions") or []
        out["admission"] = (wl.get("status") or {}).get("admission")
    if waiting is not None:
        out["position"] = waiting.position
        out["cluster_position"] = waiting.cluster_position
        if waiting.visibility:
            out["position_unknown"] = waiting.visibility
    return out
