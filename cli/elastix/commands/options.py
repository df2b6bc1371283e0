"""The options every backend command shares, declared once.

The eight target options (``--backend`` ... ``--state-dir``) are ``Annotated`` aliases;
:func:`with_target` adds them to a handler that takes ``target: Target`` and passes it the
``Target`` they describe, so no command spells them out or copies them into a dataclass.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from elastix.backends import Target, get_backend
from elastix.errors import UsageError, shown


def complete_from(choices: tuple[str, ...]) -> Callable[[str], list[str]]:
    """A Typer ``autocompletion`` that offers ``choices`` (the values an option takes)."""

    def complete(incomplete: str) -> list[str]:
        return [c for c in choices if c.startswith(incomplete)]

    return complete


def complete_tpu_type(incomplete: str) -> list[str]:
    """Every TPU type spelling the catalogue knows (``v5litepod-16``, ``v5litepod-4x4``...)."""
    from elastix.workload import tpu

    return sorted(n for n in tpu.catalogue() if n.startswith(incomplete))


def output_option(choices: tuple[str, ...], help: str) -> Any:
    """``-o/--output``, completing its ``choices`` (checked by :func:`check_output`; a command
    may take more in some modes: pass them all here)."""
    return typer.Option("--output", "-o", help=help, autocompletion=complete_from(choices))


BackendOpt = Annotated[str | None, typer.Option(
    "--backend", help="gke or local (default: gke when a cluster is configured, else local).",
    envvar="ELASTIX_BACKEND", autocompletion=complete_from(("gke", "local")))]
ContextOpt = Annotated[str | None, typer.Option(
    "--context", help="kubeconfig context (default: current).")]
KubeconfigOpt = Annotated[str | None, typer.Option(
    "--kubeconfig", help="kubeconfig file.", envvar="KUBECONFIG")]
NamespaceOpt = Annotated[str | None, typer.Option(
    "--namespace", "-n", help="Kubernetes namespace.")]
ClusterOpt = Annotated[str | None, typer.Option(
    "--cluster", help="GKE cluster name (looked up with the GKE API).")]
ProjectOpt = Annotated[str | None, typer.Option(
    "--project", help="Google Cloud project of the cluster.")]
LocationOpt = Annotated[str | None, typer.Option(
    "--location", "--zone", help="Cluster location (region or zone).")]
StateDirOpt = Annotated[str | None, typer.Option(
    "--state-dir", help="Local backend: state directory.", envvar="ELASTIX_STATE_DIR")]

COMPLETION_TIMEOUT = 2.0  # seconds a shell waits for the backend's answer before it gets none


def _ask_backend(ctx: typer.Context, read: Callable[[Any], list[str]]) -> list[str]:
    """``read(backend)`` for the backend the command line names so far, for completion.

    Completion must never get in the way of typing: on any error, or without an answer within
    ``COMPLETION_TIMEOUT`` seconds (a cluster out of reach), it offers nothing.
    """
    import threading

    found: list[str] = []

    def ask() -> None:
        try:
            target = Target(**{name: ctx.params.get(name, default)
                               for name, _, default in TARGET_OPTIONS})
            found.extend(read(get_backend(target)))
        except Exception:  # completion offers nothing rather than fail
            found.clear()

    thread = threading.Thread(target=ask, name="complete", daemon=True)
    thread.start()
    thread.join(COMPLETION_TIMEOUT)
    return [] if thread.is_alive() else list(found)


def complete_workload_name(ctx: typer.Context, incomplete: str) -> list[str]:
    """Workload names for shell completion, from the backend the command line names so far."""
    names = _ask_backend(ctx, lambda b: [w.name for w in b.list()])
    return sorted(n for n in names if n.startswith(incomplete))


def complete_slice(ctx: typer.Context, incomplete: str) -> list[str]:
    """The slice indices of the workload the line names: from its status (one read of the
    backend, as ``status`` makes), else 0..N-1 from its slice count."""
    ctx = _before_pending_option(ctx)
    name = ctx.params.get("name") or ctx.params.get("workload")
    if not name:
        return []

    def read(backend: Any) -> list[str]:
        st = backend.status(name)
        return [str(s.index) for s in st.slices] or [str(i) for i in range(st.num_slices)]

    return [i for i in _ask_backend(ctx, read) if i.startswith(incomplete)]


def _before_pending_option(ctx: typer.Context) -> typer.Context:
    """The command line parsed up to the option being completed.

    click parses the line with that option still waiting for its value, which stops its
    parser before the positional NAME is read (click 8.5): the line the shell sent
    (``COMP_WORDS``, set by bash, zsh and fish alike) is parsed again without it.
    """
    import os

    if ctx.params.get("name") or ctx.params.get("workload") or "COMP_WORDS" not in os.environ:
        return ctx
    try:
        from click.parser import split_arg_string
        from click.shell_completion import _resolve_context

        words = split_arg_string(os.environ["COMP_WORDS"])[1:]
        last = max(i for i, w in enumerate(words) if w.startswith("-"))
        return _resolve_context(ctx.find_root().command, {}, ctx.find_root().info_name or "",
                                words[:last])
    except Exception:  # completion offers nothing rather than fail
        return ctx


def complete_selector(ctx: typer.Context, incomplete: str) -> list[str]:
    """``key=value`` of the existing workloads' labels, for the last term of a ``-l`` list."""
    head, _, term = incomplete.rpartition(",")
    head = head + "," if head else ""
    pairs = _ask_backend(ctx, lambda b: [f"{k}={v}" for w in b.list()
                                         for k, v in w.labels.items()])
    return [head + p for p in sorted(set(pairs)) if p.startswith(term)]


