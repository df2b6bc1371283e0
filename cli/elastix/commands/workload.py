"""`elastix workload` commands: create, list, status and goodput (registered in main;
`workload wait` is in :mod:`elastix.commands.wait`, `workload delete` in
:mod:`elastix.commands.delete`)."""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from elastix.backends import Target, backend_class, choose_backend, get_backend
from elastix.commands import examples, gcluster, xpk
from elastix.commands.options import (
    BackendOpt,
    ClusterOpt,
    ContextOpt,
    GoodputWindow,
    KubeconfigOpt,
    LocationOpt,
    NamespaceOpt,
    ProjectOpt,
    Selector,
    StateDirOpt,
    WorkloadName,
    check_output,
    check_window,
    complete_from,
    duration_option,
    one_name,
    output_option,
    replace_params,
    resolve_target,
    with_target,
    with_workload_option,
)
from elastix.errors import UsageError, load_user_yaml
from elastix.workload.resolve import FlagValue, resolve_spec
from elastix.workload.spec import FIELDS, KINDS, read_user_bytes, read_user_text

MAX_RUN_FILE = 1 << 30
"""A run's events or log read by ``goodput --events/--log``: 1 GiB (a million steps' events
are about 150 MB)."""

if TYPE_CHECKING:
    from elastix.workload.spec import WorkloadSpec

GOODPUT_OUTPUTS = ("table", "json")
GOODPUT_CATEGORIES = ("elastix", "ml-goodput")
LIST_OUTPUTS = ("table", "wide", "json", "yaml", "name")
STATUS_OUTPUTS = ("table", "json", "yaml")
CREATE_OUTPUTS = ("yaml", "json")
TableOrJson = Annotated[str, output_option(GOODPUT_OUTPUTS, "table or json.")]
Watch = Annotated[bool, typer.Option("--watch", "-w", help="Refresh until Ctrl-C.")]
Interval = Annotated[float, duration_option(
    "--interval", help="Time between refreshes, e.g. 2s (at least 0.1 s).", minimum=0.1)]

_CLI_TYPES = {"int": int | None, "bool": bool | None, "list": list[str] | None,
              "map": list[str] | None, "str": str | None}


def _spec_parameters() -> list[inspect.Parameter]:
    """One ``workload create`` option per spec field that declares one (``flags`` metadata).

    Like ``elastix_trainer.config.build_parser``: the spec's fields are the source, so a new
    field needs no edit here. Every default is None: only given flags override the spec file.
    """
    out = []
    for name, field in FIELDS.items():
        meta = field.metadata
        if not meta.get("flags"):
            continue
        opt = typer.Option(*meta["flags"], *xpk.aliases("workload create", meta["flags"][0]),
                           *gcluster.aliases("workload create", meta["flags"][0]),
                           help=meta["help"])
        out.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                     annotation=Annotated[_CLI_TYPES[KINDS[name]], opt]))
    return out


def with_spec_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """List the spec-field options where ``fn`` has ``spec_flags``, and pass them in it.

    The one signature rewrite ``create`` keeps, because Typer reads options only from a
    signature: the thirty spec options are declared once, on the spec's fields (spellings,
    help, kind), and written out as parameters they would be named three times (field,
    parameter, the call that collects them). Every other option of ``create`` is a plain
    parameter.
    """
    options = _spec_parameters()
    params: list[inspect.Parameter] = []
    for p in inspect.signature(fn, eval_str=True).parameters.values():
        params += options if p.name == "spec_flags" else [p]

    def call(kwargs: dict[str, Any]) -> Any:
        return fn(spec_flags={p.name: kwargs.pop(p.name) for p in options}, **kwargs)

    return replace_params(fn, params, call)


CreateNameArg = Annotated[str | None, typer.Argument(
    help="Workload name (or --workload NAME): a DNS label short enough for every name JobSet "
         "derives from it, at most 22 characters with the built-in template.")]
