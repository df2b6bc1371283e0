"""GKE cluster provisioning: validate, plan, create (cluster, CPU pool, one TPU pool per slice),
describe and delete, through ``google-cloud-container``'s REST transport.

Flow: :func:`validate` turns flags into a :class:`ClusterConfig` (every problem reported at once,
before any request); :func:`plan_create` turns it into the exact requests; ``--dry-run`` prints
them and :func:`create` sends them, following each long-running operation to the end. Creation
is resumable: an existing cluster or node pool is kept, only what is missing is created.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from typing import Any

from elastix.clients import gke
from elastix.errors import BackendError, ProblemsError, UsageError
from elastix.provision import capacity as cap
from elastix.workload import platform

CPU_POOL = platform.HEAD_POOL  # the pool the workload's head nodeSelector names: one constant
MULTI_HOST_MAX_PODS = 15
"""Max pods per node on multi-host TPU pools: xpk ``src/xpk/core/nodepool.py`` L359-367
@ 367c838 (``--max-pods-per-node 15`` when vms_per_slice > 1)."""
RELEASE_CHANNELS = ("RAPID", "REGULAR", "STABLE")
_PROJECT_RE = re.compile(r"^(?:[a-z][a-z0-9.-]*[a-z0-9]:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$")
_ZONE_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
_REGION_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
_NAME_RE = re.compile(r"^[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?$")
_MACHINE_RE = re.compile(r"^[a-z][a-z0-9]*-[a-z0-9-]+$")

Progress = Callable[[str], None]


class ClusterOptionsError(ProblemsError):
    """Every problem with the ``cluster`` command's options, reported at once."""

    subject = "with the cluster options"


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """A validated cluster request."""

    project: str
    zone: str
    name: str
    tpu: Any = None  # elastix.workload.tpu.TpuType; None for describe/delete
    num_slices: int = 1
    cpu_machine_type: str = platform.HEAD_MACHINE
    cpu_nodes: int = 1
    capacity: cap.Capacity = cap.Capacity()  # of the TPU pools (the head pool is on-demand)
    release_channel: str = "RAPID"
    cpu_max_nodes: int = platform.HEAD_POOL_AUTOSCALING[1]  # == cpu_nodes: a fixed-size pool
    maintenance_exclusion: bool = False  # opt-in: no Pathways source sends one (docs/gke.md)
    workload_identity: bool = False  # opt-in, as xpk's --enable-workload-identity

    @property
    def spot(self) -> bool:
        return self.capacity.kind == cap.SPOT

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.zone}"

    @property
    def cluster_path(self) -> str:
        return f"{self.parent}/clusters/{self.name}"

    def pool_names(self) -> list[str]:
        """TPU node pool names, one per slice."""
        return [f"tpu-slice-{i}" for i in range(self.num_slices)]