Selector = Annotated[str | None, typer.Option(
    "--selector", "-l", help="Only workloads whose labels match, as kubectl's: key=value, "
                             "key!=value, 'key in (a,b)', key, !key; joined by commas "
                             "(labels are set with workload create --label).",
    show_default=False, autocompletion=complete_selector)]


WorkloadName = Annotated[str, typer.Argument(help="Workload name (or --workload NAME).",
                                             autocompletion=complete_workload_name)]
_OptionalWorkloadName = Annotated[str | None, typer.Argument(
    help="Workload name (or --workload NAME).", show_default=False,
    autocompletion=complete_workload_name)]
WorkloadOpt = Annotated[str | None, typer.Option(
    "--workload", help="The workload NAME, as xpk spells it.", show_default=False,
    autocompletion=complete_workload_name)]


def one_name(positional: str | None, option: str | None, *, flag: str,
             required: bool = True) -> str | None:
    """The NAME given either as the positional or as ``flag`` (its xpk spelling).

    Raises:
        UsageError: both are given, or neither when ``required``.
    """
    import click

    cmd = click.get_current_context(silent=True)
    path = cmd.command_path if cmd else "elastix"
    if positional is not None and option is not None:
        raise UsageError(f"NAME {positional!r} and {flag} {option!r} both given",
                         hint=f"give the name once: {path} NAME, or {path} {flag} NAME")
    if required and positional is None and option is None:
        raise UsageError(f"missing {flag.lstrip('-')} NAME",
                         hint=f"{path} NAME, or {path} {flag} NAME")
    return positional if positional is not None else option


def with_workload_option(fn: Callable[..., Any] | None = None, *, required: bool = True) -> Any:
    """Decorate a handler with a positional ``name``: ``--workload NAME`` may stand for it.

    xpk users type ``--workload NAME``; click cannot make one value both positional and an
    option, so NAME becomes optional, ``--workload`` follows it, and :func:`one_name` checks
    that exactly one is given (at most one when ``required`` is False).
    """
    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        params = []
        for p in inspect.signature(fn, eval_str=True).parameters.values():
            if p.name == "name":
                if required:
                    p = p.replace(annotation=_OptionalWorkloadName)
                params += [p.replace(default=None),
                           inspect.Parameter("workload", inspect.Parameter.KEYWORD_ONLY,
                                             annotation=WorkloadOpt, default=None)]
            else:
                params.append(p)

        def call(kwargs: dict[str, Any]) -> Any:
            kwargs["name"] = one_name(kwargs["name"], kwargs.pop("workload"), flag="--workload",
                                      required=required)
            return fn(**kwargs)

        return replace_params(fn, params, call)

    return decorate(fn) if fn is not None else decorate


