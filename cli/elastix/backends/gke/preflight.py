"""Preflight for ``workload create`` on GKE: can this cluster run this manifest at all?

Run by :meth:`GKEBackend.submit` after the client-side render and before the server dry run or
the create, so that a workload that would sit Pending forever (or fail every Cloud Storage call)
is refused with every reason at once, one line each with its fix, and nothing is submitted.

What the cluster is read from: the Nodes of the Kubernetes API (one ``GET /api/v1/nodes``),
counted per node pool by GKE's ``cloud.google.com/gke-nodepool`` label, so resizes, autoscaling
and multi-zone pools count as they are; with ``--cluster``, also the node pools the backend
looked up (no extra request), which add each pool's autoscaling maximum, OAuth scopes and
service account. A pool's ``initial_node_count`` is used only when the Nodes cannot be listed
(it does not follow resizes and is per zone), and then scaled by the pool's zones.
What the workload needs is read from the rendered manifest only: the head pod's nodeSelector and
requests, the workers' nodeSelector, slices (replicas) and hosts (completions), and every
``gs://`` string anywhere in it (scratch location, events path, checkpoint directory in the
command or the environment).

Exit codes: 1 when any problem is the cluster's (a missing or small head pool, scopes, no JobSet,
no TPU nodes at all), which the command line cannot fix; 2 when every problem can be fixed in
the command itself (a TPU type this cluster does not have, more slices than it has).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from elastix.errors import ProblemsError
from elastix.workload import labels, platform
from elastix.workload.manifest import pod_spec, replicated_job

# Scopes that let a node's service account write to Cloud Storage: Cloud Storage docs,
# "OAuth 2.0 scopes" (https://cloud.google.com/storage/docs/oauth-scopes): read_write and
# full_control; cloud-platform covers every Google Cloud API. read_only (in GKE's default set)
# cannot write checkpoints or the scratch location.
STORAGE_WRITE_SCOPES = frozenset({
    "https://www.googleapis.com/auth/devstorage.read_write",
    "https://www.googleapis.com/auth/devstorage.full_control",
    "https://www.googleapis.com/auth/cloud-platform",
})
# GKE taints every TPU slice node google.com/tpu=present:NoSchedule ("About TPUs in GKE",
# https://cloud.google.com/kubernetes-engine/docs/concepts/tpus#how_tpus_work).
_TPU_TAINT = {"key": platform.TPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
_TPU_MACHINE = re.compile(r"^ct\w+-\w+-(\d+)t$")
CLUSTER, WORKLOAD = "cluster", "workload"


class PreflightError(ProblemsError):
    """The cluster cannot run the workload; nothing was submitted."""

    subject = "found by preflight; nothing was submitted"

    def __init__(self, problems: list[tuple[str, str, str | None]], exit_code: int) -> None:
        super().__init__(problems)
        self.exit_code = exit_code
        if len(problems) > 1:
            self.hint = "fix them, or pass --skip-preflight to submit anyway"


@dataclasses.dataclass(frozen=True)
class Group:
    """Nodes alike: one node pool, or the Nodes of one pool as the Kubernetes API lists them."""

    name: str
    labels: dict[str, str]
    taints: tuple[dict, ...]
    allocatable: platform.Resources | None  # None: unknown machine type
    nodes: int
    machine: str = ""
    autoscales: bool = False
    scopes: tuple[str, ...] | None = None  # None: not visible (Nodes)
    max_nodes: int | None = None  # autoscaling maximum over the pool's zones; None: unknown
    service_account: str | None = None  # the nodes' service account; None: not visible

    @property
    def capacity(self) -> int:
        """Nodes this pool can have: its autoscaling maximum, else the nodes it has."""
        return max(self.nodes, self.max_nodes or 0) if self.autoscales else self.nodes

    def selects(self, selector: dict[str, str]) -> bool:
        return all(self.labels.get(k) == v for k, v in selector.items())

    def tolerated_by(self, tolerations: list[dict]) -> bool:
        return all(any(t.get("operator") == "Exists" and t.get("key") in (None, "", taint["key"])
                       or (t.get("key") == taint["key"] and t.get("value") == taint.get("value"))
                       for t in tolerations)
                   for taint in self.taints if taint.get("effect") in ("NoSchedule", "NoExecute"))


@dataclasses.dataclass(frozen=True)
class Needs:
    """What the manifest asks of the cluster."""

    head_selector: dict[str, str] | None  # None: headless
    head: platform.Resources
    worker_selector: dict[str, str]
    worker_tolerations: list[dict]
    slices: int
    hosts: int
    exclusive: str | None  # the workers' exclusive-topology label key
    gcs: bool


def needs(manifest: dict[str, Any]) -> Needs:
    """Read :class:`Needs` from a rendered JobSet."""
    head = replicated_job(manifest, labels.HEAD_JOB)
    head_spec = pod_spec(head)
    worker = replicated_job(manifest, labels.WORKER_JOB) or {}
    job = worker.get("template", {})
    pod = job.get("spec", {}).get("template", {}).get("spec", {})
    return Needs(
        head_selector=dict(head_spec.get("nodeSelector") or {}) if head else None,
        head=platform.pod_requests(head_spec),
        worker_selector=dict(pod.get("nodeSelector") or {}),
        worker_tolerations=list(pod.get("tolerations") or []),
        slices=int(worker.get("replicas", 1)),
        hosts=int(job.get("spec", {}).get("completions") or
                  job.get("spec", {}).get("parallelism") or 1),
        exclusive=(job.get("metadata", {}).get("annotations") or {}).get(labels.EXCLUSIVE_TOPOLOGY),
        gcs="gs://" in json.dumps(manifest),
    )


# --- the cluster, from either source --------------------------------------------------------


def groups_from_nodes(nodes: list[dict]) -> list[Group]:
    """One group per node pool label (or per Node without one), from ``GET /api/v1/nodes``."""
    by: dict[str, list[dict]] = {}
    for n in nodes:
        lab = (n.get("metadata") or {}).get("labels") or {}
        by.setdefault(lab.get(platform.NODEPOOL_LABEL) or n["metadata"]["name"], []).append(n)
    out = []
    for name, members in sorted(by.items()):
        first = members[0]
        alloc = (first.get("status") or {}).get("allocatable") or {}
        try:
            res = platform.Resources(platform.quantity(alloc["cpu"]),
                                     platform.quantity(alloc["memory"]))
        except (KeyError, ValueError):
            res = None
        out.append(Group(name, dict(first["metadata"].get("labels") or {}),
                         tuple((first.get("spec") or {}).get("taints") or []), res, len(members),
                         # the well-known label kubelet sets (Kubernetes "Well-Known Labels")
                         first["metadata"].get("labels", {}).get(
                             "node.kubernetes.io/instance-type", "")))
    return out


def _tpu_labels(machine: str, topology: str, chips: int) -> dict[str, str]:
    """The accelerator and topology labels GKE puts on a TPU pool's nodes, from the catalogue."""
    from elastix.workload import tpu

    types = [t for t in tpu.catalogue().values() if t.machine_type == machine]
    if not types:
        return {}
    if not topology:  # single-host pools have no placement policy: the host is the slice
        topology = next((t.topology for t in types if t.hosts == 1 and t.chips == chips), "")
    return {platform.ACCELERATOR_LABEL: types[0].accelerator, platform.TOPOLOGY_LABEL: topology}