SpecFileOpt = Annotated[Path | None, typer.Option(
    "--spec", help="YAML spec file; flags override it.")]
EnvFileOpt = Annotated[Path | None, typer.Option(
    "--env-file", help="File of KEY=VALUE lines for the trainer; --env overrides it, it "
                       "overrides the spec file's env.")]
TemplateOpt = Annotated[Path | None, typer.Option(
    "--template", help="Your own Jinja2 JobSet template.")]
DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Print the manifest; no network. --dry-run=server asks the API server to "
                      "validate it instead.")]
ServerDryRunOpt = Annotated[bool, typer.Option("--server-dry-run", hidden=True)]
CreateOutputOpt = Annotated[str, output_option(CREATE_OUTPUTS, "yaml or json (with --dry-run).")]
OutputFileOpt = Annotated[Path | None, typer.Option(
    "--output-file", *xpk.aliases("workload create", "--output-file"),
    help="Write the manifest here.")]
ReplaceOpt = Annotated[bool, typer.Option(
    "--replace", help="Replace a workload of the same name (its kept data stays).")]
FreshOpt = Annotated[bool, typer.Option(
    "--fresh", help="Local backend: start over: replace a workload of the same name and remove "
                    "its kept data (checkpoints) first, as delete --delete-data does.")]
SkipPreflightOpt = Annotated[bool, typer.Option(
    "--skip-preflight", help="Submit without first checking that the cluster can run it (node "
                             "pools, head machine, TPU nodes, scopes, JobSet).")]
SkipLintOpt = Annotated[bool, typer.Option(
    "--skip-lint", help="Submit even when the elastic lint finds errors (JobSet budgets, proxy "
                        "and trainer disagreeing); they are printed as notes.")]
NoFitCheckOpt = Annotated[bool, typer.Option(
    "--no-fit-check", help="GKE: submit without first compiling the step for the TPU slices "
                           "(the fit check; it needs libtpu: pip install 'elastix[tpu]').")]
SmokeOpt = Annotated[bool, typer.Option(
    "--smoke", help="Local backend: the default job sized for a CI smoke run (a few hundred "
                    "steps: one kill and its recovery in about a minute).")]


@with_spec_options
def create(name: CreateNameArg = None, workload: gcluster.NameOpt = None,
           spec_file: SpecFileOpt = None, env_file: EnvFileOpt = None,
           spec_flags: dict[str, FlagValue] | None = None, template: TemplateOpt = None,
           client_dry_run: DryRunOpt = False, server_dry_run: ServerDryRunOpt = False,
           output: CreateOutputOpt = "yaml", output_file: OutputFileOpt = None,
           replace: ReplaceOpt = False, fresh: FreshOpt = False,
           skip_preflight: SkipPreflightOpt = False, skip_lint: SkipLintOpt = False,
           no_fit_check: NoFitCheckOpt = False,
           smoke: SmokeOpt = False, backend: BackendOpt = None, context: ContextOpt = None,
           kubeconfig: KubeconfigOpt = None,
           namespace: NamespaceOpt = None,  # None: the spec file's namespace, else default
           cluster: ClusterOpt = None, project: ProjectOpt = None,
           location: LocationOpt = None, state_dir: StateDirOpt = None,
           compute_type: gcluster.ComputeTypeOpt = None, topology: gcluster.TopologyOpt = None,
           pathways: gcluster.PathwaysOpt = False) -> None:
    """Render, validate and submit a Pathways elastic JobSet.

    NAME is a DNS label short enough for every name JobSet derives from it: at most 22
    characters with the built-in template (its coordinator label is 2n+19 <= 63 characters).
    """
    from elastix.workload.render import dump, render

    name = one_name(name, workload, flag="--workload", required=False)
    target = resolve_target(Target(backend=backend, context=context, kubeconfig=kubeconfig,
                                   namespace=namespace, cluster=cluster, project=project,
                                   location=location, state_dir=state_dir))
    dry_run = "server" if server_dry_run else "client" if client_dry_run else None
    check_output(output, CREATE_OUTPUTS)
    # Offline either way: the backend is chosen from flags and files, and its defaults (the
    # local job's image and command) make the manifest the one a real create would submit.
    kind = choose_backend(target)
    flags = gcluster.with_tpu_type(dict(spec_flags or {}), compute_type, topology)
    spec = _create_spec(kind, target, flags, name, spec_file, env_file, smoke=smoke,
                        fresh=fresh)
    manifest = render(spec, template)
    from elastix.workload.validate import notes

    _elastic_lint(manifest, refuse=not skip_lint, extra=notes(spec))
    if dry_run == "client":
        if kind == "gke":  # the TPU slices it names, compiled for first
            _fit_check(spec, manifest, skip=no_fit_check)
        _emit(dump(manifest, output), output_file)
        return
    # checked, not yet sent: a GKE-shaped line with no cluster says where it goes first
    said = gcluster.say_backend(kind, target, flags, spec_file, pathways=pathways)
    if kind == "gke":  # the TPU slices it will pay for, compiled for before they are asked for
        _fit_check(spec, manifest, skip=no_fit_check)
    _submit(target, kind, spec, manifest, replace=replace, server_dry_run=dry_run == "server",
            output=output, output_file=output_file, preflight=not skip_preflight, fresh=fresh,
            backend_said=said)