def duration_option(*decls: str, help: str, minimum: float | None = None) -> Any:
    """A float option read with :func:`parse_duration` (Typer's own float takes nan and -1).

    Args:
        decls: the option's spellings; the first names it in errors.
        help: its help text.
        minimum: the smallest value accepted, in seconds (a refresh interval of 0 spins).
    """
    return typer.Option(*decls, help=help, metavar="DURATION",
                        parser=lambda text: parse_duration(text, decls[0], minimum=minimum))


GoodputWindow = Annotated[float | None, duration_option(
    "--window", help="Goodput window of --plot's lower panel and -o json's series, e.g. 60s "
                     "or 5m (default: about a twentieth of the run, on a round number).",
    minimum=1.0)]

# (Target field, option, default), in the order --help lists them.
TARGET_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("backend", BackendOpt, None),
    ("context", ContextOpt, None),
    ("kubeconfig", KubeconfigOpt, None),
    ("namespace", NamespaceOpt, "default"),
    ("cluster", ClusterOpt, None),
    ("project", ProjectOpt, None),
    ("location", LocationOpt, None),
    ("state_dir", StateDirOpt, None),
)


def replace_params(fn: Callable[..., Any], params: list[inspect.Parameter],
                   call: Callable[[dict[str, Any]], Any]) -> Callable[..., Any]:
    """A wrapper of ``fn`` whose signature (what Typer reads) is ``params``.

    ``call(kwargs)`` receives the parsed options and calls ``fn``. Typer reads both
    ``__signature__`` and the annotations, so both are set from ``params``.
    """
    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> Any:
        return call(kwargs)

    # Typer passes every option by name, so all may be keyword-only (and in any order).
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]
    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper


def with_target(fn: Callable[..., Any] | None = None, *, namespace: str | None = "default"
                ) -> Any:
    """Decorate a handler taking ``target: Target``: it gets the eight target options instead.

    Args:
        fn: the handler.
        namespace: the ``--namespace`` default (``workload create`` uses None: a spec file's
            namespace applies unless the flag is given).
    """
    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        own = [p for p in inspect.signature(fn, eval_str=True).parameters.values()
               if p.name != "target"]
        defaults = {"namespace": namespace}
        added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=opt,
                                   default=defaults.get(name, default))
                 for name, opt, default in TARGET_OPTIONS]

        def call(kwargs: dict[str, Any]) -> Any:
            fields = {name: kwargs.pop(name) for name, _, _ in TARGET_OPTIONS}
            return fn(target=resolve_target(Target(**fields)), **kwargs)

        return replace_params(fn, own + added, call)

    return decorate(fn) if fn is not None else decorate


def resolve_target(target: Target) -> Target:
    """The target with what the flags left out filled in, and flags that cannot apply said.

    GKE: ``--project`` and ``--location`` default to the active gcloud configuration's project
    and zone (or region), read from its files (:mod:`elastix.clients.gcloud_config`), as xpk
    users expect. Local: namespaces, projects and zones mean nothing there; one note on stderr
    names the flags that are ignored rather than ignoring them silently.
    """
    import dataclasses
    import sys

    from elastix.backends import choose_backend

    try:
        kind = choose_backend(target)
    except UsageError:
        return target  # the command reports the bad --backend itself
    if kind == "local":
        ignored = [f"{flag} {value}" for flag, value in (
            ("--namespace", None if target.namespace in (None, "default") else target.namespace),
            ("--project", target.project), ("--location", target.location)) if value]
        if ignored:
            sys.stderr.write(f"elastix: note: the local backend has no namespaces, projects or "
                             f"zones: {', '.join(ignored)} ignored\n")
        return target
    if target.project and target.location:
        return target
    from elastix.clients.gcloud_config import read_defaults

    found = read_defaults()
    return dataclasses.replace(target, project=target.project or found.project,
                               location=target.location or found.location)


