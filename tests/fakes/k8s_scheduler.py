"""The fake cluster's scheduler: which Node a pod binds to, or why none fits.

A model of kube-scheduler's filter phase, enough to catch a manifest that cannot run on a
cluster: for each Node, the first failing filter (in the default profile's order, as the real
framework stops at the first plugin that rejects a node) gives that node's reason; a pod that
fits nowhere stays Pending with the message the real scheduler writes. Filters modelled:

- TaintToleration: NoSchedule / NoExecute taints the pod does not tolerate;
- NodeAffinity: the pod's ``nodeSelector`` (required node affinity is not modelled);
- NodeResourcesFit: cpu, memory and extended resources (``google.com/tpu``) requested by the
  containers and restartable (sidecar) init containers, against allocatable minus what the pods
  already bound there request;
- InterPodAffinity, as JobSet's exclusive placement uses it: a pod whose Job carries
  ``alpha.jobset.sigs.k8s.io/exclusive-topology: <label key>`` goes to the topology domain
  (value of that node label) its Job's bound pods use, and never to one holding another Job's
  pod (JobSet v0.12 injects a required podAffinity on the job-key and a podAntiAffinity on
  other job-keys, topologyKey = the annotation's value:
  kubernetes-sigs/jobset ``pkg/controllers/jobset_controller.go``, exclusive placement).

Messages, from kubernetes/kubernetes @ 0f7becbc443966e5cf4ac37aa20a1a509fab73eb:
``pkg/scheduler/framework/types.go`` (``NoNodeAvailableMsg = "0/%v nodes are available"``;
``FitError.Error`` lists "<count> <reason>" sorted and joined with ", ", ending with "."),
``plugins/tainttoleration/taint_toleration.go`` ("node(s) had untolerated taint {%s: %s}"),
``plugins/nodeaffinity/node_affinity.go`` ("node(s) didn't match Pod's node affinity/selector"),
``plugins/noderesources/fit.go`` ("Insufficient %v"), ``plugins/interpodaffinity/filtering.go``
("node(s) didn't match pod affinity rules", "node(s) didn't match pod anti-affinity rules").
The "preemption: ..." tail newer schedulers append is left out.
"""

from __future__ import annotations

import collections
from typing import Any

from elastix.workload.platform import pod_requests, quantity

EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
TAINT = "node(s) had untolerated taint {{{}: {}}}"
SELECTOR = "node(s) didn't match Pod's node affinity/selector"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"


def _tolerates(tolerations: list[dict], taint: dict) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if not t.get("key") and t.get("operator") == "Exists":
            return True  # an empty key with Exists tolerates everything
        if t.get("key") != taint.get("key"):
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def requests(pod_spec: dict) -> dict[str, float]:
    """What a pod asks of a node: cpu, memory and every extended resource in its limits."""
    base = pod_requests(pod_spec)
    out = {"cpu": base.cpu, "memory": base.memory}
    sidecars = [c for c in pod_spec.get("initContainers") or []
                if c.get("restartPolicy") == "Always"]
    for c in [*(pod_spec.get("containers") or []), *sidecars]:
        res = c.get("resources") or {}
        for name, value in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
            if name not in ("cpu", "memory"):
                out[name] = out.get(name, 0.0) + quantity(value)
    return out


def _free(node: dict, bound: list[dict]) -> dict[str, float]:
    free = {k: quantity(v) for k, v in (node.get("status", {}).get("allocatable") or {}).items()
            if k != "pods"}
    for pod in bound:
        for k, v in requests(pod.get("spec") or {}).items():
            free[k] = free.get(k, 0.0) - v
    return free


def _domain_problem(pod: dict, node: dict, pods: list[dict], nodes: dict[str, dict]) -> str | None:
    key = (pod["metadata"].get("annotations") or {}).get(EXCLUSIVE)
    if not key:
        return None
    domain = (node["metadata"].get("labels") or {}).get(key)
    if domain is None:
        return AFFINITY
    mine = (pod["metadata"].get("labels") or {}).get(JOB_KEY)
    for other in pods:
        where = nodes.get((other.get("spec") or {}).get("nodeName") or "")
        if where is None or other["metadata"].get("uid") == pod["metadata"].get("uid"):
            continue
        same = (other["metadata"].get("labels") or {}).get(JOB_KEY) == mine
        in_domain = (where["metadata"].get("labels") or {}).get(key) == domain
        if same and not in_domain:
            return AFFINITY
        if not same and in_domain and JOB_KEY in (other["metadata"].get("labels") or {}):
            return ANTI_AFFINITY
    return None


def _node_reasons(pod: dict, node: dict, pods: list[dict], nodes: dict[str, dict]) -> list[str]:
    spec = pod.get("spec") or {}
    for taint in node.get("spec", {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and \
                not _tolerates(spec.get("tolerations") or [], taint):
            return [TAINT.format(taint.get("key"), taint.get("value", ""))]
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return [SELECTOR]
    name = node["metadata"]["name"]
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName") == name
             and p["metadata"].get("uid") != pod["metadata"].get("uid")]
    free = _free(node, bound)
    short = sorted(f"Insufficient {k}" for k, v in requests(spec).items()
                   if v > 0 and v > free.get(k, 0.0) + 1e-9)
    if short:
        return short
    problem = _domain_problem(pod, node, pods, nodes)
    return [problem] if problem else []


def schedule(pod: dict, nodes: list[dict], pods: list[dict]) -> tuple[str | None, str]:
    """The node ``pod`` binds to (the first that fits, by name), or None and the
    FailedScheduling message.

    Args:
        pod: the pod to place.
        nodes: every Node of the cluster.
        pods: every pod that occupies a node (bound, not finished), in any namespace.
    """
    by_name = {n["metadata"]["name"]: n for n in nodes}
    counts: collections.Counter[str] = collections.Counter()
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        reasons = _node_reasons(pod, node, pods, by_name)
        if not reasons:
            return node["metadata"]["name"], ""
        counts.update(reasons)
    detail = ", ".join(sorted(f"{n} {r}" for r, n in counts.items()))
    return None, f"0/{len(nodes)} nodes are available: {detail}."


def occupying(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pods holding node resources: bound and not Succeeded or Failed."""
    return [p for p in pods if (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
