"""`elastix workload wait` (registered in main): block until a workload is running, stepping,
completed or deleted, as CI steps need between create and a chaos run."""

from __future__ import annotations

from typing import Annotated

import typer

from elastix.backends import Target, get_backend
from elastix.commands import xpk
from elastix.commands.options import (
    WorkloadName,
    complete_from,
    duration_option,
    with_target,
    with_workload_option,
)
from elastix.errors import EXIT_CODES_HELP, UsageError

# elastix.measure.wait's, here so that --help and completion import no measurement code
CONDITIONS = ("running", "stepping", "completed", "deleted")


@with_target
@with_workload_option
def wait(
    target: Target,
    name: WorkloadName,
    for_: Annotated[str | None, typer.Option(
        "--for", autocompletion=complete_from(CONDITIONS),
        help="running (the workload's pods are up), stepping (a training step "
                      "completed after the first committed snapshot or checkpoint: a kill from "
                      "then on measures a steady-state recovery), completed, or deleted "
                      "(required; kubectl's delete and condition=Complete are taken too).")
    ] = None,
    timeout: Annotated[float, duration_option(
        "--timeout", help="Give up after this (exit 6), e.g. 90s or 10m.")] = 600.0,
) -> None:
    """Wait until a workload is running, stepping, completed or deleted (as kubectl wait)."""
    from elastix.measure.wait import wait_for
    from elastix.views.console import console
    from elastix.views.waiting import WaitLine

    if for_ is None:
        raise UsageError("missing --for", hint=f"elastix workload wait {name} --for stepping")
    for_ = xpk.kubectl_for(for_)
    if for_ not in CONDITIONS:
        raise UsageError(f"--for {for_!r} is not {', '.join(CONDITIONS)}",
                         hint="e.g. --for stepping (training, after its first save)")
    backend = get_backend(target)
    err = console(stderr=True)
    with WaitLine(err, f"waiting for {name} to be {for_}") as line:
        wait_for(backend, name, for_, timeout=timeout, report=line)
    err.print(f"workload [bold]{name}[/]: {for_}")


wait.__doc__ = f"{wait.__doc__}\n\n{EXIT_CODES_HELP}"