def validate(project: str | None, zone: str | None, name: str, *, tpu_type: str | None = None,
             num_slices: int = 1, cpu_machine_type: str = platform.HEAD_MACHINE,
             cpu_nodes: int = 1, spot: bool = False, release_channel: str = "RAPID",
             cpu_max_nodes: int | None = None, check_cpu_machine: bool = True,
             maintenance_exclusion: bool = False,
             workload_identity: bool = False, on_demand: bool = False,
             reservation: str | None = None, flex: bool = False) -> ClusterConfig:
    """Check every option; raise :class:`ClusterOptionsError` listing all problems.

    ``tpu_type`` None skips the TPU checks (describe, delete). ``cpu_max_nodes`` None is xpk's
    autoscaling maximum (20), never below ``cpu_nodes``. ``check_cpu_machine`` False skips the
    head-pod fit check (for machine types elastix does not know the size of).
    ``maintenance_exclusion`` adds an upgrade exclusion to the TPU pools (see ``_tpu_pool_pb``);
    ``workload_identity`` enables Workload Identity (see ``_node_config``). ``on_demand``,
    ``reservation``, ``spot`` and ``flex`` pick the TPU pools' capacity, at most one
    (:func:`capacity.choose`; none is on-demand).
    """
    from elastix.workload import tpu as tpu_catalogue
    problems: list[tuple[str, str, str | None]] = []
    if not project:
        problems.append(("--project", "a Google Cloud project is required",
                         "pass --project ID or set GOOGLE_CLOUD_PROJECT"))
    elif not _PROJECT_RE.match(project):
        problems.append(("--project", f"{project!r} is not a Google Cloud project id",
                         "6-30 lowercase letters, digits or hyphens, starting with a letter"))
    if not zone:
        problems.append(("--zone", "a zone is required", "e.g. --zone us-central1-a"))
    elif not _ZONE_RE.match(zone):
        hint = "a zone looks like us-central1-a"
        if zone and _REGION_RE.match(zone):
            hint = f"{zone} is a region; a TPU slice lives in one zone, e.g. {zone}-a"
        problems.append(("--zone", f"{zone!r} is not a zone", hint))
    if not _NAME_RE.match(name or ""):
        problems.append(("name", f"{name!r} is not a valid GKE cluster name",
                         "1-40 lowercase letters, digits or hyphens; start with a letter, end "
                         "with a letter or digit"))
    tpu = None
    if tpu_type is not None:
        try:
            tpu = tpu_catalogue.lookup(tpu_type)
        except UsageError as err:
            problems.append(("--tpu-type", err.message, err.hint))
        if not 1 <= num_slices <= 64:
            problems.append(("--num-slices", f"{num_slices} is out of range", "1 to 64"))
    if not _MACHINE_RE.match(cpu_machine_type):
        problems.append(("--cpu-machine-type", f"{cpu_machine_type!r} is not a machine type",
                         f"e.g. {platform.HEAD_MACHINE}"))
    elif tpu_type is not None and check_cpu_machine:
        problems.extend(_head_fit_problems(cpu_machine_type))
    if cpu_nodes < 1:
        problems.append(("--cpu-nodes", f"{cpu_nodes} is out of range",
                         "at least 1 (the Pathways head runs there)"))
    if cpu_max_nodes is None:
        cpu_max_nodes = max(cpu_nodes, platform.HEAD_POOL_AUTOSCALING[1])
    elif cpu_max_nodes < cpu_nodes:
        problems.append(("--cpu-max-nodes", f"{cpu_max_nodes} is below --cpu-nodes {cpu_nodes}",
                         f"use --cpu-max-nodes {cpu_nodes} for a fixed-size pool"))
    if release_channel.upper() not in RELEASE_CHANNELS:
        problems.append(("--release-channel", f"unknown channel {release_channel!r}",
                         "RAPID, REGULAR or STABLE"))
    capacity, capacity_problems = cap.choose(project, on_demand=on_demand,
                                             reservation=reservation, spot=spot, flex=flex)
    problems.extend(capacity_problems)
    if capacity.kind == cap.FLEX and tpu is not None:
        problems.extend(cap.flex_problems(tpu.generation))
    if problems:
        raise ClusterOptionsError(problems)
    return ClusterConfig(project, zone, name, tpu, num_slices, cpu_machine_type, cpu_nodes,
                         capacity, release_channel.upper(), cpu_max_nodes, maintenance_exclusion,
                         workload_identity)


def head_pod_requests() -> platform.Resources:
    """What the scheduler reserves for the head pod ``workload create`` renders by default.

    Rendered, not recomputed, so a change of the template or of the spec's defaults moves the
    check with it: ``pod_requests`` adds the native sidecars (proxy, RM) to the trainer.
    """
    from elastix.workload import labels, render, spec

    ws = spec.build_spec({}, {"name": "probe", "tpu_type": "v5litepod-16", "command": "true",
                              "docker_image": "image"})
    (head,) = [r for r in render.render(ws)["spec"]["replicatedJobs"]
               if r["name"] == labels.HEAD_JOB]
    return platform.pod_requests(head["template"]["spec"]["template"]["spec"])


