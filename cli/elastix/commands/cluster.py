"""`elastix cluster` commands: create, describe and delete a GKE cluster for elastic training."""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Callable, Iterator
from typing import Any

import typer

from elastix.commands import xpk
from elastix.commands.options import one_name, replace_params
from elastix.workload import platform  # pure data: the defaults cluster create shows in --help

app = typer.Typer(no_args_is_help=True)

ProjectOpt = typer.Option(None, "--project", envvar="GOOGLE_CLOUD_PROJECT",
                          help="Google Cloud project id (default: gcloud's configured one).")
ZoneOpt = typer.Option(None, "--zone", "--location",
                       help="Zone, e.g. us-central1-a (default: gcloud's configured one).")
DryRunOpt = typer.Option(False, "--dry-run", help="Print every request; send none.")
# xpk names the cluster with --cluster NAME: either spelling is taken (one_name checks).
NameArg = typer.Argument(None, help="Cluster name (or --cluster NAME).", show_default=False)
ClusterOpt = typer.Option(None, "--cluster", help="The cluster NAME, as xpk spells it.",
                          show_default=False)


def _gcloud(project: str | None, zone: str | None) -> tuple[str | None, str | None]:
    """``--project`` and ``--zone``, defaulting to the active gcloud configuration's (its
    files are read; gcloud is not run)."""
    if project and zone:
        return project, zone
    from elastix.clients.gcloud_config import read_defaults

    found = read_defaults()
    return project or found.project, zone or found.zone


_CLUSTER_PARAMS = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=a, default=d)
                   for n, a, d in (("name", str | None, NameArg),
                                   ("cluster_name", str | None, ClusterOpt),
                                   ("project", str | None, ProjectOpt),
                                   ("zone", str | None, ZoneOpt))]


