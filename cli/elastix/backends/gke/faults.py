"""Chaos faults on GKE, each delivered as the platform delivers it: a pod deleted through the
API server, the kubelet doing the rest.

- ``kill``: one worker pod deleted with grace 0 (the kubelet SIGKILLs it: a host crash).

Every delete carries the pod's UID as a precondition: a pod that replaced the one chosen is
never hit. Pods are chosen by JobSet labels, never by name (:mod:`elastix.workload.labels`).
"""

from __future__ import annotations

import dataclasses
import random

from elastix.backends.base import KillRecord, PodInfo
from elastix.backends.gke.api import Namespace
from elastix.backends.gke.status import pod_info
from elastix.errors import BackendError, ConflictError, UsageError
from elastix.protocol.timefmt import utc_now
from elastix.workload import labels


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
    if slice is not None and not 0 <= slice < num:
        raise UsageError(f"--slice {slice} is out of range: {name} has {num} slices "
                         f"(0-{num - 1})", hint=f"see them with: elastix workload status {name}")
    hosts = (wjob.get("template", {}).get("spec", {}).get("parallelism") or 1) if wjob else 0
    if host is not None and not 0 <= host < hosts:
        raise UsageError(f"--host {host} is out of range: {name} has {hosts} hosts per "
                         f"slice (0-{hosts - 1})",
                         hint=f"see them with: elastix workload status {name}")
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


_VERBS = {"kill": ("killing", "killed")}


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