def _head_fit_problems(machine_type: str) -> list[tuple[str, str, str | None]]:
    """The head pool's machine against the default head pod, as xpk checks (``guestCpus >= 49
    AND memoryMb >= 233 GiB``, ``src/xpk/core/pathways.py`` L166-186 @ 367c838), but computed
    from the rendered pod and GKE's node reservations (``platform.allocatable``)."""
    need = head_pod_requests()
    capacity = platform.machine_capacity(machine_type)
    if capacity is None:
        return [("--cpu-machine-type", f"elastix does not know the size of {machine_type!r}, so "
                 f"it cannot check that it holds the head pod ({need.describe()})",
                 f"pick one with room for it (e.g. {platform.HEAD_MACHINE}) and add "
                 "--skip-cpu-machine-check")]
    room = platform.allocatable(capacity)
    if need.fits_in(room):
        return []
    return [("--cpu-machine-type", f"{machine_type} leaves {room.describe()} to pods; the "
             f"Pathways head pod requests {need.describe()}",
             f"use {platform.HEAD_MACHINE} or larger (xpk and GKE's porting guide recommend it)")]


@dataclasses.dataclass(frozen=True)
class Step:
    """One mutating request of a plan (followed by polling its operation to DONE)."""

    action: str  # "create_cluster" | "create_node_pool" | "delete_cluster"
    method: str
    path: str  # REST path under https://container.googleapis.com
    body: dict | None
    message: Any = None  # the proto message sent (Cluster / NodePool)

    def describe(self) -> str:
        return f"{self.method} /v1/{self.path}"


def _node_config(cfg: ClusterConfig, **fields: Any) -> Any:
    """A ``NodeConfig`` with the scopes Pathways pods need (``platform.NODE_SCOPES``).

    Every Pathways pod is ``hostNetwork``, and GKE documents that such pods do not use Workload
    Identity: they act as the node's service account, limited by the node's OAuth scopes. So
    Cloud Storage access (scratch, checkpoints, events) comes from these scopes and the node
    service account's IAM roles on the buckets, and Workload Identity is only sent when asked
    (``--enable-workload-identity``, as xpk: its ``cluster create`` enables it only with that
    flag, src/xpk/parser/cluster.py L770 @ 367c838): then GKE_METADATA serves other,
    non-host-network pods their Kubernetes service account.
    """
    from google.cloud import container_v1

    config = container_v1.NodeConfig(**fields, oauth_scopes=list(platform.NODE_SCOPES))
    if cfg.workload_identity:
        config.workload_metadata_config = container_v1.WorkloadMetadataConfig(
            mode=container_v1.WorkloadMetadataConfig.Mode.GKE_METADATA)
    return config


def _cluster_pb(cfg: ClusterConfig) -> Any:
    from google.cloud import container_v1

    cluster = container_v1.Cluster(
        name=cfg.name,
        release_channel=container_v1.ReleaseChannel(
            channel=container_v1.ReleaseChannel.Channel[cfg.release_channel]),
        # VPC-native: a per-pool max-pods limit (the TPU pools') needs it. GKE docs, "Configure
        # maximum Pods per node" (not re-read for this change: no stored copy was found).
        ip_allocation_policy=container_v1.IPAllocationPolicy(use_ip_aliases=True),
        node_pools=[_head_pool_pb(cfg)],
    )
    if cfg.workload_identity:  # for pods off the host network only (see _node_config)
        cluster.workload_identity_config = container_v1.WorkloadIdentityConfig(
            workload_pool=f"{cfg.project.split(':')[-1]}.svc.id.goog")
    return cluster


