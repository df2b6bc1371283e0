"""Install Kueue on a cluster and give it the queues elastix workloads use.

As for JobSet (:mod:`elastix.provision.jobset_install`), the controller is Kueue's pinned release
manifest (``manifests.yaml`` of :data:`KUEUE_VERSION`), read from a file or downloaded from the
release, applied with server-side apply; elastix ships no copy. Then :func:`objects` gives Kueue
what xpk's ``cluster create`` gives it (xpk ``src/xpk/core/kueue_manager.py`` L333-421 and
``src/xpk/templates/kueue_config.yaml.j2`` @ 367c838): a ResourceFlavor for the TPU pools and
one for the CPU pool, a ClusterQueue with their quotas, a LocalQueue in the namespace, and the
five PriorityClasses ``--priority`` names.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from elastix.clients.kube import Http, Translator, api_path
from elastix.errors import BackendError, NotFoundError, UsageError
from elastix.provision import jobset_install
from elastix.provision.jobset_install import ApplyStep
from elastix.workload import platform

KUEUE_VERSION = "v0.19.2"
"""The newest Kueue release (kubernetes-sigs/kueue tag v0.19.2). xpk @ 367c838 pins v0.17.1
(``kueue_manager.py`` L45); 0.19 still serves ``v1beta1`` beside the stored ``v1beta2``
(``config/components/crd/bases/kueue.x-k8s.io_workloads.yaml`` @ v0.19.2)."""
RELEASE_URL = (f"https://github.com/kubernetes-sigs/kueue/releases/download/{KUEUE_VERSION}/"
               "manifests.yaml")
API_VERSION = "kueue.x-k8s.io/v1beta2"  # the storage version of every Kueue kind in 0.19
CRD_NAME = "workloads.kueue.x-k8s.io"
NAMESPACE = "kueue-system"
DEPLOYMENT = "kueue-controller-manager"
CRD_PATH = api_path("apiextensions.k8s.io/v1", "customresourcedefinitions", CRD_NAME)
# xpk's names (kueue_manager.py L48-49), so an xpk user's --queue multislice-queue works.
CLUSTER_QUEUE = "cluster-queue"
LOCAL_QUEUE = "multislice-queue"
CPU_FLAVOR = "cpu-user"  # xpk's Pathways CPU flavor (kueue_manager.py L390-405)
# xpk's priorities, plain PriorityClasses that the pods name (kueue_config.yaml.j2 L73-111):
# Kueue takes a Workload's priority from them when the job has no kueue.x-k8s.io/priority-class
# label (kueue pkg/controller/jobframework/reconciler.go L1716-1723 @ v0.19.2).
PRIORITIES = (("very-low", 100), ("low", 250), ("medium", 500), ("high", 750),
              ("very-high", 1000))
# xpk's quota of the CPU flavor when elastix does not know the machine's size (L401-402).
_CPU_FALLBACK = (480, "2000G")

# The kinds of Kueue's release manifest: JobSet's, plus the visibility API's registration
# and its API priority and fairness objects (config/components/visibility @ v0.19.2), applied
# before the webhooks.
_KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    k: v for k, v in jobset_install._KINDS.items() if "Webhook" not in k[1]}
_KINDS.update({
    ("apiregistration.k8s.io/v1", "APIService"): ("apiservices", False),
    ("flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration"):
        ("prioritylevelconfigurations", False),
    ("flowcontrol.apiserver.k8s.io/v1", "FlowSchema"): ("flowschemas", False),
})
_KINDS.update({k: v for k, v in jobset_install._KINDS.items() if "Webhook" in k[1]})
_OBJECT_KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("scheduling.k8s.io/v1", "PriorityClass"): ("priorityclasses", False),
    (API_VERSION, "ResourceFlavor"): ("resourceflavors", False),
    (API_VERSION, "ClusterQueue"): ("clusterqueues", False),
    (API_VERSION, "LocalQueue"): ("localqueues", True),
}


@dataclasses.dataclass(frozen=True)
class KueueStatus:
    """Whether Kueue is installed, and its controller's version (from the image tag)."""

    crd_installed: bool
    version: str | None
    ready_replicas: int

    @property
    def installed(self) -> bool:
        return self.crd_installed and self.version is not None


_HINT = f"pass Kueue's release manifest, e.g. {RELEASE_URL}, or a copy of it"


def read_manifest(source: str | None = None, timeout: float = 60.0) -> list[dict]:
    """Kueue's release manifest from a file or an https URL (default: the pinned release).

    Raises:
        UsageError: unreadable, not YAML, or not a Kueue release manifest.
        BackendError: the download failed.
    """
    source = source or RELEASE_URL
    docs = jobset_install.load_documents(source, "--kueue-manifest", "Kueue", RELEASE_URL,
                                         timeout)
    found = set()
    for d in docs:
        key = (d.get("apiVersion"), d.get("kind")) if isinstance(d, dict) else (None, None)
        meta = d.get("metadata") if isinstance(d, dict) else None
        if key not in _KINDS or not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise UsageError(f"{source}: unexpected object {key[1]} {key[0]} in a Kueue manifest",
                             hint=_HINT)
        found.add((d["kind"], meta["name"]))
    for need in (("CustomResourceDefinition", CRD_NAME), ("Deployment", DEPLOYMENT)):
        if need not in found:
            raise UsageError(f"{source} has no {need[0]} {need[1]}: not a Kueue release manifest",
                             hint=_HINT)
    return docs


def plan(docs: list[dict]) -> list[ApplyStep]:
    """The apply requests of the release manifest, in dependency order."""
    return jobset_install.plan(docs, _KINDS)