def _fit_check(spec: WorkloadSpec, manifest: dict[str, Any], *, skip: bool = False,
               console: Any = None) -> dict[str, Any] | None:
    """The fit check of what would be submitted (``backends.gke.fitcheck``): its report on
    stderr, a refusal (exit 2) where a mesh cannot hold the step, one line where it is skipped.
    Returns the report (None when skipped)."""
    from rich.markup import escape

    from elastix.backends.gke import fitcheck, statesize
    from elastix.views import fitcheck as view
    from elastix.views.console import console as make_console

    console = console or make_console(stderr=True)
    if skip:
        console.print("[yellow]note:[/] fit check skipped (--no-fit-check): the step was not "
                      "compiled for the TPU slices before submitting")
        return None
    p = fitcheck.plan(spec, manifest)
    if isinstance(p, fitcheck.Skip):
        console.print(f"[yellow]note:[/] fit check skipped: {escape(p.why)}"
                      + (f" ({escape(p.hint)})" if p.hint else ""))
        return None
    report = fitcheck.cached(p)
    reused = report is not None
    if report is None:
        console.print(f"fit check: compiling the step for {p.slices} x {p.tpu_type} without a "
                      "chip (libtpu; --no-fit-check skips it)")
        report = fitcheck.run(p, progress=lambda line: console.print(
            f"[dim]fit check: {escape(line)}[/]"))
        fitcheck.keep(p, report)
    restore = statesize.restore_path(manifest)
    view.render(report, console, head_memory=restore.head_memory if restore else None,
                restore=statesize.restore_line(manifest), reused=reused)
    refused = fitcheck.refusal(report)
    if refused is not None:
        raise refused
    return report


FIT_OUTPUTS = ("table", "json")