def _with_cluster(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a handler taking ``name, project, zone``: it gets NAME (or ``--cluster NAME``,
    given once), ``--project`` and ``--zone`` in front of its own options, the last two
    defaulting to gcloud's configuration (:func:`_gcloud`)."""
    own = [p for p in inspect.signature(fn, eval_str=True).parameters.values()
           if p.name not in ("name", "project", "zone")]

    def call(kwargs: dict[str, Any]) -> Any:
        name = one_name(kwargs.pop("name"), kwargs.pop("cluster_name"), flag="--cluster")
        project, zone = _gcloud(kwargs.pop("project"), kwargs.pop("zone"))
        return fn(name=name, project=project, zone=zone, **kwargs)

    return replace_params(fn, _CLUSTER_PARAMS + own, call)


def _console():
    from elastix.views.console import console

    return console(soft_wrap=True)


@contextlib.contextmanager
def _progress(out, title: str) -> Iterator[Callable[[str], None]]:
    """A progress callback for a long operation: each line is kept and shown by a spinner."""
    with out.status(title) as status:
        def progress(text: str) -> None:
            status.update(text)
            out.print(text, markup=False)

        yield progress


def _print_steps(out, cfg, steps) -> None:
    for step in steps:
        out.print(step.describe(), markup=False)
        if step.body is not None:
            out.print(json.dumps(step.body, indent=2), markup=False)
        out.print(f"GET /v1/{cfg.parent}/operations/<operation> (until DONE)", markup=False)


CpuMachineOpt = typer.Option(platform.HEAD_MACHINE, "--cpu-machine-type",
                             *xpk.aliases("cluster create", "--cpu-machine-type"),
                             help="Machine type of the Pathways head pool (checked against the "
                                  "head pod's requests).")
CpuMaxOpt = typer.Option(None, "--cpu-max-nodes", help="Autoscaling maximum of the head pool "
                         "[20]; equal to --cpu-nodes for a fixed size.")
SkipCpuCheckOpt = typer.Option(False, "--skip-cpu-machine-check",
                               help="Do not check that --cpu-machine-type holds the head pod "
                                    "(for machine types elastix does not know).")
ReservationOpt = typer.Option(None, "--reservation", metavar="NAME",
                              help="TPU VMs from this reservation (NAME, or projects/OWNER/"
                                   "reservations/NAME when shared); checked to hold the slices "
                                   "before anything is created.")
FlexOpt = typer.Option(False, "--flex", help="Flex-start TPU VMs (Dynamic Workload Scheduler): "
                       "each TPU pool autoscales from 0 to one slice. GKE runs a flex-start VM "
                       "for at most 7 days, then reclaims it; TPU v5e, v5p and v6e only (not v3 "
                       "or v4).")
MaintenanceOpt = typer.Option(
    False, "--maintenance-exclusion",
    help="Exclude upgrades of the TPU pools until their version's end of support (an upgrade "
         "recreates a slice's hosts). Off: no Pathways source sets it, and GKE may refuse it on "
         "some channels (docs/gke.md).")
WorkloadIdentityOpt = typer.Option(
    False, "--enable-workload-identity",
    help="Enable Workload Identity, for pods off the host network (Pathways pods are on it and "
         "use the nodes' service account either way).")
JobsetManifestOpt = typer.Option(None, "--jobset-manifest", help="JobSet release manifest: file "
                                 "or https URL (default: the pinned release).")
KueueOpt = typer.Option(
    None, "--kueue/--no-kueue",
    help="Install Kueue and its ClusterQueue, LocalQueue multislice-queue, flavors and "
         "priorities (as xpk does). Default: only when Kueue is found installed, to match its "
         "queues to these pools.")
KueueManifestOpt = typer.Option(None, "--kueue-manifest", help="Kueue release manifest: file or "
                                "https URL (default: the pinned release).")


@app.command("create", help="Create a GKE cluster: a CPU pool for the Pathways head and one TPU "
             "node pool per slice; install JobSet if missing, and Kueue with --kueue.")
@_with_cluster
def create(
    name: str,
    project: str | None,
    zone: str | None,
    tpu_type: str = typer.Option(..., "--tpu-type", help="TPU slice type, e.g. v5litepod-16."),
    num_slices: int = typer.Option(1, "--num-slices", help="TPU slices (one node pool each)."),
    cpu_machine_type: str = CpuMachineOpt,
    cpu_nodes: int = typer.Option(1, "--cpu-nodes", help="Nodes in the head pool (autoscaling "
                                  "minimum)."),
    cpu_max_nodes: int = CpuMaxOpt,
    skip_cpu_machine_check: bool = SkipCpuCheckOpt,
    on_demand: bool = typer.Option(False, "--on-demand", help="On-demand TPU VMs (the default "
                                   "when no capacity flag is given)."),
    reservation: str = ReservationOpt,
    spot: bool = typer.Option(False, "--spot", help="Spot TPU VMs."),
    flex: bool = FlexOpt,
    release_channel: str = typer.Option("RAPID", "--release-channel",
                                        help="RAPID, REGULAR or STABLE."),
    maintenance_exclusion: bool = MaintenanceOpt,
    workload_identity: bool = WorkloadIdentityOpt,
    jobset_manifest: str = JobsetManifestOpt,
    skip_jobset: bool = typer.Option(False, "--skip-jobset", help="Do not install JobSet."),
    kueue: bool = KueueOpt,
    kueue_manifest: str = KueueManifestOpt,
    dry_run: bool = DryRunOpt,
) -> None:
    from elastix.provision import cluster
    if skip_jobset and kueue:
        from elastix.errors import UsageError
        raise UsageError("--kueue and --skip-jobset: Kueue is installed with JobSet, on the "
                         "connection --skip-jobset turns off", hint="drop one of them")
    cfg = cluster.validate(project, zone, name, tpu_type=tpu_type, num_slices=num_slices,
                      cpu_machine_type=cpu_machine_type, cpu_nodes=cpu_nodes, spot=spot,
                      release_channel=release_channel, cpu_max_nodes=cpu_max_nodes,
                      check_cpu_machine=not skip_cpu_machine_check,
                      maintenance_exclusion=maintenance_exclusion,
                      workload_identity=workload_identity, on_demand=on_demand,
                      reservation=reservation, flex=flex)
    out = _console()
    if dry_run:
        _print_dry_run(out, cfg, skip_jobset, kueue, jobset_manifest, kueue_manifest)
        return
    from elastix.clients import gke
    client = gke.cluster_manager()
    kube = None if skip_jobset else (lambda: gke.api_client_for_cluster(cfg.project, cfg.zone,
                                                                        cfg.name))
    with _progress(out, f"creating {cfg.name}") as progress:
        cluster.create(cfg, client, progress, kube=kube, jobset_manifest=jobset_manifest,
                       kueue=kueue, kueue_manifest=kueue_manifest)
    out.print(f"cluster {cfg.name} is ready: {cfg.num_slices} × {cfg.tpu.name} "
              f"({cfg.tpu.chips * cfg.num_slices} chips)", markup=False)


def _print_dry_run(out: Any, cfg: Any, skip_jobset: bool, kueue: bool | None,
                   jobset_manifest: str | None, kueue_manifest: str | None) -> None:
    """``cluster create --dry-run``: the summary, then every request in order; none sent."""
    from elastix.provision import cluster, jobset_install, kueue_install

    out.print(_dry_run_summary(cfg, skip_jobset, kueue), markup=False)
    out.print(f"GET /v1/{cfg.cluster_path} (what exists is kept; requests below assume "
              "nothing does)", markup=False)
    if cfg.capacity.kind == "reservation":
        from elastix.provision import capacity
        out.print(f"GET /{capacity.reservation_url(cfg.capacity, cfg.zone)} (READY, "
                  f"{cfg.tpu.machine_type}, free VMs >= {cfg.num_slices} × {cfg.tpu.hosts}; "
                  "else nothing below is sent)", markup=False)
    _print_steps(out, cfg, cluster.plan_create(cfg))
    if skip_jobset:
        return
    for line in jobset_install.dry_run_lines(jobset_manifest):
        out.print(line, markup=False)
    if kueue is None:
        out.print(f"GET {kueue_install.CRD_PATH} (Kueue installed? then its queues are "
                  "applied as with --kueue)", markup=False)
    elif kueue:
        for line in kueue_install.dry_run_lines(cfg, kueue_manifest):
            out.print(line, markup=False)


def _dry_run_summary(cfg: Any, skip_jobset: bool, kueue: bool | None) -> str:
    """What ``cluster create --dry-run`` would make, in a few lines, before its requests."""
    from elastix.provision import jobset_install, kueue_install

    cpu = (f"{cfg.cpu_nodes} node" + ("" if cfg.cpu_nodes == 1 else "s")
           + (f", autoscaling to {cfg.cpu_max_nodes}" if cfg.cpu_max_nodes > cfg.cpu_nodes
              else ""))
    what = ["JobSet " + jobset_install.JOBSET_VERSION] if not skip_jobset else []
    if kueue:
        what.append(f"Kueue {kueue_install.KUEUE_VERSION} and its queues")
    elif kueue is None and not skip_jobset:
        what.append("Kueue's queues if Kueue is already installed")
    capacity = cfg.capacity.kind + (f" {cfg.capacity.reservation}"
                                    if cfg.capacity.reservation else "")
    return (f"cluster create {cfg.name} --dry-run (nothing is sent): in {cfg.project}/{cfg.zone}"
            f", release channel {cfg.release_channel}\n"
            f"  head pool cpu-np: {cfg.cpu_machine_type}, {cpu}\n"
            f"  {cfg.num_slices} TPU pool{'' if cfg.num_slices == 1 else 's'}, one a slice: "
            f"{cfg.tpu.name} ({cfg.tpu.hosts} x {cfg.tpu.machine_type}), {capacity}\n"
            + (f"  then installs {' and '.join(what)}\n" if what else "")
            + "the requests, in order:")


@app.command("describe", help="Node pools, TPU capacity and the installed JobSet and Kueue "
             "versions.")
@_with_cluster
def describe(
    name: str,
    project: str | None,
    zone: str | None,
    skip_jobset: bool = typer.Option(False, "--skip-jobset",
                                     help="Do not connect to the cluster (JobSet, and the node "
                                          "counts: then the pools' initial size)."),
) -> None:
    from rich.table import Table

    from elastix.clients import gke
    from elastix.errors import NotFoundError
    from elastix.provision import cluster

    cfg = cluster.validate(project, zone, name)
    client = gke.cluster_manager()
    found = cluster.get_cluster(client, cfg)
    if found is None:
        raise NotFoundError(f"no cluster {name!r} in {cfg.project}/{cfg.zone}",
                            hint="list them with: gcloud container clusters list")
    out = _console()
    out.print(f"cluster {found.name}: {found.status.name}, GKE "
              f"{found.current_master_version or '?'}, endpoint {found.endpoint or '-'}",
              markup=False)
    api = nodes = None
    if not skip_jobset:
        api, where = gke.api_client_for_cluster(cfg.project, cfg.zone, cfg.name)
        nodes = _nodes(api)
    table = Table("node pool", "machine type", "nodes", "TPU topology", "TPU chips", "capacity",
                  "status")
    pools = cluster.pools(found, nodes)
    for p in pools:
        table.add_row(p.name, p.machine_type, str(p.nodes), p.topology or "-",
                      str(p.tpu_chips) if p.tpu_chips else "-", p.capacity, p.status)
    out.print(table)
    out.print(f"TPU capacity: {sum(p.tpu_chips for p in pools)} chips in "
              f"{sum(1 for p in pools if p.tpu_chips)} TPU node pools", markup=False)
    out.print("nodes: " + ("as the cluster reports them" if nodes is not None else
                           "the pools' initial size (the cluster's Nodes were not read)"),
              markup=False)
    if api is not None:
        from elastix.provision import jobset_install
        st = jobset_install.status(api, where)
        out.print(f"JobSet: {'installed ' + st.version if st.installed else 'not installed'}"
                  + (f", {st.ready_replicas} controller replica(s) ready" if st.installed
                     else ""), markup=False)
        from elastix.provision import kueue_install
        kq = kueue_install.status(api, where)
        line = f"Kueue: {'installed ' + kq.version if kq.installed else 'not installed'}"
        if kq.installed:  # what it does to a run missing a slice (docs/gke.md, Queues: Kueue)
            line += (f", serves {', '.join(kq.served) or 'no version elastix writes'}; "
                     + kueue_install.settings(api, where))
        out.print(line, markup=False)


def _nodes(api) -> list[dict] | None:
    """The cluster's Nodes; None when they cannot be listed (no permission, or unreachable:
    the JobSet check that follows then says why in its own words)."""
    from elastix.clients.kube import DEFAULT_TIMEOUT, Http

    try:
        return Http(api).request("GET", "/api/v1/nodes",
                                 timeout=DEFAULT_TIMEOUT).get("items") or []
    except Exception:  # noqa: BLE001 - node counts fall back to the pools' size
        return None


def _confirm(question: str) -> bool:
    """``typer.confirm``, except that no answer at all (stdin at its end: a script, a CI job,
    ``</dev/null``) is bad usage with the ``--yes`` hint, not an interrupt (130)."""
    import sys

    from elastix.errors import UsageError

    try:
        return typer.confirm(question)
    except typer.Abort:
        if sys.stdin is None or not sys.stdin.isatty():
            typer.echo("")  # end the prompt's line
            raise UsageError("no answer to the confirmation: stdin is not a terminal",
                             hint="pass --yes to delete without being asked") from None
        raise  # Ctrl-C at the prompt: an interrupt


@app.command("delete", help="Delete a GKE cluster (asks for confirmation).")
@_with_cluster
def delete(
    name: str,
    project: str | None,
    zone: str | None,
    yes: bool = typer.Option(False, "--yes", "-y", *xpk.aliases("cluster delete", "--yes"),
                             help="Do not ask for confirmation."),
    dry_run: bool = DryRunOpt,
) -> None:
    from elastix.clients import gke
    from elastix.errors import ElastixError
    from elastix.provision import cluster
    cfg = cluster.validate(project, zone, name)
    out = _console()
    steps = cluster.plan_delete(cfg)
    if dry_run:
        _print_steps(out, cfg, steps)
        return
    if not yes and not _confirm(
            f"Delete cluster {cfg.name} in {cfg.project}/{cfg.zone} and every workload on it?"):
        # A "no" is an answer, not an interrupt (130): exit 1, as gcloud does.
        raise ElastixError(f"cluster {cfg.name} was not deleted: the confirmation was declined",
                           hint="pass --yes to delete without being asked")
    client = gke.cluster_manager()
    with _progress(out, f"deleting {cfg.name}") as progress:
        cluster.run(client, cfg, steps, progress)
    out.print(f"cluster {cfg.name} deleted", markup=False)
