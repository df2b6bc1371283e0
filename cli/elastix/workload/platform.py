"""Platform facts both ``cluster create`` and ``workload create`` read, so they cannot disagree.

Pure data and arithmetic, no I/O. Each fact names its source; tests/fixtures/ holds the vendored
extracts (with repo, path and commit) that tests/workload/test_platform.py checks them against.
The TPU side of the catalogue is in :mod:`elastix.workload.tpu`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any

HEAD_POOL = "cpu-np"
"""The node pool of the Pathways head pod: the name xpk creates and selects
(xpk ``src/xpk/core/nodepool.py``, ``templates/pathways_workload_create.yaml.j2``) and the one
the GKE docs' Cluster Toolkit path provisions ("Create a GKE cluster with Pathways")."""

HEAD_MACHINE = "n2-standard-64"
"""The head pool's default machine: xpk's ``--pathways-gce-machine-type`` default, and GKE's
"Porting JAX workloads to Pathways": "at least a dedicated n2-standard-64"."""

HEAD_POOL_AUTOSCALING = (1, 20)
"""(min, max) nodes of the head pool when it autoscales: xpk's CPU pool
(``src/xpk/core/nodepool.py`` L415-416 @ 367c838, ``--enable-autoscaling --min-nodes=1
--max-nodes=20``)."""

HEAD_SIZES = {
    # container: (cpu limit, memory limit). Only limits are set, so requests equal them.
    # pathways-proxy: xpk templates/pathways_workload_create.yaml.j2 L62-65 @ 367c838;
    #   pathways-job pathwaysjob_controller.go L647 @ c0cc759 (100000000000 bytes).
    "proxy": ("16", "100G"),
    # pathways-rm: xpk template L101-104; pathways-job L605 (32000000000 bytes).
    "rm": ("8", "32G"),
    # the trainer (main container): xpk src/xpk/core/docker_resources.py L41-45
    #   (get_main_container_resources with use_pathways); pathways-job sets none.
    "main": ("24", "100G"),
}
"""The head pod's default sizes; the spec's --proxy-*/--rm-*/--head-* defaults read them."""

STORAGE_FULL_SCOPE = "https://www.googleapis.com/auth/devstorage.full_control"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
NODE_SCOPES = (STORAGE_FULL_SCOPE, CLOUD_PLATFORM_SCOPE)
"""OAuth scopes of every node pool elastix creates. Pathways pods are ``hostNetwork`` (xpk
template L30, L150; pathways-job L775, L862, L873), and GKE's Workload Identity page says
hostNetwork pods "don't use Workload Identity Federation for GKE" but reach the Compute Engine
metadata server: they act as the node's service account, limited by these scopes. The API adds
no scopes of its own ("If unspecified, no scopes are added, unless Cloud Logging or Cloud
Monitoring are enabled", container v1 ``NodeConfig.oauthScopes``). xpk sets
``storage-full,gke-default,cloud-platform`` (``src/xpk/core/nodepool.py`` L47-49, L354-356,
L415); cloud-platform already covers everything gke-default names, so elastix sends the two
full-scope URLs and lets IAM decide."""

STORAGE_SCOPES = frozenset({
    STORAGE_FULL_SCOPE, CLOUD_PLATFORM_SCOPE,
    "https://www.googleapis.com/auth/devstorage.read_write",
})
"""Scopes that let a node write to Cloud Storage (what preflight looks for when a gs:// path is
used); ``devstorage.read_only`` (part of gke-default) cannot write checkpoints or scratch."""

NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
TPU_RESOURCE = "google.com/tpu"

_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?|\.[0-9]+)([a-zA-Z]{0,2})\Z")
_SUFFIX = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}


def quantity(text: Any) -> float:
    """A Kubernetes resource quantity (``24``, ``500m``, ``100G``, ``64Gi``) as a number.

    Raises:
        ValueError: not a quantity this parser knows.
    """
    m = _QUANTITY.match(str(text).strip())
    if not m or m.group(2) not in _SUFFIX:
        raise ValueError(f"{text!r} is not a resource quantity")
    return float(m.group(1)) * _SUFFIX[m.group(2)]


