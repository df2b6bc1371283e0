"""Install Kueue on a cluster and give it the queues elastix workloads use.

As for JobSet (:mod:`elastix.provision.jobset_install`), the controller is Kueue's pinned release
manifest (``manifests.yaml`` of :data:`KUEUE_VERSION`), read from a file or downloaded from the
release, applied with server-side apply; elastix ships no copy. Then :func:`objects` gives Kueue
what xpk's ``cluster create`` gives it (xpk ``src/xpk/core/kueue_manager.py`` L333-421 and
``src/xpk/templates/kueue_config.yaml.j2`` @ 367c838): a ResourceFlavor for the TPU pools and
one for the CPU pool, a ClusterQueue with their quotas, a LocalQueue in the namespace, and the
five PriorityClasses ``--priority`` names.

Two departures from the release as published, both for elastic runs:

- **WaitForPodsReady.** From v0.19.0 Kueue evicts a Workload whose pods are not all ready for
  30 minutes (:mod:`elastix.clients.kueue`), and a JobSet missing one slice is not ready: a run
  that loses a slice for half an hour would lose all of them. :func:`configure` writes
  ``waitForPodsReady`` into the manifest's ConfigMap before it is applied, in the meaning of
  the manifest's own release (:func:`pods_ready_block`: ``recoveryTimeout: 0s`` is "off" only
  from v0.16.0, and ``blockAdmission`` is set false explicitly), so the controller
  starts with it (the file is mounted with ``subPath`` and read once at start-up,
  ``config/default/manager_config_patch.yaml`` L11-21, ``pkg/config/config.go`` L219-235 @
  v0.19.2: a later edit would need a restart). A Kueue found installed keeps its settings.
- **API version.** The objects are written in the newest version the installed Kueue serves:
  ``v1beta2`` from v0.15.0, ``v1beta1`` before (xpk <= 1.0 installs v0.14.3). The fields elastix
  sets have the same names and shapes in both (``config/components/crd/bases/
  kueue.x-k8s.io_{resourceflavors,clusterqueues,localqueues}.yaml``: v1beta1 @ v0.14.3, v1beta2
  @ v0.19.2; checked by ``tests/provision/test_kueue_versions.py``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import yaml

from elastix.clients import kueue as kq
from elastix.clients.kube import Http, Translator, api_path
from elastix.errors import NotFoundError, UsageError
from elastix.provision import jobset_install
from elastix.provision.jobset_install import ApplyStep
from elastix.workload import platform

KUEUE_VERSION = "v0.19.2"
"""The newest Kueue release (kubernetes-sigs/kueue tag v0.19.2). xpk @ 367c838 pins v0.17.1
(``kueue_manager.py`` L45); 0.19 still serves ``v1beta1`` beside the stored ``v1beta2``
(``config/components/crd/bases/kueue.x-k8s.io_workloads.yaml`` @ v0.19.2)."""
RELEASE_URL = (f"https://github.com/kubernetes-sigs/kueue/releases/download/{KUEUE_VERSION}/"
               "manifests.yaml")
API_VERSION = f"{kq.GROUP}/{kq.VERSIONS[0]}"  # the storage version of every Kueue kind in 0.19
CRD_NAME = "workloads.kueue.x-k8s.io"
NAMESPACE = "kueue-system"
DEPLOYMENT = "kueue-controller-manager"
CRD_PATH = api_path("apiextensions.k8s.io/v1", "customresourcedefinitions", CRD_NAME)
# xpk's names (kueue_manager.py L48-49), so an xpk user's --queue multislice-queue works.
CLUSTER_QUEUE = "cluster-queue"
LOCAL_QUEUE = kq.DEFAULT_LOCAL_QUEUE
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
    ("scheduling.k8s.io/v1", "PriorityClass"): ("priorityclasses", False)}
for _v in kq.VERSIONS:
    _OBJECT_KINDS.update({(f"{kq.GROUP}/{_v}", "ResourceFlavor"): ("resourceflavors", False),
                          (f"{kq.GROUP}/{_v}", "ClusterQueue"): ("clusterqueues", False),
                          (f"{kq.GROUP}/{_v}", "LocalQueue"): ("localqueues", True)})


@dataclasses.dataclass(frozen=True)
class KueueStatus:
    """Whether Kueue is installed, and its controller's version (from the image tag)."""

    crd_installed: bool
    version: str | None
    ready_replicas: int
    served: tuple[str, ...] = ()  # Kueue API versions its CRD serves, of kq.VERSIONS, newest first

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
            raise UsageError(f"{source}: {jobset_install.object_words(key, 'Kueue')}",
                             hint=_HINT)
        found.add((d["kind"], meta["name"]))
    for need in (("CustomResourceDefinition", CRD_NAME), ("Deployment", DEPLOYMENT),
                 ("ConfigMap", kq.CONFIG_MAP)):
        if need not in found:
            raise UsageError(f"{source} has no {need[0]} {need[1]}: not a Kueue release manifest",
                             hint=_HINT)
    return docs