def groups_from_pools(cluster: Any, nodes: list[dict] | None = None) -> list[Group]:
    """One group per node pool of a ``container_v1.Cluster`` (as the lookup returned it).

    ``nodes`` (``GET /api/v1/nodes``) gives each pool's node count by the node-pool label;
    None (the Nodes could not be listed) falls back to ``initial_node_count`` per zone.
    """
    counted: dict[str, int] = {}
    for n in nodes or []:
        pool = ((n.get("metadata") or {}).get("labels") or {}).get(platform.NODEPOOL_LABEL)
        if pool:
            counted[pool] = counted.get(pool, 0) + 1
    out = []
    for p in cluster.node_pools:
        machine = p.config.machine_type
        lab = {platform.NODEPOOL_LABEL: p.name, **dict(p.config.labels)}
        m = _TPU_MACHINE.match(machine)
        taints: tuple[dict, ...] = ()
        alloc = None
        if m:
            topo = p.placement_policy.tpu_topology if p.placement_policy else ""
            lab.update(_tpu_labels(machine, topo, int(m.group(1))))
            taints = (_TPU_TAINT,)
        else:
            cap = platform.machine_capacity(machine)
            alloc = platform.allocatable(cap) if cap else None
        zones = max(1, len(p.locations))
        auto = bool(p.autoscaling and p.autoscaling.enabled)
        # Autoscaling bounds: total_* count the whole pool, the others are per zone (container
        # v1 API, NodePoolAutoscaling).
        top = (p.autoscaling.total_max_node_count or p.autoscaling.max_node_count * zones) \
            if auto else None
        have = counted.get(p.name, 0) if nodes is not None else int(p.initial_node_count) * zones
        out.append(Group(p.name, lab, taints, alloc, have, machine, auto,
                         tuple(p.config.oauth_scopes), top, p.config.service_account or "default"))
    return out