_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
# d, h, m, s, ms parts in that order ("m" not the start of "ms").
_DURATION = re.compile("".join(f"(?:{_NUMBER}{unit})?" for unit in ("d", "h", "m(?!s)", "s",
                                                                      "ms")))
_UNIT_SECONDS = (86400, 3600, 60, 1, 0.001)


def parse_duration(text: str, flag: str, minimum: float | None = None) -> float:
    """A duration flag's value in seconds: ``90``, ``90s``, ``5m``, ``1.5h``, ``1h30m``, ``2d``,
    ``250ms``.

    Every duration flag (``--since``, ``--timeout``, ``--interval``, ``--max-downtime``,
    ``--window``) takes this one grammar: a plain number is seconds; otherwise d, h, m, s, ms
    parts, in that order. Negative numbers, nan and inf are not durations.

    Raises:
        UsageError: anything else, or less than ``minimum`` seconds.
    """
    t = str(text).strip().lower()
    m = _DURATION.fullmatch(t)
    if re.fullmatch(_NUMBER, t):
        seconds = float(t)
    elif t and m:
        seconds = sum(float(x) * s for x, s in zip(m.groups(), _UNIT_SECONDS, strict=True) if x)
    else:
        raise UsageError(f"{flag} {shown(text)} is not a duration",
                         hint=f"e.g. {flag} 90s, 5m or 1h30m")
    if minimum is not None and seconds < minimum:
        raise UsageError(f"{flag} {shown(text)} is below the minimum of {minimum:g} s",
                         hint=f"e.g. {flag} {max(minimum, 2):g}s")
    return seconds


def check_output(output: str, choices: tuple[str, ...]) -> None:
    """Validate ``-o/--output`` (by hand: ``typer.Choice`` words its error differently).

    Raises:
        UsageError: ``output`` is not one of ``choices``.
    """
    if output not in choices:
        raise UsageError(f"--output {shown(output)} is not {' or '.join(choices)}",
                         hint="use " + " or ".join(f"-o {c}" for c in choices))


MAX_DURATION = 30 * 86400.0  # longer waits overflow sleeps and timers; no run needs them


def parse_duration_in(text: str, flag: str, *, allow_zero: bool = False) -> float:
    """:func:`parse_duration`, then bounded: more than 0 (or 0 with ``allow_zero``), at most 30d.

    Raises:
        UsageError: not a duration, or out of range (nan and inf included).
    """
    secs = parse_duration(text, flag)
    low_ok = secs >= 0 if allow_zero else secs > 0
    if not (low_ok and secs <= MAX_DURATION):  # False for nan too
        low = "0 or more" if allow_zero else "more than 0"
        raise UsageError(f"{flag} {shown(text)} is out of range: {low}, at most 30d",
                         hint=f"e.g. {flag} 90s, 5m or 1h30m")
    return secs


def check_window(window: float | None) -> None:
    """Validate ``--window`` (seconds per goodput window): finite and more than 0, or None
    (the chart picks one).

    Raises:
        UsageError: 0, negative, nan or inf.
    """
    if window is not None and not (0 < window <= MAX_DURATION):  # False for nan too
        raise UsageError(f"--window {shown(window)} is out of range: more than 0 seconds, at "
                         "most 30d",
                         hint="e.g. --window 60")


RunNameArg = Annotated[str | None, typer.Argument(
    help="Workload name, or --workload NAME (not needed with --events).")]
"""The workload a measuring command reads (``advise``, ``forecast``)."""
EventsFileOpt = Annotated[Path | None, typer.Option(
    "--events", help="Read this events.jsonl instead of asking the backend.")]
"""An events file read in place of the workload's (the run may be gone)."""