@dataclasses.dataclass(frozen=True)
class Resources:
    """CPU (cores) and memory (bytes) a pod requests or a node offers."""

    cpu: float
    memory: float

    def fits_in(self, other: Resources) -> bool:
        return self.cpu <= other.cpu + 1e-9 and self.memory <= other.memory + 1e-9

    def describe(self) -> str:
        return f"{self.cpu:g} CPU / {self.memory / 2**30:.0f} GiB"


def _container_requests(c: dict[str, Any]) -> Resources:
    res = c.get("resources") or {}
    # A container with only limits requests its limits (Kubernetes defaults requests to limits).
    req = {**(res.get("limits") or {}), **(res.get("requests") or {})}
    return Resources(quantity(req.get("cpu", 0)), quantity(req.get("memory", 0)))


def pod_requests(pod_spec: dict[str, Any]) -> Resources:
    """What the scheduler reserves for a pod: the sum of its containers and of its restartable
    (sidecar) init containers, or the largest plain init container if that is more.

    Kubernetes "Sidecar Containers" / "Resource sharing within containers": native sidecars
    (``restartPolicy: Always`` init containers) run beside the app containers, so their requests
    add up; plain init containers run one at a time before them.
    """
    sidecars = [c for c in pod_spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    inits = [c for c in pod_spec.get("initContainers") or [] if c.get("restartPolicy") != "Always"]
    running = [_container_requests(c) for c in [*(pod_spec.get("containers") or []), *sidecars]]
    total = Resources(sum(r.cpu for r in running), sum(r.memory for r in running))
    for c in inits:
        r = _container_requests(c)
        total = Resources(max(total.cpu, r.cpu), max(total.memory, r.memory))
    return total


def _tiers(amount: float, tiers: Iterable[tuple[float, float]]) -> float:
    """Sum of ``rate`` x the part of ``amount`` in each (``upper bound``, ``rate``) tier."""
    reserved, lower = 0.0, 0.0
    for upper, rate in tiers:
        if amount > lower:
            reserved += (min(amount, upper) - lower) * rate
        lower = upper
    return reserved


def allocatable(capacity: Resources) -> Resources:
    """What GKE leaves to pods on a Standard-cluster node of ``capacity``.

    GKE docs, "Standard cluster architecture" > "Node allocatable resources": memory reserved is
    25 % of the first 4 GiB, 20 % of the next 4 GiB, 10 % of the next 8 GiB, 6 % of the next
    112 GiB and 2 % above 128 GiB, plus a 100 MiB eviction threshold; CPU reserved is 6 % of the
    first core, 1 % of the next, 0.5 % of the next 2 and 0.25 % above 4 cores.
    """
    gib = 2**30
    mem_reserved = _tiers(capacity.memory, [(4 * gib, 0.25), (8 * gib, 0.20), (16 * gib, 0.10),
                                            (128 * gib, 0.06), (float("inf"), 0.02)])
    cpu_reserved = _tiers(capacity.cpu, [(1, 0.06), (2, 0.01), (4, 0.005), (float("inf"), 0.0025)])
    return Resources(capacity.cpu - cpu_reserved, capacity.memory - mem_reserved - 100 * 2**20)


# GiB of memory per vCPU of the predefined CPU machine families a head pool may use. Compute
# Engine docs, "General-purpose machine family": n2-standard and n4-standard have 4 GB per vCPU,
# n2-highmem and n4-highmem 8 GB per vCPU; GKE's porting guide states the one the head needs,
# "n2-standard-64 which comes with 64 vCPUs and 256 GB memory". (Compute Engine's "GB" here are
# GiB: n2-standard-64 reports memoryMb 262144.) Checked for this catalogue: n2-standard-64 against
# the porting guide; the other ratios come from the Compute Engine page above, whose tables were
# not re-read (no stored copy with them was found). n4-standard-64 is the cpu-np machine of GKE's
# Cluster Toolkit Pathways path ("Create a GKE cluster with Pathways"). Families not listed are
# unknown on purpose: cluster create refuses them unless --skip-cpu-machine-check.
_GIB_PER_VCPU = {"n2-standard": 4, "n4-standard": 4, "n2-highmem": 8, "n4-highmem": 8}
_MACHINE = re.compile(r"^([a-z0-9]+-[a-z]+)-([0-9]+)\Z")


def machine_capacity(machine_type: str) -> Resources | None:
    """vCPUs and memory of a predefined CPU machine type; None when elastix does not know it."""
    m = _MACHINE.match(machine_type.strip())
    if not m or m.group(1) not in _GIB_PER_VCPU:
        return None
    vcpus = int(m.group(2))
    return Resources(float(vcpus), float(vcpus * _GIB_PER_VCPU[m.group(1)] * 2**30))


SUSPEND_RESUME_BACKOFF_PER_HOST = 4
"""Worker pod failures allowed per host when no elastic restart budget is given: pathways-job's
"default for suspend resume" (``pathwaysjob_controller.go`` L692 @ c0cc759) and xpk's
non-elastic value (``src/xpk/commands/workload.py`` L277-281 @ 367c838)."""


def failure_policy(max_restarts: int, slice_restart: str, slice_restarts: int,
                   num_slices: int, head_job: str, worker_job: str) -> dict[str, Any]:
    """The JobSet's ``failurePolicy``.

    ``backoff`` (the default): ``maxRestarts`` whole-JobSet restarts and no rules; a slice's
    restarts live in its Job's ``backoffLimit`` (:func:`worker_backoff_limit`).

    ``job``: JobSet v0.12's per-Job restart (``RestartJob``, alpha gate, KEP-262 Story 6: the
    worker Job at ``backoffLimit: 0``, a rule recreating only the failed Job). JobSet has no
    per-Job limit: every ``RestartJob`` and every whole-JobSet restart counts against the one
    ``maxRestarts`` (``failure_policy.go`` L226, L350: ``totalRestartsCountTowardsMax``), so
    it is the slices' budget (``slice_restarts`` x slices, shared: one slice may use another's)
    plus ``max_restarts``. With ``max_restarts`` 0 a ``FailJobSet`` rule on the head keeps the
    head's failure from drawing on the slices' budget (with none, the default action would
    restart the whole JobSet while the budget lasts, ``failure_policy.go`` L45).
    """
    fp: dict[str, Any] = {"maxRestarts": max_restarts, "restartStrategy": "Recreate"}
    if slice_restart == "job":
        rules = [{"name": "headFails", "action": "FailJobSet",
                  "targetReplicatedJobs": [head_job]}] if max_restarts == 0 else []
        rules.append({"name": "sliceRestart", "action": "RestartJob",
                      "targetReplicatedJobs": [worker_job]})
        fp.update(maxRestarts=max_restarts + slice_restarts * num_slices, rules=rules)
    return fp


def worker_backoff_limit(hosts: int, elastic_slices: int, slice_restarts: int) -> int:
    """The worker Job's ``backoffLimit``: ``slice_restarts x hosts`` for an elastic workload with
    a restart budget, else ``4 x hosts``. Times hosts because on TPU one host's death fails every
    pod of its slice (the other hosts' TPU runtime errors out): one slice restart costs ``hosts``
    pod failures of the Job (the local supervisor plays it the same way).

    This is pathways-job's rule (L692, L712-715: replaced only when ``ElasticSlices > 0 &&
    MaxSliceRestarts > 0``). xpk agrees except that it gives 0 for elastic with 0 restarts, which
    fails the JobSet on the first pod loss, Pathways' suspend-resume included.
    """
    if elastic_slices > 0 and slice_restarts > 0:
        return slice_restarts * hosts
    return SUSPEND_RESUME_BACKOFF_PER_HOST * hosts