@with_spec_options
def fit_check(name: CreateNameArg = None, workload: gcluster.NameOpt = None,
              spec_file: SpecFileOpt = None,
              env_file: EnvFileOpt = None, spec_flags: dict[str, FlagValue] | None = None,
              template: TemplateOpt = None,
              output: Annotated[str, output_option(FIT_OUTPUTS, "table or json.")] = "table",
              again: Annotated[bool, typer.Option(
                  "--again", help="Compile again even where a report of the same spec and "
                                  "versions is kept.")] = False) -> None:
    """Compile the run's step for its TPU slices without a chip, for every mesh its elastic
    policy can train on: HBM per chip, the remat policy and loss tiles the trainer would choose,
    FLOPs and a predicted TFLOP/s per chip, host memory, a restore's path. Exit 2 where a mesh
    cannot hold the step. Needs libtpu (pip install 'elastix[tpu]'); no chip, no cluster, no
    network. workload create --dry-run on GKE runs the same check."""
    from elastix.backends.gke import fitcheck
    from elastix.views.console import console as make_console
    from elastix.workload.render import render

    check_output(output, FIT_OUTPUTS)
    name = one_name(name, workload, flag="--workload", required=False)
    flags = dict(spec_flags or {})
    flags.update(name=name or "fit-check")
    spec = resolve_spec(flags, spec_file=spec_file, env_file=env_file,
                        backend_defaults=backend_class("gke").defaults(smoke=False))
    manifest = render(spec, template)
    if again:
        p = fitcheck.plan(spec, manifest)
        if isinstance(p, fitcheck.Plan):
            (fitcheck.cache_dir() / f"{p.key()}.json").unlink(missing_ok=True)
    if output == "json":
        quiet = make_console(stderr=True, quiet=True)
        try:
            report = _fit_check(spec, manifest, console=quiet)
        except fitcheck.FitRefused:
            p = fitcheck.plan(spec, manifest)
            report = fitcheck.cached(p) if isinstance(p, fitcheck.Plan) else None
            typer.echo(json.dumps(report, indent=2))
            raise
        typer.echo(json.dumps(report, indent=2))
        return
    report = _fit_check(spec, manifest, console=make_console())
    if report is not None:
        typer.echo("fits: every mesh the run can train on holds its step")


def _create_spec(kind: str, target: Target, flags: dict[str, FlagValue], name: str | None,
                 spec_file: Path | None, env_file: Path | None, *, smoke: bool,
                 fresh: bool) -> WorkloadSpec:
    """The spec ``create`` renders: flags over the spec file over the backend's defaults
    (``--smoke``: the smoke job's), with the rules of ``--smoke`` and ``--fresh``."""
    if smoke:
        _check_smoke(kind, flags)
    if fresh and kind != "local":
        raise UsageError(f"--fresh removes a local workload's kept data; the {kind} backend "
                         "keeps none (the checkpoints are where --checkpoint-dir points)",
                         hint="drop --fresh, and point --checkpoint-dir at an empty path to "
                              "start over")
    flags.update(name=name, cluster=target.cluster, project=target.project,
                 location=target.location, namespace=target.namespace)
    defaults = backend_class(kind).defaults(smoke=smoke)
    spec = resolve_spec(flags, spec_file=spec_file, env_file=env_file, backend_defaults=defaults)
    if smoke and (spec.headless or spec.command != defaults.get("command")):
        raise UsageError(f"--smoke sizes the default job, but the spec file {spec_file} sets "
                         f"{'headless' if spec.headless else 'command'}",
                         hint="drop --smoke, or drop command/headless from the spec file")
    return spec


def _elastic_lint(manifest: dict[str, Any], refuse: bool = True,
                  extra: list[tuple[str, str, str | None]] = ()) -> None:
    """The elastic lint of what would be submitted: its errors refuse it (exit 2, as a spec's
    problems; with ``--skip-lint`` they are notes), its warnings and ``extra`` (the spec's own
    notes) are notes on stderr."""
    from elastix.workload.lint import LintError, lint

    found = lint(manifest)
    notes = list(extra) + found.warnings + ([] if refuse else found.errors)
    if notes:
        from rich.markup import escape

        from elastix.views.console import console as make_console

        console = make_console(stderr=True)
        for rule, msg, hint in notes:
            console.print(f"[yellow]note:[/] {escape(rule)}: {escape(msg)}"
                          + (f" ({escape(hint)})" if hint else ""))
    if found.errors and refuse:
        raise LintError(found.errors)


LINT_OUTPUTS = ("table", "json")