# --- the checks -----------------------------------------------------------------------------


def check(need: Needs, groups: list[Group], jobset_served: bool,
          cluster: str) -> list[tuple[str, str, str | None, str]]:
    """Every problem: (field, message, fix, CLUSTER or WORKLOAD)."""
    problems: list[tuple[str, str, str | None, str]] = []
    if not jobset_served:
        from elastix.clients.kube import JOBSET_INSTALL_HINT

        problems.append(("JobSet", "the JobSet CRD is not installed (the cluster serves no "
                         "jobset.x-k8s.io/v1alpha2)", JOBSET_INSTALL_HINT, CLUSTER))
    if not groups:
        return problems  # no Nodes: scales from zero, or not GKE; nothing to judge
    used: list[Group] = []
    if need.head_selector is not None:
        problems += _check_head(need, groups, cluster, used)
    problems += _check_tpus(need, groups, cluster, used)
    blind = list(dict.fromkeys(g.name for g in used if g.scopes is not None
                               and not STORAGE_WRITE_SCOPES & set(g.scopes)))
    if need.gcs and blind:
        problems.append((
            "scopes", f"node pool{'s' if len(blind) > 1 else ''} {', '.join(blind)} cannot "
            "write to Cloud Storage (no devstorage.read_write, devstorage.full_control or "
            "cloud-platform scope) and the workload uses gs:// paths, as the node's service "
            "account: its pods are hostNetwork, which Workload Identity does not cover",
            f"recreate the pools with the storage-full and cloud-platform scopes (elastix "
            f"cluster create {cluster} sets them)", CLUSTER))
    return problems


def _check_head(need: Needs, groups: list[Group], cluster: str,
                used: list[Group]) -> list[tuple[str, str, str | None, str]]:
    sel = need.head_selector or {}
    matching = [g for g in groups if g.selects(sel) and g.tolerated_by([])]
    want = ", ".join(f"{k}={v}" for k, v in sel.items()) or "any untainted node"
    if not matching:
        have = ", ".join(g.name for g in groups if not g.taints) or "none"
        return [("head pool", f"no node pool matches the head pod's selector {want} "
                 f"(untainted pools: {have})",
                 f"create a CPU pool named {platform.HEAD_POOL} of {platform.HEAD_MACHINE} "
                 f"(elastix cluster create {cluster} does)", CLUSTER)]
    used.extend(matching)
    if all(g.capacity == 0 for g in matching):
        return [("head pool", f"pool {', '.join(g.name for g in matching)} has no nodes and "
                 "does not autoscale: the head pod cannot be scheduled",
                 "resize the pool to 1 node or enable autoscaling on it", CLUSTER)]
    known = [g for g in matching if g.allocatable is not None]
    if not known or any(need.head.fits_in(g.allocatable) for g in known):
        return []
    best = max(known, key=lambda g: (g.allocatable.cpu, g.allocatable.memory))
    return [("head pool", f"the head pod needs {need.head.describe()} but pool {best.name} "
             f"({best.machine or 'its machine'}) leaves {best.allocatable.describe()} to pods",
             f"use a head pool of {platform.HEAD_MACHINE} or larger", CLUSTER)]


