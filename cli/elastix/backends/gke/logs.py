"""Log streaming for the GKE backend, following the head (or a worker) across pod restarts.

With ``follow``, log lines are requested with timestamps so that a reconnection to the *same*
pod (a cut stream) resumes after the last line seen (shown only with ``--timestamps``: the API's
RFC3339 time before each line, as ``kubectl logs --timestamps``; measurement asks for it, since
MaxText's lines carry no time of their own); when the pod is replaced (a new UID: the
JobSet restarted or the worker was recreated) a notice is emitted and the new pod is streamed
from its start. Pods are chosen by JobSet labels, never by name.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from typing import Any

from elastix.backends.base import LogEvent, LogOptions
from elastix.backends.gke.api import Namespace
from elastix.backends.gke.status import parse_time
from elastix.clients.kube import ApiTimeout, ContainerWaiting, StreamCut, close_stream
from elastix.errors import BackendError, NotFoundError, UsageError
from elastix.protocol.timefmt import utc_now
from elastix.workload import labels

MAX_CUTS = 5  # consecutive broken streams of one pod before giving up
QUIET_RECONNECT = 300.0  # a followed log silent this long is re-requested (silently)


def _selector(name: str, opts: LogOptions) -> tuple[str, str]:
    if opts.slice is None and opts.host is None:
        return f"{labels.JOBSET_NAME}={name},{labels.REPLICATED_JOB_NAME}={labels.HEAD_JOB}", "head"
    sel = (f"{labels.JOBSET_NAME}={name},{labels.REPLICATED_JOB_NAME}={labels.WORKER_JOB},"
           f"{labels.JOB_INDEX}={opts.slice or 0},{labels.JOB_COMPLETION_INDEX}={opts.host or 0}")
    return sel, f"worker (slice {opts.slice or 0}, host {opts.host or 0})"


def pick_pod(pods: list[dict]) -> dict | None:
    """The newest pod that is not being deleted (else the newest)."""
    if not pods:
        return None
    return max(pods, key=lambda p: (not p["metadata"].get("deletionTimestamp"),
                                     p["metadata"].get("creationTimestamp") or ""))


def log_container(pod: dict, opts: LogOptions, role: str) -> str:
    spec = pod.get("spec") or {}
    names = [c["name"] for c in spec.get("containers") or []]
    every = names + [c["name"] for c in spec.get("initContainers") or []]
    if opts.container:
        if opts.container not in every:
            raise UsageError(f"pod {pod['metadata']['name']} has no container "
                             f"{opts.container!r}", hint=f"choose one of: {', '.join(every)}")
        return opts.container
    preferred = labels.MAIN_CONTAINER if role == "head" else labels.WORKER_CONTAINER
    return preferred if preferred in names else names[0]


def _running(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed") and \
        not pod["metadata"].get("deletionTimestamp")


def split_timestamp(line: str) -> tuple[dt.datetime | None, str]:
    stamp, _, text = line.partition(" ")
    try:
        return parse_time(stamp), text
    except ValueError:
        return None, line


def read_lines(resp: Any) -> Iterator[str]:
    buf = b""
    try:
        while True:
            chunk = resp.read1(64 * 1024)  # whatever has arrived: lines show as they come
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                yield line.decode("utf-8", "replace")
        if buf:
            yield buf.decode("utf-8", "replace")
    finally:
        close_stream(resp)


def stream_logs(ns: Namespace, name: str, opts: LogOptions) -> Iterator[LogEvent]:
    """Yield the log of a workload's head (or one worker); see ``Backend.logs``."""
    js = ns.jobset(name)  # NotFoundError for a wrong name, before anything else
    sel, role = _selector(name, opts)
    if opts.previous:
        yield from _previous(ns, name, js, sel, role, opts)
        return
    if not opts.follow:
        pod, container = current_pod(ns, name, opts)
        yield from _once(ns, pod, container, opts)
        return
    yield from _follow(ns, name, sel, role, opts)


def current_pod(ns: Namespace, name: str, opts: LogOptions) -> tuple[dict, str]:
    """The pod whose log ``logs`` without ``follow`` reads (the head, or ``opts``' worker), and
    the container.

    Raises:
        NotFoundError: the workload has no such pod yet.
        UsageError: the pod has no container ``opts.container``.
    """
    sel, role = _selector(name, opts)
    pods, _ = ns.pods(sel)
    pod = pick_pod(pods)
    if pod is None:
        raise NotFoundError(f"workload {name} has no {role} pod yet",
                            hint=f"elastix workload status {name} says why; "
                                 "or add -f to wait for it")
    return pod, log_container(pod, opts, role)