def lint(
    file: Annotated[Path, typer.Argument(
        help="A workload spec file or a rendered JobSet manifest.")],
    template: Annotated[Path | None, typer.Option(
        "--template", help="Render a spec file with your own Jinja2 JobSet template.")] = None,
    output: Annotated[str, output_option(LINT_OUTPUTS, "table or json.")] = "table",
    backend: BackendOpt = None,
) -> None:
    """Check that an elastic run's layers agree: JobSet budgets, the proxy's elastic slices,
    the trainer's retries and timeouts, colocated Python. Every finding at once; exit 2 on an
    error. A spec file is rendered as workload create would render it on the backend it would
    use (its defaults fill what the file leaves out: the local job's image and command)."""
    from elastix.workload.lint import LintError
    from elastix.workload.lint import lint as run_lint

    check_output(output, LINT_OUTPUTS)
    found = run_lint(_lint_input(file, template, choose_backend(Target(backend=backend))))
    if output == "json":
        typer.echo(json.dumps(found.to_json(), indent=2))
    else:
        for rule, msg, hint in found.warnings:
            typer.echo(f"warning: {rule}: {msg}" + (f" ({hint})" if hint else ""))
        if not found.errors:
            typer.echo(f"elastic lint: no errors, {len(found.warnings)} warning"
                       f"{'' if len(found.warnings) == 1 else 's'}")
    if found.errors:
        raise LintError(found.errors)


def _lint_input(file: Path, template: Path | None, kind: str) -> dict[str, Any]:
    """The manifest to lint: the file itself when it is a JobSet, else the spec it holds,
    rendered with backend ``kind``'s defaults."""
    from elastix.workload.render import render
    from elastix.workload.resolve import load_spec_file

    text = read_user_text(file, "file", "FILE", "save it as UTF-8 YAML or JSON")
    data = load_user_yaml(text, repr(str(file)), "give a workload spec file or a JobSet manifest",
                          too_deep=" to be a spec or a manifest")
    if not isinstance(data, dict):
        raise UsageError(f"{str(file)!r} is not a workload spec or a JobSet manifest (a YAML "
                         "mapping)", hint="e.g. the output of workload create --dry-run")
    if "kind" in data or "apiVersion" in data:
        if data.get("kind") != "JobSet":
            raise UsageError(f"{str(file)!r} is a {data.get('kind')!r}, not a JobSet",
                             hint="give the JobSet workload create --dry-run prints")
        if template is not None:
            raise UsageError("--template renders a spec file; this is a manifest already",
                             hint="drop --template")
        from elastix.workload import crd

        # a JobSet the API server would take (as it takes it: xpk's, gcluster's, a user's
        # YAML), or one line saying why not
        data = crd.as_admitted(data)
        crd.validate(data)
        return data
    named = load_spec_file(file).get("name")
    spec = resolve_spec({} if named else {"name": "lint"}, spec_file=file,
                        backend_defaults=backend_class(kind).defaults(smoke=False))
    return render(spec, template)


def _check_smoke(kind: str, flags: dict[str, Any]) -> None:
    """``--smoke`` sizes the local backend's default job: it needs both."""
    if kind != "local":
        raise UsageError(f"--smoke sizes the local backend's default job; the {kind} backend "
                         "has none", hint="on GKE pass --command with a short job (few steps)")
    if flags.get("command") or flags.get("headless"):
        raise UsageError("--smoke sizes the default job: it cannot be combined with "
                         f"--{'command' if flags.get('command') else 'headless'}",
                         hint="drop --smoke, or drop --command and use the default job")


def _emit(text: str, output_file: Path | None) -> None:
    if output_file is None:
        typer.echo(text, nl=False)
        return
    try:
        output_file.write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write {str(output_file)!r}: {e.strerror}",
                         hint="check the path given to --output-file") from None