def objects(cfg: Any, namespace: str = "default") -> list[dict]:
    """The flavors, queues and priorities for the pools of ``cfg`` (a ClusterConfig).

    The TPU flavor selects the pools' nodes by the labels GKE puts on TPU nodes (the same
    ``nodeSelector`` the workers render); its quota is every chip of the pools (xpk
    ``kueue_manager.py`` L371-376: ``total_chips``). The CPU flavor selects the head pool by
    name, with its quota the pool's autoscaling maximum × the machine's size. They are two
    resource groups, as xpk's Pathways set-up (L390-405): Kueue lets a resource be in one group
    only, and the workers request only ``google.com/tpu``.
    """
    tpu = cfg.tpu
    tpu_flavor = f"{cfg.num_slices}x{tpu.name}"  # xpk's name for the flavor (L349)
    capacity = platform.machine_capacity(cfg.cpu_machine_type)
    if capacity is None:
        cpu, memory = _CPU_FALLBACK
    else:
        cpu = int(capacity.cpu) * cfg.cpu_max_nodes
        memory = f"{int(capacity.memory // 2**30) * cfg.cpu_max_nodes}Gi"
    out: list[dict] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": name}, "value": value, "globalDefault": False,
         "description": f"elastix --priority {name} (xpk's)"} for name, value in PRIORITIES]
    out += [
        {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": tpu_flavor},
         "spec": {"nodeLabels": {"cloud.google.com/gke-tpu-accelerator": tpu.accelerator,
                                 "cloud.google.com/gke-tpu-topology": tpu.topology}}},
        {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": CPU_FLAVOR},
         "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": platform.HEAD_POOL}}},
        {"apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE},
         "spec": {
             "namespaceSelector": {},
             # xpk's: preempt lower priorities, never across a cohort (template L53-55)
             "preemption": {"reclaimWithinCohort": "Never",
                            "withinClusterQueue": "LowerPriority"},
             "resourceGroups": [
                 {"coveredResources": [platform.TPU_RESOURCE],
                  "flavors": [{"name": tpu_flavor, "resources": [
                      {"name": platform.TPU_RESOURCE,
                       "nominalQuota": tpu.chips * cfg.num_slices}]}]},
                 {"coveredResources": ["cpu", "memory"],
                  "flavors": [{"name": CPU_FLAVOR, "resources": [
                      {"name": "cpu", "nominalQuota": cpu},
                      {"name": "memory", "nominalQuota": memory}]}]},
             ]}},
        {"apiVersion": API_VERSION, "kind": "LocalQueue",
         "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
         "spec": {"clusterQueue": CLUSTER_QUEUE}},
    ]
    return out


def object_steps(cfg: Any, namespace: str = "default") -> list[ApplyStep]:
    """The apply requests of :func:`objects`."""
    return jobset_install.plan(objects(cfg, namespace), _OBJECT_KINDS)


def dry_run_lines(cfg: Any, source: str | None = None) -> list[str]:
    """Every request ``cluster create --kueue`` makes for Kueue, one line each."""
    import json

    lines = [f"GET {CRD_PATH} (install Kueue {KUEUE_VERSION} only if missing)",
             *jobset_install.release_lines(source or RELEASE_URL,
                                           lambda src: plan(read_manifest(src)))]
    lines.append(f"GET {api_path('apps/v1', 'deployments', DEPLOYMENT, NAMESPACE)} "
                 "(until a replica is available)")
    for step in object_steps(cfg):
        lines.append(step.describe())
        lines.append(json.dumps(step.body, indent=2))
    return lines


def status(api: Any, where: str) -> KueueStatus:
    """Whether the Kueue CRDs and controller are installed, and the controller's version."""
    http, tr = Http(api), Translator(where)

    def get(path: str) -> dict | None:
        try:
            with tr("reading the Kueue installation"):
                return http.request("GET", path)
        except NotFoundError:
            return None

    crd = get(CRD_PATH)
    dep = get(api_path("apps/v1", "deployments", DEPLOYMENT, NAMESPACE))
    ready = int((dep or {}).get("status", {}).get("availableReplicas") or 0)
    return KueueStatus(crd is not None, jobset_install._image_version(dep) if dep else None,
                       ready)


def wait_ready(api: Any, where: str, timeout: float = 600.0, interval: float = 2.0,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> KueueStatus:
    """Wait until the controller has an available replica (its webhooks admit the queues).

    Raises:
        BackendError: not ready within ``timeout`` seconds (xpk waits 10 min, L47, L269-271).
    """
    deadline = clock() + timeout
    while True:
        st = status(api, where)
        if st.installed and st.ready_replicas > 0:
            return st
        if clock() >= deadline:
            raise BackendError(
                f"the Kueue controller is not ready after {timeout:.0f} s ({where})",
                hint=f"look at its pods: kubectl -n {NAMESPACE} get pods")
        sleep(interval)


def install(api: Any, where: str, cfg: Any, progress: Callable[[str], None],
            manifest: str | None = None, **poll: Any) -> KueueStatus:
    """Install Kueue when it is missing (kept when present), then apply :func:`objects`."""
    st = status(api, where)
    if st.installed:
        progress(f"Kueue {st.version} is already installed")
    else:
        jobset_install.apply(api, where, plan(read_manifest(manifest)),
                             on_step=lambda s: progress(f"Kueue: applying {s.kind} {s.name}"))
    st = wait_ready(api, where, **poll)
    jobset_install.apply(api, where, object_steps(cfg),
                         on_step=lambda s: progress(f"Kueue: applying {s.kind} {s.name}"))
    progress(f"Kueue {st.version} ready: ClusterQueue {CLUSTER_QUEUE}, LocalQueue "
             f"{LOCAL_QUEUE}")
    return st