def plan(docs: list[dict]) -> list[ApplyStep]:
    """The apply requests of the release manifest with :func:`configure`'s settings, in
    dependency order."""
    return jobset_install.plan(configure(docs), _KINDS)


def release_version(docs: list[dict]) -> str | None:
    """The release a manifest installs: its controller Deployment's image tag (None when the
    image has none, e.g. a digest)."""
    for d in docs:
        if d.get("kind") == "Deployment" and d["metadata"]["name"] == DEPLOYMENT:
            tag = jobset_install._image_version(d)
            return None if tag in (None, "unknown") else tag
    return None


def pods_ready_block(cfg: dict, version: str | None) -> dict:
    """The ``waitForPodsReady`` block elastix writes into Kueue ``version``'s config ``cfg``
    (its other keys kept), so that a run missing a slice stays admitted and blocks no one.

    - ``timeout``: :data:`~elastix.clients.kueue.ELASTIX_TIMEOUT` (a year).
    - ``recoveryTimeout``: what means "never" in that release. From v0.16.0, ``0s``: a zero one
      is dropped (kueue ``pkg/controller/core/core.go`` L113 @ v0.16.0, "allow 0 to disable",
      #8493), and an unset one would default to the timeout (``defaults.go``). Before v0.16 a
      set one is used as it is, so ``0s`` evicts a run the moment it misses a slice
      (``core.go`` L110-112 @ v0.15.8), and only an unset one is off: it is removed. A release
      of unknown version gets it unset too: off before v0.16, the year-long timeout after.
    - ``blockAdmission: false``: while it is true Kueue admits no workload as long as an
      admitted one is not all ready (``pkg/scheduler/scheduler.go`` L335-342 @ v0.15.8,
      L570-601 @ v0.19.2), and a ``config.kueue.x-k8s.io/v1beta1`` file defaults it to true
      (``apis/config/v1beta1/defaults.go`` L98 @ v0.15.8, L101 @ v0.19.2; v1beta2 defaults it to
      false, ``apis/config/v1beta2/defaults.go`` L95 @ v0.15.8): one elastic run on fewer slices
      would block every admission.
    - ``enable: true`` in a v1beta1 file (off by default there).
    """
    block = dict(cfg.get("waitForPodsReady") or {})
    if str(cfg.get("apiVersion", "")).endswith("/v1beta1"):
        block["enable"] = True
    block["timeout"] = kq.ELASTIX_TIMEOUT
    if kq.zero_recovery_disables(version):
        block["recoveryTimeout"] = kq.ELASTIX_RECOVERY
    else:
        block.pop("recoveryTimeout", None)
    block["blockAdmission"] = False
    return block


def configure(docs: list[dict]) -> list[dict]:
    """The release manifest with :func:`pods_ready_block` written into its ConfigMap's
    ``waitForPodsReady`` (the requeuing strategy keeps its defaults). The file is parsed and
    written back, so its comments go; its settings stay.

    Raises:
        UsageError: the ConfigMap's file is not a YAML mapping.
    """
    version = release_version(docs)
    out = []
    for d in docs:
        if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == kq.CONFIG_MAP:
            try:
                cfg = yaml.safe_load((d.get("data") or {}).get(kq.CONFIG_KEY) or "") or {}
            except yaml.YAMLError:
                cfg = None
            if not isinstance(cfg, dict):
                raise UsageError(f"the Kueue manifest's ConfigMap {kq.CONFIG_MAP} has no YAML "
                                 f"mapping in {kq.CONFIG_KEY}", hint=_HINT)
            cfg["waitForPodsReady"] = pods_ready_block(cfg, version)
            d = {**d, "data": {**d.get("data", {}),
                               kq.CONFIG_KEY: yaml.safe_dump(cfg, sort_keys=False)}}
        out.append(d)
    return out


def settings_line(version: str | None) -> str:
    """What :func:`pods_ready_block` sets for Kueue ``version``, one phrase."""
    rec = (f"recoveryTimeout {kq.ELASTIX_RECOVERY} (off)" if kq.zero_recovery_disables(version)
           else f"recoveryTimeout unset (off in Kueue {version or 'of unknown version'}, where "
                "0s would evict at once)")
    return f"waitForPodsReady timeout {kq.ELASTIX_TIMEOUT}, {rec}, blockAdmission false"