def _submit(target: Target, kind: str | None, spec: WorkloadSpec, manifest: dict[str, Any], *,
            replace: bool, server_dry_run: bool, output: str, output_file: Path | None,
            preflight: bool = True, fresh: bool = False, backend_said: bool = False) -> None:
    from rich.markup import escape

    from elastix import interrupts
    from elastix.views.console import console as make_console
    from elastix.workload.render import dump

    console = make_console(stderr=True)
    if kind == "local" and not target.backend and not backend_said:
        console.print("[dim]no cluster configured: using the local backend "
                      "(--backend gke to change)[/]")
    backend = get_backend(dataclasses.replace(target, namespace=spec.namespace))
    # Ctrl-C before the backend's commit point undoes the create; after it, it is held until
    # the workload is reported created: never "interrupted" over a workload left running.
    with interrupts.until_reported() as held:
        # --fresh is the local backend's alone (create refused it for any other)
        more = {"fresh": True} if fresh else {}
        with _replacing(console, backend, manifest, (replace or fresh) and not server_dry_run):
            name = backend.submit(manifest, replace=replace,
                                  dry_run="server" if server_dry_run else None,
                                  preflight=preflight, **more)
        for note in backend.notices:
            console.print(f"[yellow]note:[/] {escape(note)}")
        if server_dry_run:
            console.print(f"[green]server dry run passed[/] for workload {name}")
            if output_file:
                _emit(dump(manifest, output), output_file)
            return
        if output_file:
            _emit(dump(manifest, output), output_file)
        console.print(f"[green]created[/] workload [bold]{name}[/] on {backend.name} "
                      f"({spec.num_slices} x {spec.tpu.name}, elastic slices "
                      f"{spec.elastic_slices})")
        console.print(f"  elastix workload status {name}    elastix logs {name} -f")
        if held.pending:
            console.print(f"[yellow]note:[/] Ctrl-C came after the workload was created: it is "
                          f"left running; delete it with: elastix workload delete {name}"
                          + (" --backend local" if backend.name == "local" else ""))


def _replacing(console: Any, backend: Any, manifest: dict[str, Any], replace: bool) -> Any:
    """``--replace`` of a workload that runs: say what create waits for before the new run
    starts (the old trainer's last save on SIGTERM, then its pods' exit: the new run resumes
    from that save). A line that ticks on a terminal, one line in a CI log."""
    import contextlib

    from elastix.measure.progress import Phase
    from elastix.views.waiting import WaitLine

    name = (manifest.get("metadata") or {}).get("name", "")
    if not replace or not backend.exists(name):
        return contextlib.nullcontext()
    line = WaitLine(console, f"replacing {name}")
    line.update(Phase("stopping the previous run (its trainer's last save, then its pods)"))
    return line


def _watch(render: Callable[[], Any], interval: float) -> None:
    """Redraw ``render()`` every ``interval`` seconds until Ctrl-C (exit 130 by the entry point).

    On a terminal the frame is redrawn in place; piped, each frame is printed after the last.
    """
    import time

    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    from elastix.protocol.timefmt import utc_now
    from elastix.views.console import console as make_console

    every = examples.duration_text(interval)

    def frame() -> Any:  # when it was read, so a frame that does not change still says so
        return Group(Text(f"refreshed {utc_now():%H:%M:%S}Z, every {every} (Ctrl-C to stop)",
                          style="dim"), render())

    console = make_console()
    if not console.is_terminal:
        while True:
            console.print(frame())
            console.print()
            console.file.flush()
            time.sleep(interval)  # a refresh period, not synchronisation
    with Live(frame(), console=console, auto_refresh=False) as live:
        while True:
            time.sleep(interval)
            live.update(frame(), refresh=True)


