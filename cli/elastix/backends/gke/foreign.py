"""JobSets elastix did not make: who made them, whether they are Pathways workloads, and where a
name is when it is not in the namespace asked.

elastix reads any Pathways JobSet as it reads its own (``docs/gke.md``, "Workloads elastix did
not submit"): xpk's ``workload create-pathways``, Cluster Toolkit's ``gcluster job submit
--pathways`` and google/pathways-job all render a ``pathways-head`` replicated job (the head,
one pod: the coordinator) and a ``worker`` one (one Job a slice), and the JobSet controller
labels their Jobs and pods as it labels elastix's (:mod:`elastix.protocol.jobset`). So the head,
the slices and their hosts come from those labels, and training from the head's log. Nothing
here writes: a workload elastix did not create gets no label, annotation or RBAC object from it.
"""

from __future__ import annotations

from typing import Any

from elastix.workload import labels

PATHWAYS_SHAPE = (f"elastix reads JobSets with a {labels.HEAD_JOB} replicated job (the head, "
                  f"one pod) and a {labels.WORKER_JOB} one (a Job per slice), as xpk, gcluster "
                  "and pathways-job render them")


def not_pathways(js: dict[str, Any]) -> str | None:
    """Why ``js`` is not a Pathways workload elastix can read (one line), or None when it is:
    it needs a ``pathways-head`` replicated job of one replica and a ``worker`` one."""
    rjobs = {rj.get("name"): rj for rj in (js.get("spec") or {}).get("replicatedJobs") or []}
    has = ", ".join(str(n) for n in rjobs) or "none"
    missing = [n for n in (labels.HEAD_JOB, labels.WORKER_JOB) if n not in rjobs]
    if missing:
        return f"it has no {' and no '.join(missing)} replicated job (it has: {has})"
    replicas = rjobs[labels.HEAD_JOB].get("replicas", 1)
    if replicas != 1:
        return f"its {labels.HEAD_JOB} replicated job has {replicas} replicas, not one head"
    return None


def elsewhere(items: list[dict[str, Any]], namespace: str) -> list[str]:
    """The namespaces other than ``namespace`` holding one of ``items`` (a cluster-wide list
    of JobSets of one name), sorted."""
    return sorted({(js.get("metadata") or {}).get("namespace") or "" for js in items}
                  - {namespace, ""})