def _check_tpus(need: Needs, groups: list[Group], cluster: str,
                used: list[Group]) -> list[tuple[str, str, str | None, str]]:
    sel = need.worker_selector
    matching = [g for g in groups if g.selects(sel) and g.tolerated_by(need.worker_tolerations)]
    used.extend(matching)
    want = " ".join(sel.get(k, "?") for k in (platform.ACCELERATOR_LABEL, platform.TOPOLOGY_LABEL))
    if not matching:
        tpus = sorted({" ".join(g.labels.get(k, "?") for k in
                                (platform.ACCELERATOR_LABEL, platform.TOPOLOGY_LABEL))
                       for g in groups if platform.ACCELERATOR_LABEL in g.labels})
        if tpus:
            return [("--tpu-type", f"the cluster has no {want} nodes; it has {', '.join(tpus)}",
                     "pick the --tpu-type of the cluster's TPU pools", WORKLOAD)]
        return [("TPU nodes", f"the cluster has no TPU nodes ({want} wanted)",
                 f"add one TPU node pool per slice (elastix cluster create {cluster} "
                 "--tpu-type ... --num-slices ...)", CLUSTER)]
    # What each pool can hold: the nodes it has, or its autoscaling maximum (the autoscaler
    # adds nodes on demand, up to it).
    if need.exclusive == platform.NODEPOOL_LABEL:  # one slice per pool (exclusive placement)
        slices = sum(1 for g in matching if g.capacity >= need.hosts)
    else:
        slices = sum(g.capacity for g in matching) // need.hosts
    if slices >= need.slices:
        return []
    pools = ", ".join(f"{g.name}: {g.nodes}" + (f" (autoscaling to {g.max_nodes})"
                                                 if g.autoscales else "") for g in matching)
    return [("--num-slices", f"the workload needs {need.slices} slices of {need.hosts} {want} "
             f"hosts; the cluster has room for {slices} (nodes per pool: {pools})",
             f"pass --num-slices {slices}, or add TPU node pools" if slices else
             "add TPU node pools with enough nodes for a slice", WORKLOAD)]


_BUCKET_RE = re.compile(r"gs://([a-z0-9][a-z0-9._-]{1,221}[a-z0-9])")


def identity_note(manifest: dict[str, Any], groups: list[Group]) -> str | None:
    """What preflight cannot see: whether the nodes' service account may pull the images and
    read and write the buckets. Every Pathways pod is hostNetwork, so it acts as its node's
    service account; the grants live in project, bucket and repository IAM policies (and may
    come through groups), which only the Cloud Resource Manager, IAM, Storage and Artifact
    Registry APIs show; elastix has no client for the first two, so it checks none of them
    and says what to grant instead. None when no pool's service account is known."""
    accounts = sorted({g.service_account for g in groups if g.service_account})
    if not accounts:
        return None
    who = ", ".join("the Compute Engine default service account" if a == "default" else a
                    for a in accounts)
    buckets = sorted(set(_BUCKET_RE.findall(json.dumps(manifest))))
    where = f" and object read/write on {', '.join(f'gs://{b}' for b in buckets)} (e.g. " \
            "roles/storage.objectUser)" if buckets else ""
    return (f"preflight did not check the IAM roles of the nodes' service account ({who}): "
            f"its pods need image pull on the images' repositories (roles/artifactregistry."
            f"reader){where}; elastix cannot read IAM policies (no Resource Manager or IAM "
            "client), see docs/gke.md")


def raise_if_problems(problems: list[tuple[str, str, str | None, str]]) -> None:
    """Raise :class:`PreflightError` (exit 1 if any problem is the cluster's, else 2)."""
    if problems:
        code = 1 if any(p[3] == CLUSTER for p in problems) else 2
        raise PreflightError([p[:3] for p in problems], code)
