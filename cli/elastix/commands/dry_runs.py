"""Offline dry runs of the commands that change a cluster: what ``workload delete`` and ``chaos
kill-worker`` would send to GKE, said without a cluster (a dry run needs no credentials and
reaches nothing), and the local backend's own (it reads only this machine's files).

What a cluster would have to answer first (which pod a kill picks, which workloads a selector
matches) is named by how it is chosen, never guessed.
"""

from __future__ import annotations

from typing import Any

from elastix.backends import Target
from elastix.backends.base import Fault

_ASIDE = "nothing sent: a dry run is offline"


def _jobset_path(namespace: str, name: str) -> str:
    from elastix.clients.kube import JOBSET_GROUP, JOBSET_PLURAL, JOBSET_VERSION

    return (f"/apis/{JOBSET_GROUP}/{JOBSET_VERSION}/namespaces/{namespace}/{JOBSET_PLURAL}/"
            f"{name}")


def _api(version: str) -> str:
    return "/api/v1" if version == "v1" else f"/apis/{version}"


def delete_gke(target: Target, names: list[str], selector: str | None, *, wait: bool
               ) -> list[str]:
    """The requests ``workload delete`` sends on GKE, in order, for each workload."""
    from elastix.clients.kube import JOBSET_GROUP, JOBSET_PLURAL, JOBSET_VERSION
    from elastix.workload import labels, rbac

    ns = target.namespace or "default"
    out = []
    if selector is not None:
        out.append(f"GET /apis/{JOBSET_GROUP}/{JOBSET_VERSION}/namespaces/{ns}/{JOBSET_PLURAL}"
                   f"?labelSelector={selector}   (the workloads it matches; then for each NAME:)")
        names = ["NAME"]
    for name in names:
        out.append(f"DELETE {_jobset_path(ns, name)}   {{\"propagationPolicy\": "
                   "\"Background\"}  (its Jobs and pods follow)")
        for version, plural, body in reversed(rbac.objects(name, ns)):
            out.append(f"DELETE {_api(version)}/namespaces/{ns}/{plural}/"
                       f"{body['metadata']['name']}   (the head's account, if create made it)")
        if wait:
            out.append(f"GET /api/v1/namespaces/{ns}/pods?labelSelector="
                       f"{labels.JOBSET_NAME}={name}&watch=true   (until none is left)")
    return out


def delete_local(backend: Any, names: list[str], selector: str | None, *,
                 delete_data: bool) -> list[str]:
    """What ``workload delete`` does on the local backend, for each workload."""
    from elastix.backends.local.plan import data_dir, workload_dir
    from elastix.workload.selector import parse

    if selector is not None:
        names = [w.name for w in backend.list(parse(selector))]
        if not names:
            return [f"no local workloads in {backend.where()} match -l {selector}"]
    out = []
    for name in names:
        d = workload_dir(backend.root, name, must_exist=False)
        if not backend.exists(name):
            kept = data_dir(d).is_dir()
            out.append(f"workload {name}: not found in {backend.where()}"
                       + (f"; {'remove' if delete_data else 'keep'} its data (checkpoints) in "
                          f"{data_dir(d)}" if kept else ": nothing to delete"))
            continue
        out.append(f"stop workload {name}'s processes (the head first, SIGTERM with its grace "
                   f"for a last save, then its slice hosts) and remove {d}")
        out.append(f"  {'remove' if delete_data else 'keep'} its data (checkpoints) in "
                   f"{data_dir(d)}")
    return out


def kill_gke(target: Target, name: str, fault: Fault, slice_: int | None, host: int | None
             ) -> dict[str, Any]:
    """The pod delete ``chaos kill-worker`` sends on GKE, the victim said by how it is chosen
    (the running pods are read when it runs)."""
    ns = target.namespace or "default"
    where = ("the head pod" if fault.kind == "head" else
             f"every pod of slice {slice_ if slice_ is not None else 'S (chosen at random)'}"
             if fault.kind == "slice" else
             f"the worker pod of slice {'S' if slice_ is None else slice_}, host "
             f"{'H' if host is None else host}" + (" (chosen at random among the running ones)"
                                                   if slice_ is None or host is None else ""))
    if fault.kind != "term":
        grace, why = "0", ""
    elif fault.grace is not None:
        grace, why = f"{fault.grace:g}", ""
    else:
        grace, why = "GRACE", " (GRACE: the pod's terminationGracePeriodSeconds)"
    return {"dry_run": True, "offline": True, "workload": name, "namespace": ns,
            "fault": fault.kind, "slice": slice_, "host": host, "victim": where,
            "request": f"DELETE /api/v1/namespaces/{ns}/pods/POD   {{\"gracePeriodSeconds\": "
                       f"{grace}, \"preconditions\": {{\"uid\": \"UID\"}}}}{why}"}


def kill_text(plan: dict[str, Any]) -> str:
    """:func:`kill_gke` as the line ``kill-worker --dry-run`` prints."""
    return (f"would delete {plan['victim']} of workload {plan['workload']} ({plan['fault']} "
            f"fault; {_ASIDE}): {plan['request']}")


def aside() -> str:
    """Why the dry run names no pod and checks no target: it is offline."""
    return (f"{_ASIDE}: the workload, its pods and the plan's targets are read when the "
            "command runs without --dry-run")