@with_target
def list_(target: Target, output: Annotated[str, output_option(
              LIST_OUTPUTS, "table, wide (with step time, goodput, pods, JobSet restarts, "
                            "head), json, yaml, or name (workload/NAME a line, as kubectl's "
                            "-o name).")] = "table",
          selector: Selector = None,
          every: Annotated[bool, typer.Option(
              "--all", help="GKE: every Pathways JobSet of the namespace, also those xpk, "
                            "gcluster or your own YAML made (MADE BY says whose); elastix "
                            "reads them and adds nothing to them.")] = False,
          watch: Watch = False, interval: Interval = 2.0) -> None:
    """List workloads: state, slices ready, last step and when, loss, restarts, age."""
    from elastix.measure.progress import read_progress
    from elastix.views.console import console
    from elastix.views.status import workloads_table
    from elastix.workload.labels import made_by
    from elastix.workload.selector import parse

    check_output(output, LIST_OUTPUTS)
    chosen = parse(selector) if selector is not None else None
    backend = get_backend(target)

    def listed() -> list[Any]:
        # a local workload is always elastix's: --all changes nothing there
        return backend.list(chosen, every=True) if every and backend.name == "gke" else \
            backend.list(chosen)

    if output == "name":  # kubectl's <resource>/<name>, the resource as elastix names it
        for s in listed():
            typer.echo(f"workload/{s.name}")
        return
    if output in ("json", "yaml"):
        items = [{**s.to_json(), "made_by": made_by(s.labels) if s.backend == "gke" else
                  "elastix", "training": _progress_json(read_progress(backend, s.name))}
                 for s in listed()]
        typer.echo(_dump(items, output), nl=False)
        return

    def render() -> Any:
        items = listed()
        if not items:
            from rich.text import Text

            match = f" match -l {selector}" if selector is not None else ""
            mine = "" if every or backend.name != "gke" else \
                " (--all also lists JobSets that others made)"
            return Text(f"no {backend.name} workloads in {backend.where()}{match}{mine}")
        return workloads_table(items, progress={s.name: read_progress(backend, s.name)
                                                for s in items}, wide=output == "wide",
                               made_by=every and backend.name == "gke")

    if watch:
        _watch(render, interval)
    console().print(render())


def _progress_json(p: Any) -> dict[str, Any] | None:
    return None if p is None or p is False else p.to_json()


def _dump(data: Any, output: str) -> str:
    if output == "yaml":
        import yaml

        return yaml.safe_dump(data, sort_keys=False)
    return json.dumps(data, indent=2) + "\n"


@with_target
@with_workload_option
def status(target: Target, name: WorkloadName, output: Annotated[str, output_option(
               STATUS_OUTPUTS, "table, json or yaml.")] = "table",
           watch: Watch = False, interval: Interval = 2.0) -> None:
    """One workload: how training goes, head, per-slice pods and phases, restarts, and why it
    is stuck."""
    from elastix.measure.progress import read_progress
    from elastix.views.console import console
    from elastix.views.status import status_renderable

    check_output(output, STATUS_OUTPUTS)
    backend = get_backend(target)
    if output in ("json", "yaml"):
        st = backend.status(name)
        data = {**st.to_json(),
                "training": _progress_json(read_progress(backend, name, whole=True))}
        typer.echo(_dump(data, output), nl=False)
        return

    def render() -> Any:
        st = backend.status(name)
        return status_renderable(st, progress=read_progress(backend, name, whole=True))

    if watch:
        _watch(render, interval)
    console().print(render())