def _head_pool_pb(cfg: ClusterConfig) -> Any:
    """The CPU pool of the Pathways head: named and sized from the platform catalogue."""
    from google.cloud import container_v1

    pool = container_v1.NodePool(name=CPU_POOL, initial_node_count=cfg.cpu_nodes,
                                 config=_node_config(cfg, machine_type=cfg.cpu_machine_type))
    if cfg.cpu_max_nodes > cfg.cpu_nodes:  # xpk autoscales its cpu-np pool 1..20
        pool.autoscaling = container_v1.NodePoolAutoscaling(
            enabled=True, min_node_count=cfg.cpu_nodes, max_node_count=cfg.cpu_max_nodes)
    return pool


def _tpu_pool_pb(cfg: ClusterConfig, name: str) -> Any:
    from google.cloud import container_v1

    tpu = cfg.tpu
    pool = container_v1.NodePool(
        name=name,
        initial_node_count=tpu.hosts,
        # gVNIC on TPU pools: xpk nodepool.py L340 (--enable-gvnic).
        config=_node_config(cfg, machine_type=tpu.machine_type,
                            gvnic=container_v1.VirtualNIC(enabled=True)),
        # Release channels require auto-upgrade; auto-repair replaces broken TPU hosts.
        management=container_v1.NodeManagement(auto_repair=True, auto_upgrade=True),
    )
    if cfg.maintenance_exclusion:
        # Opt-in (--maintenance-exclusion). An upgrade recreates every host of a slice, which a
        # run sees as a slice loss; this excludes upgrades until the pool version's end of
        # support (container v1 API, NodePool.NodePoolMaintenancePolicy
        # .exclusionUntilEndOfSupport). Off by default: no Pathways source sends it (xpk's TPU
        # node-pool path has none, src/xpk/core/nodepool.py @ 367c838; pathways-job creates no
        # pools) and GKE may refuse it on a channel or version it does not allow it for, which
        # would abort cluster create at the first TPU pool.
        pool.maintenance_policy = container_v1.NodePool.NodePoolMaintenancePolicy(
            exclusion_until_end_of_support=container_v1.NodePool.ExclusionUntilEndOfSupport(
                enabled=True))
    if tpu.hosts > 1:  # xpk nodepool.py L358-367: multi-host only
        # One ICI topology: COMPACT placement with the slice's topology.
        pool.placement_policy = container_v1.NodePool.PlacementPolicy(
            type_=container_v1.NodePool.PlacementPolicy.Type.COMPACT, tpu_topology=tpu.topology)
        pool.max_pods_constraint = container_v1.MaxPodsConstraint(
            max_pods_per_node=MULTI_HOST_MAX_PODS)
    cap.apply(pool, cfg.capacity, tpu.hosts)  # spot / reservation / flex-start fields
    return pool


def _body(key: str, msg: Any) -> dict:
    """The REST JSON body of a request, as the API reference writes it (camelCase, enum names).

    The client's REST transport sends the same message with enums as numbers
    (``rest_numeric_enums``); the API accepts both, and names are what a reader can check.
    """
    from google.protobuf import json_format

    return {key: json_format.MessageToDict(type(msg).pb(msg))}


def plan_create(cfg: ClusterConfig, existing: Any = None) -> list[Step]:
    """The create requests, skipping what ``existing`` (a ``Cluster`` or None) already has."""
    steps = []
    have_pools = {p.name for p in existing.node_pools} if existing is not None else set()
    if existing is None:
        pb = _cluster_pb(cfg)
        steps.append(Step("create_cluster", "POST", f"{cfg.parent}/clusters",
                          _body("cluster", pb), pb))
    elif CPU_POOL not in have_pools:  # e.g. made before the head pool was named cpu-np
        pb = _head_pool_pb(cfg)
        steps.append(Step("create_node_pool", "POST", f"{cfg.cluster_path}/nodePools",
                          _body("nodePool", pb), pb))
    for name in cfg.pool_names():
        if name not in have_pools:
            pb = _tpu_pool_pb(cfg, name)
            steps.append(Step("create_node_pool", "POST", f"{cfg.cluster_path}/nodePools",
                              _body("nodePool", pb), pb))
    return steps


