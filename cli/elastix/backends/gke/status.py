"""Pure functions from Kubernetes objects (plain dicts) to ``WorkloadStatus``.

Pods are grouped by the JobSet labels (replicated job, job index = slice, completion index =
host), never by parsing their names. Nothing here talks to the API server.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
from typing import Any

from elastix.backends.base import PodInfo, SliceStatus, WorkloadStatus
from elastix.backends.gke import jobset_features
from elastix.protocol.recovery import RecoveryPoint
from elastix.workload import labels


def parse_time(text: str | None) -> dt.datetime | None:
    """An RFC 3339 timestamp as the API server writes it (seconds or nanoseconds, ``Z``)."""
    if not text:
        return None
    head, _, frac = text.rstrip("Z").partition(".")
    t = dt.datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.timezone.utc)
    if frac:
        t = t.replace(microsecond=int(frac[:6].ljust(6, "0")))
    return t


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def pod_reason(pod: dict) -> str | None:
    """Why a pod is not (yet) running: a waiting/terminated container, or a scheduling failure."""
    st = pod.get("status") or {}
    for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
        state = cs.get("state") or {}
        waiting = state.get("waiting")
        if waiting and waiting.get("reason") not in (None, "PodInitializing"):
            msg = waiting.get("message")
            return f"{waiting['reason']}: {msg}" if msg else waiting["reason"]
        term = state.get("terminated")
        if term and st.get("phase") == "Failed":
            return f"{cs['name']} {term.get('reason', 'terminated')} (exit {term.get('exitCode')})"
    for cond in st.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            msg = cond.get("message")
            return f"{cond.get('reason', 'Unschedulable')}: {msg}" if msg else cond.get("reason")
    if st.get("reason"):
        return f"{st['reason']}: {st.get('message', '')}".rstrip(": ")
    return None


def pod_info(pod: dict) -> PodInfo:
    md, st = pod["metadata"], pod.get("status") or {}
    pod_labels = md.get("labels") or {}
    statuses = (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or [])
    head = pod_labels.get(labels.REPLICATED_JOB_NAME) == labels.HEAD_JOB
    phase = "Terminating" if md.get("deletionTimestamp") else st.get("phase", "Unknown")
    return PodInfo(
        name=md["name"], role="head" if head else "worker", phase=phase,
        slice=None if head else _int(pod_labels.get(labels.JOB_INDEX)),
        host=None if head else _int(pod_labels.get(labels.JOB_COMPLETION_INDEX)),
        restarts=sum(cs.get("restartCount", 0) for cs in statuses),
        node=(pod.get("spec") or {}).get("nodeName"),
        reason=None if phase == "Running" else pod_reason(pod),
        started=parse_time(st.get("startTime")),
    )


def _condition(js: dict, kind: str) -> dict | None:
    for c in (js.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return c
    return None


def workload_status(js: dict, pods: list[dict], jobs: list[dict],
                    events: list[dict] | None = None,
                    lost: dict[int, str] | None = None) -> WorkloadStatus:
    """Build the status of one JobSet from its pods, Jobs and (optionally) Warning events.

    Args:
        js: the JobSet object.
        pods: pods labelled with this JobSet's name.
        jobs: Jobs labelled with this JobSet's name (for pod failures vs. backoffLimit).
        events: Warning events of pending pods, to explain why they are stuck.
        lost: slices the trainer declared lost and has not recovered (``{slice: why}``, from
            its events), shown as ``Lost`` while the workload runs.
    """
    md, spec, st = js["metadata"], js.get("spec") or {}, js.get("status") or {}
    rjobs = {rj.get("name"): rj for rj in spec.get("replicatedJobs") or []}
    worker = rjobs.get(labels.WORKER_JOB) or next(
        (rj for n, rj in rjobs.items() if n != labels.HEAD_JOB), {})
    wspec = (worker.get("template") or {}).get("spec") or {}
    num_slices = worker.get("replicas", 1) if worker else 0
    hosts = wspec.get("parallelism") or wspec.get("completions") or 1

    infos = [pod_info(p) for p in pods]
    heads = sorted((i for i in infos if i.role == "head"),
                   key=lambda i: (i.phase != "Terminating", i.started or dt.datetime.min.replace(
                       tzinfo=dt.timezone.utc)))
    by_slice: dict[int, list[PodInfo]] = collections.defaultdict(list)
    for i in infos:
        if i.role == "worker" and i.slice is not None:
            by_slice[i.slice].append(i)
    job_by_slice = {_int(object_labels(j).get(labels.JOB_INDEX)): j for j in jobs
                    if object_labels(j).get(labels.REPLICATED_JOB_NAME) == worker.get("name")}
    # --slice-restart job: JobSet counts each slice's Job recreations (status.replicatedJobs
    # Status[].jobRestarts, jobset_types.go L277-284); a RestartJob rule means they are the
    # slice restarts, zero until the first (JobSet reports the list once one happened).
    per_job = jobset_features.slice_restarts(js)
    if per_job is None and jobset_features.uses_restart_job(js):
        per_job = []
    slices = []
    for idx in range(num_slices):
        job = job_by_slice.get(idx) or {}
        slices.append(SliceStatus(
            index=idx, hosts=hosts,
            pods=sorted(by_slice.get(idx, []), key=lambda p: (p.host or 0, p.phase)),
            job_failures=(job.get("status") or {}).get("failed", 0) or 0,
            backoff_limit=(job.get("spec") or wspec).get("backoffLimit"),
            job_restarts=None if per_job is None else
            (per_job[idx] if idx < len(per_job) else 0)))

    head = heads[-1] if heads else None
    reasons = stuck_reasons(infos, events or [])
    state, message = _state(js, md, spec, st, infos, head)
    if lost and state not in ("Completed", "Failed", "Terminating"):
        slices = [dataclasses.replace(s, lost=lost.get(s.index)) for s in slices]
    failed = _condition(js, "Failed")
    if failed and failed.get("message"):
        reasons.insert(0, f"JobSet failed: {failed['message']}")
    return WorkloadStatus(
        name=md["name"], namespace=md.get("namespace", ""), backend="gke", state=state,
        created=parse_time(md.get("creationTimestamp")), num_slices=num_slices,
        jobset_restarts=st.get("restarts", 0) or 0,
        max_restarts=(spec.get("failurePolicy") or {}).get("maxRestarts", 0),
        head=head, slices=slices, reasons=reasons, message=message,
        labels=dict(md.get("labels") or {}),
        # the head's own annotations (elastix_trainer.obs.recoverypoint): no extra request
        recovery_point=RecoveryPoint.from_annotations(md.get("annotations")))


def _state(js, md, spec, st, infos, head) -> tuple[str, str | None]:
    if md.get("deletionTimestamp"):
        return "Terminating", None
    for kind, name in (("Completed", "Completed"), ("Failed", "Failed")):
        c = _condition(js, kind)
        if c:
            return name, c.get("message")
    if spec.get("suspend"):
        return "Suspended", None
    attempt = str(st.get("restarts", 0) or 0)
    if any(p.phase == "Terminating" for p in infos) and st.get("restarts"):
        return "Restarting", f"JobSet restart {attempt}"
    if head is not None and head.phase == "Running":
        return "Running", None
    return "Pending", None


def stuck_reasons(infos: list[PodInfo], events: list[dict]) -> list[str]:
    """One line per distinct reason pods are not running, with how many pods and an example."""
    latest: dict[str, dict] = {}
    for e in events:
        name = (e.get("involvedObject") or {}).get("name")
        when = e.get("lastTimestamp") or e.get("eventTime") or ""
        if name and when >= (latest.get(name, {}).get("lastTimestamp") or ""):
            latest[name] = e
    groups: dict[tuple[str, str, str], list[str]] = collections.defaultdict(list)
    for p in infos:
        if p.phase not in ("Pending", "Failed", "Unknown"):
            continue
        reason = p.reason
        ev = latest.get(p.name)
        if ev is not None and (reason is None or "ContainerCreating" in reason):
            reason = f"{ev.get('reason')}: {ev.get('message')}"
        groups[(p.role, p.phase, reason or "no reason reported yet")].append(p.name)
    out = []
    for (role, phase, reason), names in sorted(groups.items()):
        n = len(names)
        out.append(f"{n} {role} pod{'s' if n > 1 else ''} {phase} (e.g. {names[0]}): {reason}")
    return out


def object_labels(obj: dict) -> dict:
    """A Kubernetes object's labels ({} when it has none)."""
    return (obj.get("metadata") or {}).get("labels") or {}