def _previous(ns: Namespace, name: str, js: dict, sel: str, role: str,
              opts: LogOptions) -> Iterator[LogEvent]:
    """``--previous``: the container's previous instance in the current pod, as kubectl.

    A JobSet restart deletes every pod and creates new ones: a deleted pod's log is gone from
    the Kubernetes API (only Cloud Logging keeps it), so say so rather than "not found".
    """
    pods, _ = ns.pods(sel)
    pod = pick_pod(pods)
    if pod is None:
        raise NotFoundError(f"workload {name} has no {role} pod", hint=f"elastix workload status "
                            f"{name} says why")
    container = log_container(pod, opts, role)
    pname = pod["metadata"]["name"]
    st = pod.get("status") or {}
    restarts = next((c.get("restartCount") or 0 for c in (st.get("containerStatuses") or [])
                     + (st.get("initContainerStatuses") or []) if c.get("name") == container), 0)
    js_restarts = (js.get("status") or {}).get("restarts") or 0
    deleted = (f"the JobSet restarted {js_restarts} time{'s' if js_restarts != 1 else ''}, and "
               f"the {role} pods before {pname} were deleted with their logs") if js_restarts else ""
    if not restarts:
        raise NotFoundError(
            f"container {container} of {role} pod {pname} has no previous instance (it has not "
            "restarted)" + (f"; {deleted}" if deleted else ""),
            hint=_cloud_logging(ns, name) if deleted else f"elastix logs {name} shows the "
                                                               "current one")
    yield LogEvent(f"previous instance of container {container} in pod {pname} (restarted "
                   f"{restarts} time{'s' if restarts != 1 else ''})"
                   + (f"; {deleted}: see Cloud Logging" if deleted else ""), notice=True)
    resp = log_request(ns, pod, container, follow=False, since=opts.since_seconds,
                       tail=opts.tail_lines, timestamps=opts.timestamps, previous=True)
    with ns.tr(f"reading the log of pod {pname}"):
        for line in read_lines(resp):
            yield LogEvent(line)


def _cloud_logging(ns: Namespace, name: str) -> str:
    """Where a deleted pod's log still is: the query for Cloud Logging (gcloud logging read)."""
    return ("Cloud Logging keeps it: gcloud logging read 'resource.type=\"k8s_container\" AND "
            f"resource.labels.namespace_name=\"{ns.name}\" AND "
            f"labels.\"k8s-pod/{labels.JOBSET_NAME.replace('.', '_')}\"="
            f"\"{name}\"'")


def log_request(ns: Namespace, pod: dict, container: str, *, follow: bool,
                since: int | None, tail: int | None, timestamps: bool,
                previous: bool = False) -> Any:
    pname = pod["metadata"]["name"]
    with ns.tr(f"reading the log of pod {pname}", name=pname, kind="pod",
               namespace=ns.name, invalid=BackendError):
        return ns.request(
            "GET", ns.path("pods", pname, "log"),
            {"container": container, "follow": follow, "sinceSeconds": since,
             "tailLines": tail, "timestamps": timestamps, "previous": previous or None},
            stream=True, timeout=(10.0, QUIET_RECONNECT) if follow else (10.0, 120.0))


def _once(ns: Namespace, pod: dict, container: str,
          opts: LogOptions) -> Iterator[LogEvent]:
    resp = log_request(ns, pod, container, follow=False, since=opts.since_seconds,
                       tail=opts.tail_lines, timestamps=opts.timestamps)
    with ns.tr(f"reading the log of pod {pod['metadata']['name']}"):
        for line in read_lines(resp):
            yield LogEvent(line)


def _follow(ns: Namespace, name: str, sel: str, role: str,
            opts: LogOptions) -> Iterator[LogEvent]:
    current: dict | None = None  # the pod being followed
    last: dt.datetime | None = None  # timestamp of the last line yielded from it
    cuts = 0
    announced = False
    while True:
        pods, rv = ns.pods(sel)
        pod = pick_pod([p for p in pods if _running(p)])
        if pod is None or (current and pod["metadata"]["uid"] == current["metadata"]["uid"]
                           and _finished(pod)):
            if current and pod is not None:
                return  # the followed container finished and was not replaced
            if not ns.jobset_exists(name):
                yield LogEvent(f"workload {name} was deleted", notice=True)
                return
            if not announced:
                waiting = f"the {role} pod of {name}" if current is None else \
                    f"a replacement for {role} pod {current['metadata']['name']}"
                yield LogEvent(f"waiting for {waiting}", notice=True)
                announced = True
            ns.wait_pod_change(sel, rv, 5.0)
            continue
        announced = False
        first = current is None
        if current is not None and pod["metadata"]["uid"] != current["metadata"]["uid"]:
            yield LogEvent(f"{role} pod {current['metadata']['name']} was replaced by "
                           f"{pod['metadata']['name']} (restart); following the new pod",
                           notice=True)
            last, cuts = None, 0
        current = pod
        since = opts.since_seconds if first else None
        if last is not None:  # reconnecting to the same pod: resume after the last line
            since = max(1, math.ceil((utc_now() - last).total_seconds()) + 1)
        container = log_container(pod, opts, role)
        try:
            resp = log_request(ns, pod, container, follow=True, since=since,
                               tail=opts.tail_lines if first else None, timestamps=True)
            try:
                with ns.tr(f"following the log of pod {pod['metadata']['name']}"):
                    for line in read_lines(resp):
                        t, text = split_timestamp(line)
                        if last is not None and t is not None and t <= last:
                            continue  # already shown before the reconnection
                        last = t or last
                        cuts = 0
                        yield LogEvent(line if opts.timestamps else text)
            except ApiTimeout:
                continue  # a quiet log: ask again from the last line seen
        except ContainerWaiting:  # e.g. CrashLoopBackOff: wait for a change
            ns.wait_pod_change(sel, rv, 5.0)
            continue
        except StreamCut:
            cuts += 1
            if cuts > MAX_CUTS:
                raise
            yield LogEvent(f"log stream of pod {pod['metadata']['name']} was cut; reconnecting",
                           notice=True)


def _finished(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
