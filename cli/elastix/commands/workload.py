"""`elastix workload` commands: create (here), list/status/delete (workload_ops), goodput."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import typer

from elastix.backends import Target, backend_class, choose_backend, get_backend
from elastix.commands.options import with_target

app = typer.Typer(no_args_is_help=True)

def _kv_list(items: list[str] | None, flag: str) -> dict[str, str] | None:
    from elastix.errors import UsageError

    if not items:
        return None
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"{flag} {item!r} is not KEY=VALUE", hint=f"write {flag} key=value")
        k, v = item.split("=", 1)
        out[k] = v
    return out


@app.command("create")
@with_target(namespace=None)
def create(
    target: Target,
    name: str = typer.Argument(None, help="Workload name (a DNS label, at most 40 characters)."),
    spec_file: Path = typer.Option(None, "--spec", help="YAML spec file; flags override it."),
    tpu_type: str = typer.Option(None, "--tpu-type", "--device-type",
                                 help="TPU type per slice, e.g. v5litepod-16 or v5litepod-4x4."),
    num_slices: int = typer.Option(None, "--num-slices", help="Number of TPU slices [1]."),
    elastic_slices: int = typer.Option(None, "--elastic-slices",
                                       help="Slices that may fail and recover in-process [0]."),
    max_slice_restarts: int = typer.Option(None, "--max-slice-restarts",
                                           help="Recreations allowed per slice [10 if elastic]."),
    max_restarts: int = typer.Option(None, "--max-restarts",
                                     help="Whole-JobSet restarts allowed (last resort) [0]."),
    docker_image: str = typer.Option(None, "--docker-image", help="Trainer image (head pod)."),
    command: str = typer.Option(None, "--command", help="Trainer command, run by bash -c."),
    env: list[str] = typer.Option(None, "--env", help="KEY=VALUE for the trainer; repeatable."),
    env_file: Path = typer.Option(None, "--env-file", help="File of KEY=VALUE lines."),
    priority: str = typer.Option(None, "--priority", help="priorityClassName of the workers."),
    queue: str = typer.Option(None, "--queue", help="Kueue LocalQueue name."),
    proxy_image: str = typer.Option(None, "--proxy-server-image", help="Pathways proxy image."),
    server_image: str = typer.Option(None, "--server-image", help="Pathways server image."),
    gcs_scratch: str = typer.Option(None, "--pathways-gcs-location",
                                    help="Pathways scratch location, gs://..."),
    persistence: bool = typer.Option(None, "--pathways-persistence/--no-pathways-persistence",
                                     help="ENABLE_PATHWAYS_PERSISTENCE=1 (hosts write checkpoints)."),
    head_cpu: str = typer.Option(None, "--head-cpu"),
    head_memory: str = typer.Option(None, "--head-memory"),
    proxy_cpu: str = typer.Option(None, "--proxy-cpu"),
    proxy_memory: str = typer.Option(None, "--proxy-memory"),
    rm_cpu: str = typer.Option(None, "--rm-cpu"),
    rm_memory: str = typer.Option(None, "--rm-memory"),
    head_node_pool: str = typer.Option(None, "--head-node-pool", help="Node pool of the head."),
    grace: int = typer.Option(None, "--termination-grace-period", help="Worker grace, seconds."),
    colocated: str = typer.Option(None, "--colocated-python-sidecar-image"),
    headless: bool = typer.Option(None, "--headless", help="No main container."),
    proxy_args: list[str] = typer.Option(None, "--custom-proxy-arg", help="Repeatable."),
    rm_args: list[str] = typer.Option(None, "--custom-rm-arg", help="Repeatable."),
    worker_args: list[str] = typer.Option(None, "--custom-worker-arg", help="Repeatable."),
    label: list[str] = typer.Option(None, "--label", help="KEY=VALUE label; repeatable."),
    events_path: str = typer.Option(None, "--events-path",
                                    help="gs:// URI for the trainer's events (read by chaos "
                                         "--measure and goodput)."),
    template: Path = typer.Option(None, "--template", help="Your own Jinja2 JobSet template."),
    client_dry_run: bool = typer.Option(False, "--dry-run",
                                        help="Print the manifest; no network. --dry-run=server "
                                             "asks the API server to validate it instead."),
    server_dry_run: bool = typer.Option(False, "--server-dry-run", hidden=True),
    output: str = typer.Option("yaml", "--output", "-o", help="yaml or json (with --dry-run)."),
    output_file: Path = typer.Option(None, "--output-file", help="Write the manifest here."),
    replace: bool = typer.Option(False, "--replace", help="Replace a workload of the same name."),
) -> None:
    """Render, validate and submit a Pathways elastic JobSet."""
    from elastix.errors import UsageError
    from elastix.workload import render as R
    from elastix.workload import spec as S

    dry_run = "server" if server_dry_run else "client" if client_dry_run else None
    if output not in ("yaml", "json"):
        raise UsageError(f"--output {output!r} is not yaml or json", hint="use -o yaml or -o json")
    kind = choose_backend(target) if dry_run != "client" else None
    envs: dict[str, str] = {}
    if env_file:
        envs.update(S.load_env_file(env_file))
    envs.update(S.parse_env_flags(env or []))
    flags: dict[str, Any] = {
        "name": name, "cluster": target.cluster, "project": target.project,
        "location": target.location, "namespace": target.namespace, "tpu_type": tpu_type,
        "num_slices": num_slices,
        "elastic_slices": elastic_slices, "max_slice_restarts": max_slice_restarts,
        "max_restarts": max_restarts, "docker_image": docker_image, "command": command,
        "env": envs or None, "priority": priority, "queue": queue, "proxy_image": proxy_image,
        "server_image": server_image, "gcs_scratch": gcs_scratch,
        "pathways_persistence": persistence, "head_cpu": head_cpu, "head_memory": head_memory,
        "proxy_cpu": proxy_cpu, "proxy_memory": proxy_memory, "rm_cpu": rm_cpu,
        "rm_memory": rm_memory, "head_node_pool": head_node_pool,
        "termination_grace_period": grace, "colocated_python_image": colocated,
        "headless": headless, "proxy_args": proxy_args or None, "rm_args": rm_args or None,
        "worker_args": worker_args or None, "labels": _kv_list(label, "--label"),
        "events_path": events_path,
    }
    file_values = S.load_spec_file(spec_file) if spec_file else {}
    if kind and not (headless if headless is not None else file_values.get("headless")):
        for field, value in backend_class(kind).defaults().items():
            if flags.get(field) is None and not file_values.get(field):
                flags[field] = value
    spec = S.build_spec(file_values, flags)
    manifest = R.render(spec, template)
    if dry_run == "client":
        _emit(R.dump(manifest, output), output_file)
        return
    _submit(target, kind, spec, manifest, replace=replace, server_dry_run=dry_run == "server",
            output=output, output_file=output_file)


def _emit(text: str, output_file: Path | None) -> None:
    from elastix.errors import UsageError

    if output_file is None:
        typer.echo(text, nl=False)
        return
    try:
        output_file.write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write {str(output_file)!r}: {e.strerror}",
                         hint="check the path given to --output-file") from None


def _submit(target: Target, kind: str | None, spec: Any, manifest: dict[str, Any], *,
            replace: bool, server_dry_run: bool, output: str, output_file: Path | None) -> None:
    from rich.console import Console

    from elastix.workload import render as R
    console = Console(stderr=True, highlight=False)
    if kind == "local" and not target.backend:
        console.print("[dim]no cluster configured: using the local backend "
                      "(--backend gke to change)[/]")
    backend = get_backend(dataclasses.replace(target, namespace=spec.namespace))
    name = backend.submit(manifest, replace=replace, dry_run="server" if server_dry_run else None)
    if server_dry_run:
        console.print(f"[green]server dry run passed[/] for workload {name}")
        if output_file:
            _emit(R.dump(manifest, output), output_file)
        return
    if output_file:
        _emit(R.dump(manifest, output), output_file)
    console.print(f"[green]created[/] workload [bold]{name}[/] on {backend.name} "
                  f"({spec.num_slices} x {spec.tpu.name}, elastic slices {spec.elastic_slices})")
    console.print(f"  elastix workload status {name}    elastix logs {name} -f")