def objects(cfg: Any, namespace: str = "default", api_version: str = API_VERSION) -> list[dict]:
    """The flavors, queues and priorities for the pools of ``cfg`` (a ClusterConfig), the
    Kueue ones as ``api_version`` (``kueue.x-k8s.io/v1beta2`` or ``v1beta1``: same shape).

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
        {"apiVersion": api_version, "kind": "ResourceFlavor", "metadata": {"name": tpu_flavor},
         "spec": {"nodeLabels": {"cloud.google.com/gke-tpu-accelerator": tpu.accelerator,
                                 "cloud.google.com/gke-tpu-topology": tpu.topology}}},
        {"apiVersion": api_version, "kind": "ResourceFlavor", "metadata": {"name": CPU_FLAVOR},
         "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": platform.HEAD_POOL}}},
        {"apiVersion": api_version, "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE},
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
        {"apiVersion": api_version, "kind": "LocalQueue",
         "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
         "spec": {"clusterQueue": CLUSTER_QUEUE}},
    ]
    return out


def object_steps(cfg: Any, namespace: str = "default",
                 api_version: str = API_VERSION) -> list[ApplyStep]:
    """The apply requests of :func:`objects`."""
    return jobset_install.plan(objects(cfg, namespace, api_version), _OBJECT_KINDS)


def dry_run_lines(cfg: Any, source: str | None = None) -> list[str]:
    """Every request ``cluster create --kueue`` makes for Kueue, one line each."""
    import json

    version = [KUEUE_VERSION if source is None or source == RELEASE_URL else None]

    def plan_file(src: str) -> list[ApplyStep]:
        docs = read_manifest(src)
        version[0] = release_version(docs)
        return plan(docs)

    lines = [f"GET {CRD_PATH} (install Kueue {KUEUE_VERSION} only if missing; its served "
             "versions pick the objects' apiVersion)",
             *jobset_install.release_lines(source or RELEASE_URL, plan_file)]
    lines.append(f"(ConfigMap {NAMESPACE}/{kq.CONFIG_MAP} applied with "
                 f"{settings_line(version[0])}: docs/gke.md)")
    lines.append(f"GET {api_path('apps/v1', 'deployments', DEPLOYMENT, NAMESPACE)} "
                 "(until a replica is available)")
    for step in object_steps(cfg):
        lines.append(step.describe())
        lines.append(json.dumps(step.body, indent=2))
    return lines


def status(api: Any, where: str) -> KueueStatus:
    """Whether the Kueue CRDs and controller are installed, the controller's version and the
    versions the CRD serves (its ``spec.versions[].served``)."""
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
    served = {v.get("name") for v in ((crd or {}).get("spec") or {}).get("versions") or []
              if v.get("served", True)}
    return KueueStatus(crd is not None, jobset_install._image_version(dep) if dep else None,
                       ready, tuple(v for v in kq.VERSIONS if v in served))


def check_writable(api: Any, where: str) -> KueueStatus:
    """Refuse (exit 2) a Kueue whose CRDs serve neither version elastix writes; run before
    ``cluster create`` makes anything, when the cluster exists.

    Raises:
        UsageError: installed, serving neither ``v1beta2`` nor ``v1beta1``.
    """
    st = status(api, where)
    if st.crd_installed and not st.served:
        raise UsageError(
            f"Kueue {st.version or '(version unknown)'} on this cluster serves neither "
            f"{kq.GROUP}/v1beta2 nor v1beta1, the versions elastix writes its queues in; "
            "nothing was created",
            hint=f"pass --no-kueue to leave Kueue alone, or upgrade it (elastix installs "
                 f"{KUEUE_VERSION})")
    return st


def wait_ready(api: Any, where: str, timeout: float = 600.0, interval: float = 2.0,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> KueueStatus:
    """Wait until the controller has an available replica (its webhooks admit the queues).

    Raises:
        BackendError: not ready within ``timeout`` seconds (xpk waits 10 min, L47, L269-271).
    """
    return jobset_install.wait_available(
        lambda: status(api, where), "the Kueue controller", where,
        f"look at its pods: kubectl -n {NAMESPACE} get pods", timeout, interval, clock, sleep)


def settings(api: Any, where: str) -> str:
    """WaitForPodsReady as the installed Kueue runs it, one phrase (``cluster describe``)."""
    found = kq.read(Http(api), Translator(where))
    pr = found.pods_ready()
    if pr is None:
        return (f"WaitForPodsReady not known: ConfigMap {NAMESPACE}/{kq.CONFIG_MAP} "
                f"{found.config_problem}")
    return pr.describe()


def install(api: Any, where: str, cfg: Any, progress: Callable[[str], None],
            manifest: str | None = None, **poll: Any) -> KueueStatus:
    """Install Kueue when it is missing (kept when present, with its settings), then apply
    :func:`objects` in the newest version it serves.

    Raises:
        UsageError: an installed Kueue serves no version elastix writes (:func:`check_writable`).
    """
    st = check_writable(api, where)
    if st.installed:
        progress(f"Kueue {st.version} is already installed; its settings are kept: "
                 + settings(api, where))
    else:
        docs = read_manifest(manifest)
        jobset_install.apply(api, where, plan(docs),
                             on_step=lambda s: progress(f"Kueue: applying {s.kind} {s.name}"))
        progress(f"Kueue: {settings_line(release_version(docs))} (a run missing a slice "
                 "stays admitted, and other workloads are admitted meanwhile)")
    st = wait_ready(api, where, **poll)
    version = f"{kq.GROUP}/{(st.served or kq.VERSIONS)[0]}"
    jobset_install.apply(api, where, object_steps(cfg, api_version=version),
                         on_step=lambda s: progress(f"Kueue: applying {s.kind} {s.name}"))
    progress(f"Kueue {st.version} ready: ClusterQueue {CLUSTER_QUEUE}, LocalQueue "
             f"{LOCAL_QUEUE} ({version})")
    return st