def plan_delete(cfg: ClusterConfig) -> list[Step]:
    """The delete request."""
    return [Step("delete_cluster", "DELETE", cfg.cluster_path, None)]


def wait_operation(client: Any, cfg: ClusterConfig, op: Any, what: str, progress: Progress,
                   interval: float = 5.0, sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.monotonic) -> Any:
    """Poll a long-running operation until DONE; raise if it ended with an error."""
    from google.cloud import container_v1

    start = clock()
    name = f"{cfg.parent}/operations/{op.name}"
    while op.status != container_v1.Operation.Status.DONE:
        progress(f"{what}: {op.status.name.lower()} ({clock() - start:.0f} s)")
        sleep(interval)
        op = gke.call(f"{what} (polling)", lambda: client.get_operation(name=name, timeout=60.0))
    error = op.error.message if op.error and op.error.message else op.status_message
    if error:
        raise BackendError(f"{what} failed: {error}",
                           hint="see the operation in the console, or `gcloud container "
                                f"operations describe {op.name} --zone {cfg.zone}`")
    progress(f"{what}: done ({clock() - start:.0f} s)")
    return op


def get_cluster(client: Any, cfg: ClusterConfig) -> Any | None:
    """The cluster, or None when it does not exist."""
    from google.api_core import exceptions

    try:
        return client.get_cluster(name=cfg.cluster_path, timeout=60.0)
    except exceptions.NotFound:
        return None
    except Exception as err:  # noqa: BLE001 - translated
        raise gke.translate(err, f"looking up cluster {cfg.name}") from err


def run(client: Any, cfg: ClusterConfig, steps: list[Step], progress: Progress,
        **poll: Any) -> None:
    """Send each step's request and follow its operation to the end."""
    for step in steps:
        if step.action == "create_cluster":
            what = f"creating cluster {cfg.name}"
            op = gke.call(what, lambda s=step: client.create_cluster(
                parent=cfg.parent, cluster=s.message, timeout=60.0))
        elif step.action == "create_node_pool":
            what = f"creating node pool {step.message.name}"
            op = gke.call(what, lambda s=step: client.create_node_pool(
                parent=cfg.cluster_path, node_pool=s.message, timeout=60.0))
        else:
            what = f"deleting cluster {cfg.name}"
            op = gke.call(what, lambda: client.delete_cluster(name=cfg.cluster_path, timeout=60.0))
        progress(f"{what}: started ({step.describe()})")
        wait_operation(client, cfg, op, what, progress, **poll)


def check_reservation(cfg: ClusterConfig, steps: list[Step],
                      read: Callable[[str], dict | None]) -> None:
    """Refuse (:class:`ClusterOptionsError`, exit 2) when ``--reservation`` cannot hold the TPU
    pools ``steps`` would create: missing, not READY, another machine type, or too few free
    VMs. Only the pools still to create count, as xpk counts them (``src/xpk/core/nodepool.py``
    L283-303): on a resumed create the existing pools are already the reservation's in-use VMs.

    Args:
        read: GETs a Compute Engine API path; None when it does not exist.
    """
    if cfg.capacity.kind != cap.RESERVATION:
        return
    new_pools = sum(1 for s in steps if s.action == "create_node_pool"
                    and s.message.name != CPU_POOL)
    if new_pools == 0:
        return
    found = read(cap.reservation_url(cfg.capacity, cfg.zone))
    problems = cap.reservation_problems(found, cfg.capacity, cfg.zone, cfg.tpu.machine_type,
                                        cfg.tpu.hosts, new_pools)
    if problems:
        raise ClusterOptionsError(problems)


