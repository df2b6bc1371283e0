"""`elastix workload` commands: create (here), list/status/delete (workload_ops), goodput."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from elastix.backends import Target, backend_class, choose_backend, get_backend
from elastix.commands.options import replace_params, with_target
from elastix.workload import spec

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


_CLI_TYPES = {"int": int | None, "bool": bool | None, "list": list[str] | None,
              "map": list[str] | None, "str": str | None}


def _spec_parameters() -> list[inspect.Parameter]:
    """One ``workload create`` option per spec field that declares one (``flags`` metadata).

    Like ``elastix_trainer.config.build_parser``: the spec's fields are the source, so a new
    field needs no edit here. Every default is None: only given flags override the spec file.
    """
    out = []
    for name, field in spec.FIELDS.items():
        meta = field.metadata
        if not meta.get("flags"):
            continue
        opt = typer.Option(*meta["flags"], help=meta["help"])
        out.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                     annotation=Annotated[_CLI_TYPES[spec.KINDS[name]], opt]))
    return out


def with_spec_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Put the spec-field options where ``fn`` has ``flags``, and pass them as that dict.

    ``env_file`` is listed right after ``--env``, where it belongs.
    """
    own = inspect.signature(fn, eval_str=True).parameters
    options = _spec_parameters()
    fields = [p.name for p in options]
    params: list[inspect.Parameter] = []
    for p in own.values():
        if p.name == "flags":
            for q in options:
                params.append(q)
                if q.name == "env":
                    params.append(own["env_file"])
        elif p.name != "env_file":
            params.append(p)

    def call(kwargs: dict[str, Any]) -> Any:
        return fn(flags={f: kwargs.pop(f) for f in fields}, **kwargs)

    return replace_params(fn, params, call)


@app.command("create")
@with_target(namespace=None)
@with_spec_options
def create(
    target: Target,
    name: Annotated[str | None, typer.Argument(
        help="Workload name (a DNS label, at most 40 characters).")] = None,
    spec_file: Annotated[Path | None, typer.Option(
        "--spec", help="YAML spec file; flags override it.")] = None,
    flags: dict[str, Any] | None = None,
    env_file: Annotated[Path | None, typer.Option(
        "--env-file", help="File of KEY=VALUE lines.")] = None,
    template: Annotated[Path | None, typer.Option(
        "--template", help="Your own Jinja2 JobSet template.")] = None,
    client_dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the manifest; no network. --dry-run=server asks the API "
                          "server to validate it instead.")] = False,
    server_dry_run: Annotated[bool, typer.Option("--server-dry-run", hidden=True)] = False,
    output: Annotated[str, typer.Option(
        "--output", "-o", help="yaml or json (with --dry-run).")] = "yaml",
    output_file: Annotated[Path | None, typer.Option(
        "--output-file", help="Write the manifest here.")] = None,
    replace: Annotated[bool, typer.Option(
        "--replace", help="Replace a workload of the same name.")] = False,
) -> None:
    """Render, validate and submit a Pathways elastic JobSet."""
    from elastix.errors import UsageError
    from elastix.workload import render as R
    from elastix.workload import spec as S

    flags = dict(flags or {})
    dry_run = "server" if server_dry_run else "client" if client_dry_run else None
    if output not in ("yaml", "json"):
        raise UsageError(f"--output {output!r} is not yaml or json", hint="use -o yaml or -o json")
    kind = choose_backend(target) if dry_run != "client" else None
    envs: dict[str, str] = {}
    if env_file:
        envs.update(S.load_env_file(env_file))
    envs.update(S.parse_env_flags(flags["env"] or []))
    flags["env"] = envs or None
    flags["labels"] = _kv_list(flags["labels"], "--label")
    for key in ("proxy_args", "rm_args", "worker_args"):
        flags[key] = flags[key] or None
    flags.update(name=name, cluster=target.cluster, project=target.project,
                 location=target.location, namespace=target.namespace)
    file_values = S.load_spec_file(spec_file) if spec_file else {}
    headless = flags["headless"]
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
