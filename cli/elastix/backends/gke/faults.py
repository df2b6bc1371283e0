"""Chaos faults on GKE, each delivered as the platform delivers it: a pod deleted through the
API server, the kubelet doing the rest.

- ``kill``: one worker pod deleted with grace 0 (the kubelet SIGKILLs it: a host crash);
- ``term``: one worker pod deleted with a grace (SIGTERM now, SIGKILL when it is over: what
  node maintenance does); elastix returns once the API server accepted it, not once it is gone;
- ``slice``: every pod of one worker slice, grace 0 (a slice's hosts fail together);
- ``head``: the head pod, grace 0 (its Job fails and the JobSet restarts);
- ``hang`` is not delivered: it needs a SIGSTOP inside the worker container (an exec).

Every delete carries the pod's UID as a precondition: a pod that replaced the one chosen is
never hit. Pods are chosen by JobSet labels, never by name (:mod:`elastix.workload.labels`).
"""

from __future__ import annotations

import dataclasses
import math
import random

from elastix.backends.base import FAULTS, Fault, KillRecord, PodInfo, check_pod_index
from elastix.backends.gke.api import Namespace
from elastix.backends.gke.status import pod_info
from elastix.errors import BackendError, ConflictError, NotFoundError, UsageError
from elastix.protocol.timefmt import utc_now
from elastix.workload import labels

DEFAULT_GRACE = 30
"""Kubernetes' default ``terminationGracePeriodSeconds``, for a pod whose spec has none (the
API server fills it in at creation, so only a pod read from elsewhere lacks it)."""

HANG = ("--fault hang cannot be delivered on the gke backend: it needs a SIGSTOP inside the "
        "worker container (an exec), which elastix does not do; use --fault kill or --fault "
        "term, or the local backend")


def support(fault: Fault) -> str | None:
    """None when GKE can deliver ``fault``; else one line saying why not and what instead."""
    if fault.kind == "hang":
        return HANG
    if fault.kind not in FAULTS:
        return f"unknown fault {fault.kind!r}: one of {', '.join(FAULTS)}"
    return None


@dataclasses.dataclass
class Workers:
    """A workload's worker pods, with the shape its JobSet gives them."""

    num_slices: int
    hosts: int
    pods: list[tuple[PodInfo, dict]]

    def running(self, slice: int | None = None,
                host: int | None = None) -> list[tuple[PodInfo, dict]]:
        """Running (not terminating) pods, pinned to ``slice``/``host`` when given, in
        (slice, host) order."""
        return sorted(((i, p) for i, p in self.pods if i.phase == "Running"
                       and (slice is None or i.slice == slice)
                       and (host is None or i.host == host)),
                      key=lambda x: (x[0].slice or 0, x[0].host or 0, x[0].name))


def workers(ns: Namespace, name: str, slice: int | None, host: int | None) -> Workers:
    """The worker pods of ``name``, once the pins are checked against its JobSet.

    Raises:
        NotFoundError: no such workload.
        UsageError: ``slice`` or ``host`` out of range.
    """
    js = ns.jobset(name)
    pods, _ = ns.pods(f"{labels.JOBSET_NAME}={name},"
                      f"{labels.REPLICATED_JOB_NAME}={labels.WORKER_JOB}")
    wjob = next((rj for rj in js.get("spec", {}).get("replicatedJobs", [])
                 if rj.get("name") == labels.WORKER_JOB), {})
    num = wjob.get("replicas", 1) if wjob else 0
    hosts = (wjob.get("template", {}).get("spec", {}).get("parallelism") or 1) if wjob else 0
    check_pod_index(name, num, hosts, slice, host)  # ns.jobset: it has a worker Job
    return Workers(num, hosts, [(pod_info(p), p) for p in pods])


def no_victim(name: str, slice: int | None, host: int | None, verb: str) -> BackendError:
    where = "".join(f" {k} {v}" for k, v in (("slice", slice), ("host", host)) if v is not None)
    return BackendError(f"no running worker pod of {name}{where} to {verb}",
                        hint=f"see the pods with: elastix workload status {name}")


def one_worker(ns: Namespace, name: str, slice: int | None, host: int | None,
               seed: int | None, verb: str = "kill") -> tuple[PodInfo, dict]:
    """One running worker: the pinned one, else chosen with ``seed`` among those pinned."""
    live = workers(ns, name, slice, host).running(slice, host)
    if not live:
        raise no_victim(name, slice, host, verb)
    if slice is not None and host is not None:
        return live[0]
    return random.Random(seed).choice(live)