def create(cfg: ClusterConfig, client: Any, progress: Progress, *,
           kube: Callable[[], tuple[Any, str]] | None = None,
           jobset_manifest: str | None = None,
           read_compute: Callable[[str], dict | None] | None = None, kueue: bool | None = False,
           kueue_manifest: str | None = None, **poll: Any) -> list[Step]:
    """Create what is missing (cluster, TPU pools), then install JobSet if it is missing, and
    Kueue with its queues (:mod:`elastix.provision.kueue_install`) when asked.

    With ``--reservation``, the reservation is read and checked first: nothing is created when
    it cannot hold the slices (:func:`check_reservation`).

    Args:
        kube: returns (ApiClient, label) for the cluster; None skips the JobSet and Kueue steps.
        jobset_manifest: file or https URL of the JobSet release manifest (default: pinned URL).
        read_compute: GETs a Compute Engine API path (default: ``clients.compute.get_json``).
        kueue: True installs Kueue and its queues; None does so only when Kueue is found
            installed (its queues then match these pools); False leaves Kueue alone.
        kueue_manifest: file or https URL of Kueue's release manifest (default: pinned URL).

    Returns:
        The steps that were sent.
    """
    from elastix.provision import jobset_install
    existing = get_cluster(client, cfg)
    if existing is not None:
        progress(f"cluster {cfg.name} exists; creating only the missing node pools")
    steps = plan_create(cfg, existing)
    if read_compute is None:
        from elastix.clients import compute
        read_compute = compute.get_json
    check_reservation(cfg, steps, read_compute)
    conn = None
    if kube is not None and existing is not None and kueue is not False:
        # A Kueue its queues cannot be written to refuses before a pool is made (a new
        # cluster has no Kueue yet: the pinned one is installed).
        from elastix.provision import kueue_install
        conn = kube()
        kueue_install.check_writable(*conn)
    run(client, cfg, steps, progress, **poll)
    if kube is not None:
        api, where = conn or kube()
        st = jobset_install.status(api, where)
        if st.installed:
            progress(f"JobSet {st.version} is already installed")
        else:
            docs = jobset_install.read_manifest(jobset_manifest)
            jobset_install.apply(api, where, jobset_install.plan(docs),
                     on_step=lambda s: progress(f"JobSet: applying {s.kind} {s.name}"))
            st = jobset_install.wait_ready(api, where)
            progress(f"JobSet {st.version} installed and ready")
        if kueue is not False:
            from elastix.provision import kueue_install
            if kueue or kueue_install.status(api, where).installed:
                kueue_install.install(api, where, cfg, progress, kueue_manifest)
    return steps


@dataclasses.dataclass(frozen=True)
class PoolInfo:
    """One node pool as ``cluster describe`` shows it."""

    name: str
    machine_type: str
    nodes: int
    topology: str
    tpu_chips: int
    status: str
    capacity: str = cap.ON_DEMAND  # spot, flex, or "reservation NAME" (capacity.describe)


def pools(cluster: Any, nodes: list[dict] | None = None) -> list[PoolInfo]:
    """Node pools with their TPU capacity (chips = nodes × chips per host of the machine type).

    ``nodes`` (the cluster's ``GET /api/v1/nodes``) counts each pool's nodes by GKE's node-pool
    label, which follows resizes, repairs and the autoscaler; None falls back to the pool's
    ``initial_node_count`` (per zone) or its autoscaling minimum.
    """
    counted: dict[str, int] = {}
    for n in nodes or []:
        name = ((n.get("metadata") or {}).get("labels") or {}).get(platform.NODEPOOL_LABEL)
        if name:
            counted[name] = counted.get(name, 0) + 1
    out = []
    for p in cluster.node_pools:
        machine = p.config.machine_type
        per_node = re.search(r"^ct\w+-\w+-(\d+)t$", machine)
        if nodes is not None:
            count = counted.get(p.name, 0)
        else:
            count = (p.initial_node_count * max(1, len(p.locations))
                     or (p.autoscaling.total_min_node_count or 0))
        topo = p.placement_policy.tpu_topology if p.placement_policy else ""
        out.append(PoolInfo(p.name, machine, count, topo,
                            count * int(per_node.group(1)) if per_node else 0, p.status.name,
                            cap.describe(p.config)))
    return out
