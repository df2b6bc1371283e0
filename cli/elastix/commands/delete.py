"""`elastix workload delete` (registered in main): by name, several names, or a label selector,
as kubectl deletes."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from elastix.backends import Target, choose_backend, get_backend
from elastix.commands.options import (
    Selector,
    WorkloadOpt,
    complete_workload_name,
    duration_option,
    one_name,
    with_target,
)
from elastix.errors import UsageError


@with_target
def delete(
    target: Target,
    names: Annotated[list[str] | None, typer.Argument(
        help="Workload names (or --workload NAME, or -l SELECTOR for every match).",
        show_default=False, autocompletion=complete_workload_name)] = None,
    workload: WorkloadOpt = None,
    selector: Selector = None,
    wait: Annotated[bool, typer.Option(
        "--wait", help="Return only once every pod is gone.")] = False,
    timeout: Annotated[float, duration_option(
        "--timeout", help="How long to wait with --wait, e.g. 300s or 5m.")] = 300.0,
    delete_data: Annotated[bool, typer.Option(
        "--delete-data", help="Local backend: also delete the workload's kept data "
                              "(the default job's checkpoints), also once the workload itself "
                              "is deleted; never the compilation cache its state dir's "
                              "workloads share (<state-dir>/.cache/jax).")] = False,
    ignore_not_found: Annotated[bool, typer.Option(
        "--ignore-not-found", help="A workload that does not exist is not an error (exit 0), "
                                   "as kubectl's flag: for cleanup steps.")] = False,
    foreign: Annotated[bool, typer.Option(
        "--foreign", help="GKE: also delete the named Pathways JobSets another tool made (xpk, "
                          "gcluster, your own YAML), which are refused without it; by NAME "
                          "only, never with -l.")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print what would be deleted (on GKE the requests); send none, "
                          "offline.")] = False,
) -> None:
    """Delete workloads (each one's JobSet, Jobs and pods), by name or by label (-l).

    Several names are all checked first: if one does not exist, nothing is deleted. Only what
    elastix made is deleted (its labels say so); a JobSet another tool made only with
    --foreign.
    """
    from elastix.views.console import console

    err = console(stderr=True)
    if foreign and selector is not None:
        raise UsageError("--foreign deletes JobSets named one by one, not by -l",
                         hint="name each: elastix workload delete NAME [NAME...] --foreign")
    names = _names(names or [], workload, selector)
    if dry_run:
        _dry_run(target, names, selector, wait=wait, delete_data=delete_data)
        return
    backend = get_backend(target)
    chosen = _delete_targets(backend, names, selector, ignore_not_found)
    if chosen is None:
        err.print(f"no {backend.name} workloads in {backend.where()} match -l {selector}")
        return
    for name in chosen:
        _delete_one(backend, name, err, wait=wait, timeout=timeout, delete_data=delete_data,
                    ignore_not_found=ignore_not_found, foreign=foreign)


def _names(names: list[str], workload: str | None, selector: str | None) -> list[str]:
    """The names given (each once), or none with a selector.

    Raises:
        UsageError: names and a selector both given, or neither.
    """
    from elastix.workload.selector import parse

    if workload is not None:
        one_name(names[0] if names else None, workload, flag="--workload")  # both: exit 2
        names = [workload]
    if selector is not None:
        if names:
            raise UsageError("give workload NAMEs or -l SELECTOR, not both",
                             hint="elastix workload delete NAME [NAME...], or "
                                  "elastix workload delete -l key=value")
        parse(selector)  # a bad selector: exit 2, before anything
        return []
    if not names:
        one_name(None, None, flag="--workload")  # the same missing-NAME line as every command
    return list(dict.fromkeys(names))  # a name given twice is deleted once


def _dry_run(target: Target, names: list[str], selector: str | None, *, wait: bool,
             delete_data: bool) -> None:
    """``delete --dry-run``: what would be deleted, offline (on GKE the requests in order)."""
    from elastix.commands import dry_runs

    if choose_backend(target) == "local":
        lines = dry_runs.delete_local(get_backend(target), names, selector,
                                      delete_data=delete_data)
    else:
        lines = dry_runs.delete_gke(target, names, selector, wait=wait)
    for line in lines:
        typer.echo(line)


def _delete_targets(backend: Any, names: list[str], selector: str | None,
                    ignore_not_found: bool) -> list[str] | None:
    """The names ``delete`` acts on (None: a selector that matches none), all checked first.

    Raises:
        UsageError: a name of several that does not exist (without ``--ignore-not-found``):
            nothing is deleted then.
    """
    from elastix.workload.selector import parse

    if selector is not None:
        return [w.name for w in backend.list(parse(selector))] or None
    if len(names) > 1 and not ignore_not_found:
        missing = [n for n in names if not backend.exists(n)]
        if missing:
            raise UsageError(f"workload{'s' if len(missing) > 1 else ''} not found in "
                             f"{backend.where()}: {', '.join(missing)}; nothing was deleted",
                             hint="check the names with: elastix workload list "
                                  "(or pass --ignore-not-found to delete the others)")
    return names


def _delete_one(backend: Any, name: str, err: Any, *, wait: bool, timeout: float,
                delete_data: bool, ignore_not_found: bool, foreign: bool = False) -> None:
    import contextlib

    from elastix.errors import NotFoundError
    from elastix.measure.progress import wait_phase
    from elastix.views.waiting import WaitLine

    try:
        waiting = wait and backend.exists(name)  # a missing one: its error alone
        with WaitLine(err, f"deleting {name}") if waiting else contextlib.nullcontext() as line:
            if line is not None:  # the backend's wait is one call: its line ticks on a terminal
                line.update(wait_phase(None, []))
            note = backend.delete(name, wait=wait, timeout=timeout, delete_data=delete_data,
                                  foreign=foreign)
    except NotFoundError as e:
        if not ignore_not_found:
            raise
        err.print(f"workload [bold]{name}[/]: not found, nothing to delete ({e.message})")
        return
    if note and note.startswith("only its "):  # the workload was gone already (its data,
        # or on GKE its head's account left by a failed create)
        err.print(f"workload [bold]{name}[/]: {note}")
        return
    gone = "deleted; every pod is gone" if wait else "deletion requested"
    err.print(f"workload [bold]{name}[/]: {gone}")
    if note:
        err.print(f"workload [bold]{name}[/]: {note}")