@with_target
@with_workload_option(required=False)
def goodput(
    target: Target,
    name: Annotated[str | None, typer.Argument(
        help="Workload name, or --workload NAME (not needed with --events/--log).")] = None,
    events_file: Annotated[Path | None, typer.Option(
        "--events", help="Read this events.jsonl instead of asking the backend.")] = None,
    log_file: Annotated[Path | None, typer.Option(
        "--log", help="Read this head log instead.")] = None,
    output: TableOrJson = "table",
    plot: Annotated[Path | None, typer.Option(
        "--plot", help="Write goodput over time to FILE.png.")] = None,
    window: GoodputWindow = None,
    categories: Annotated[str, typer.Option(
        "--categories", help="elastix (its own causes) or ml-goodput (Google's "
        "ml-goodput-measurement categories and definitions, next to elastix's total).",
        autocompletion=complete_from(GOODPUT_CATEGORIES))] = "elastix",
) -> None:
    """Goodput of a run and where the rest went (detection, slices, restore, re-done steps...)."""
    from elastix.measure.goodput import auto_window
    from elastix.measure.goodput import goodput as measure_goodput
    from elastix.views.console import console
    from elastix.views.measurement import print_goodput

    check_output(output, GOODPUT_OUTPUTS)
    check_window(window)
    if categories not in GOODPUT_CATEGORIES:
        raise UsageError(f"--categories {categories!r} is not elastix or ml-goodput",
                         hint="use --categories elastix or --categories ml-goodput")
    if plot:
        from elastix.views.plot import check_plot_path

        check_plot_path(str(plot))
    events, source = _load(name, events_file, log_file, target)
    if not events:
        raise UsageError(f"no trainer events found ({source})",
                         hint="has the trainer started? see docs/events.md")
    rep = measure_goodput(events)
    if rep.problem:
        raise UsageError(f"no goodput for {source}: {rep.problem}",
                         hint="one run's events, in the order written; was the clock stepped?")
    if plot:
        from elastix.views.plot import plot_goodput

        plot_goodput(rep, events, str(plot), window_seconds=window)
    if categories == "ml-goodput":
        _ml_goodput(events, rep, source, output)
        if plot and output != "json":
            console().print(f"wrote {plot}")
        return
    if output == "json":
        d = rep.to_json()
        d["source"] = source
        d["series"] = [{"seconds": x, "window_goodput": w, "cumulative_goodput": c}
                       for x, w, c in rep.series(window or auto_window(rep.wall_seconds))]
        typer.echo(json.dumps(d, indent=2))
        return
    out = console()
    print_goodput(out, rep, source)
    if plot:
        out.print(f"wrote {plot}")


def _ml_goodput(events: list[Any], rep: Any, source: str, output: str) -> None:
    """The run in ml-goodput-measurement's categories, with elastix's own totals."""
    from elastix.measure import mlgoodput

    try:
        ml = mlgoodput.measure(events)
    except mlgoodput.NotComputable as e:
        raise UsageError(f"no ml-goodput view of {source}: {e}",
                         hint="the run needs its run_start and steps (docs/events.md)") from None
    if output == "json":
        d = {"categories": "ml-goodput", "source": source, **ml.to_json(),
             "elastix": {"goodput": rep.goodput,
                         "slice_weighted_goodput": rep.slice_weighted_goodput,
                         "full_mesh_slices": rep.full_mesh_slices},
             "differences": mlgoodput.DIFFERENCES}
        typer.echo(json.dumps(d, indent=2))
        return
    from elastix.views.console import console
    from elastix.views.mlgoodput import print_ml_goodput

    print_ml_goodput(console(), ml, rep, source)


def _load(name: str | None, events_file: Path | None, log_file: Path | None,
          target: Target) -> tuple[list[Any], str]:
    from elastix.measure.events import events_from_jsonl, events_from_log, log_note

    if events_file and log_file:
        raise UsageError("give --events or --log, not both", hint="pass one of them")
    if events_file:
        text = read_user_text(events_file, "events file", "--events",
                              "pass the events.jsonl the trainer wrote", limit=MAX_RUN_FILE)
        events = events_from_jsonl(text)
        return events, f"events {events_file}{log_note(events)}"
    if log_file:
        # a log is a byte stream: a stray byte must not hide the event lines around it
        text = read_user_bytes(log_file, "log file", "--log", limit=MAX_RUN_FILE).decode(
            "utf-8", errors="replace")
        events = events_from_log(text.splitlines())
        return events, f"log {log_file}{log_note(events)}"
    if not name:
        raise UsageError("missing workload NAME", hint="elastix workload goodput NAME "
                         "(or --events FILE / --log FILE)")
    from elastix.measure.events import events_of

    return events_of(get_backend(target).trainer_events(name))
