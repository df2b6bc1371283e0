"""`elastix logs`: stream a workload's log (the head's main container by default)."""

from __future__ import annotations

from typing import Annotated

import typer

from elastix.backends import Target, get_backend
from elastix.commands.options import (
    WorkloadName,
    complete_slice,
    parse_duration_in,
    with_target,
    with_workload_option,
)
from elastix.errors import UsageError


@with_target
@with_workload_option
def logs(
    target: Target,
    name: WorkloadName,
    follow: Annotated[bool, typer.Option(
        "--follow", "-f", help="Keep streaming, across head pod restarts, until Ctrl-C.")] = False,
    container: Annotated[str | None, typer.Option(
        "--container", "-c", help="Container: the main one by default; pathways-proxy or "
                                  "pathways-rm on the head.")] = None,
    slice_: Annotated[int | None, typer.Option(
        "--slice", help="A worker of this slice instead of the head.",
        autocompletion=complete_slice)] = None,
    host: Annotated[int | None, typer.Option(
        "--host", help="Host (pod index) within --slice [0].")] = None,
    since: Annotated[str | None, typer.Option(
        "--since", help="Only lines newer than this (30s, 5m, 1h).")] = None,
    tail: Annotated[int | None, typer.Option(
        "--tail", help="Only the last N lines to start with (-1: every line, as kubectl).")
    ] = None,
    previous: Annotated[bool, typer.Option(
        "--previous", "-p", help="The previous instance of the container (as kubectl): after a "
                                 "restart, the attempt before the current one.")] = False,
    timestamps: Annotated[bool, typer.Option(
        "--timestamps", help="Start each line with the time the log API recorded it (RFC3339, "
                             "as kubectl logs --timestamps; GKE only).")] = False,
) -> None:
    """Stream a workload's log; with -f, follow the head across restarts (says so when it does)."""
    import math
    import sys

    from elastix.backends.base import LogOptions

    if tail == -1:
        tail = None  # kubectl's spelling of "every line"
    if tail is not None and tail < 0:
        raise UsageError(f"--tail {tail} is out of range: 0 or more, or -1 for every line",
                         hint="e.g. --tail 100")
    if previous and follow:
        raise UsageError("--previous cannot be combined with --follow",
                         hint="a previous instance has ended: drop -f")
    since_seconds = math.ceil(parse_duration_in(since, "--since")) if since else None
    opts = LogOptions(container=container, slice=slice_, host=host, follow=follow,
                      since_seconds=since_seconds, tail_lines=tail, previous=previous,
                      timestamps=timestamps)
    out, err = sys.stdout, sys.stderr
    for event in get_backend(target).logs(name, opts):
        if event.notice:
            err.write(f"elastix: {event.text}\n")
            err.flush()
        else:
            out.write(event.text + "\n")
            out.flush()