def slice_pods(ns: Namespace, name: str, slice: int | None,
               seed: int | None) -> list[tuple[PodInfo, dict]]:
    """Every pod of one slice, in host order: ``slice``, or one chosen with ``seed`` among
    the slices with a running pod. A pod still starting goes too (its slice is down), one
    already terminating is left to finish."""
    w = workers(ns, name, slice, None)
    live = w.running(slice)
    if not live:
        raise no_victim(name, slice, None, "fault")
    chosen = slice if slice is not None else \
        random.Random(seed).choice(sorted({i.slice for i, _ in live}))
    return sorted(((i, p) for i, p in w.pods if i.slice == chosen
                   and i.phase in ("Running", "Pending")),
                  key=lambda x: (x[0].host or 0, x[0].name))


def head_pod(ns: Namespace, name: str) -> tuple[PodInfo, dict]:
    """The running head pod (the newest, should a restart have left two)."""
    ns.jobset(name)  # no such workload: said as such, not as "no head"
    pods, _ = ns.pods(f"{labels.JOBSET_NAME}={name},"
                      f"{labels.REPLICATED_JOB_NAME}={labels.HEAD_JOB}")
    live = [(pod_info(p), p) for p in pods]
    live = [(i, p) for i, p in live if i.phase == "Running"]
    if not live:
        raise BackendError(f"the head of {name} is not running: nothing to kill",
                           hint=f"see elastix workload status {name}")
    return max(live, key=lambda x: (x[0].started is not None, x[0].started, x[0].name))


def grace_of(fault: Fault, pod: dict) -> int:
    """The grace a ``term`` gives: ``fault.grace`` (whole seconds, as the API takes them,
    rounded up), else the pod's own ``terminationGracePeriodSeconds``."""
    if fault.grace is not None:
        return math.ceil(fault.grace)
    own = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return DEFAULT_GRACE if own is None else int(own)


_VERBS = {"kill": ("killing", "killed"), "terminate": ("terminating", "terminated")}


def delete_pod(ns: Namespace, info: PodInfo, pod: dict, grace: int, verb: str = "kill") -> None:
    """Delete ``pod`` with ``grace`` seconds, only if it is still the one read (its UID).

    Raises:
        ConflictError: it was replaced since (same name, a new UID).
        NotFoundError: it is gone.
    """
    opts = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": grace,
            "preconditions": {"uid": pod["metadata"]["uid"]}}
    doing, done = _VERBS[verb]
    try:
        with ns.tr(f"{doing} pod {info.name}", name=info.name, kind="pod",
                   namespace=ns.name):
            # The body is what the API server reads (it ignores the query when a body is
            # sent); the query says the same, for anyone reading the request log.
            ns.request("DELETE", ns.path("pods", info.name), {"gracePeriodSeconds": grace},
                       body=opts)
    except ConflictError:
        raise ConflictError(f"pod {info.name} was replaced before it could be {done}",
                            hint="run the command again") from None


def record(name: str, info: PodInfo, fault: str, dry_run: bool,
           grace: int | None = None) -> KillRecord:
    return KillRecord(workload=name, pod=info.name, slice=info.slice, host=info.host,
                      node=info.node, time=utc_now(), dry_run=dry_run, fault=fault,
                      grace=None if grace is None else float(grace))


def deliver(ns: Namespace, name: str, fault: Fault, *, slice: int | None, host: int | None,
            seed: int | None, dry_run: bool) -> list[KillRecord]:
    """Deliver ``fault`` (GKE can: :func:`support`) and return what it hit, in the order hit.
    See :meth:`elastix.backends.base.Backend.inject`."""
    fault.check_target(slice, host)
    if fault.kind == "kill":
        info, pod = one_worker(ns, name, slice, host, seed)
        if not dry_run:
            delete_pod(ns, info, pod, 0)
        return [record(name, info, "kill", dry_run)]
    if fault.kind == "head":
        info, pod = head_pod(ns, name)
        if not dry_run:
            delete_pod(ns, info, pod, 0)
        return [record(name, info, "head", dry_run)]
    if fault.kind == "term":
        if fault.grace is not None and fault.grace < 0:
            raise UsageError(f"--grace must be 0 or more, got {fault.grace:g}",
                             hint="give the seconds from SIGTERM to SIGKILL, e.g. --grace 30")
        info, pod = one_worker(ns, name, slice, host, seed, "terminate")
        grace = grace_of(fault, pod)
        if not dry_run:
            delete_pod(ns, info, pod, grace, "terminate")
        return [record(name, info, "term", dry_run, grace)]
    if fault.kind != "slice":
        raise UsageError(f"--fault {fault.kind} is not delivered here",
                         hint="see elastix chaos kill-worker --help for the faults")
    out: list[KillRecord] = []
    for n, (info, pod) in enumerate(slice_pods(ns, name, slice, seed)):
        if not dry_run:
            try:
                delete_pod(ns, info, pod, 0)
            except (NotFoundError, ConflictError):
                if n == 0:
                    raise
                continue  # its slice went down with the first host: that is the fault
        out.append(record(name, info, "slice", dry_run))
    return out
