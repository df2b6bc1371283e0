"""`elastix logs`: stream a workload's log (the head's main container by default)."""

from __future__ import annotations

import typer

from elastix.backends import Target, get_backend
from elastix.commands.options import parse_duration, with_target


@with_target
def logs_command(
    target: Target,
    name: str = typer.Argument(..., help="Workload name."),
    follow: bool = typer.Option(False, "--follow", "-f",
                                help="Keep streaming, across head pod restarts, until Ctrl-C."),
    container: str = typer.Option(None, "--container", "-c",
                                  help="Container: the main one by default; pathways-proxy or "
                                       "pathways-rm on the head."),
    slice_: int = typer.Option(None, "--slice", help="A worker of this slice instead of the head."),
    host: int = typer.Option(None, "--host", help="Host (pod index) within --slice [0]."),
    since: str = typer.Option(None, "--since", help="Only lines newer than this (30s, 5m, 1h)."),
    tail: int = typer.Option(None, "--tail", help="Only the last N lines to start with."),
) -> None:
    """Stream a workload's log; with -f, follow the head across restarts (says so when it does)."""
    import math
    import sys

    from elastix.backends.base import LogOptions
    from elastix.errors import UsageError

    if tail is not None and tail < 0:
        raise UsageError("--tail must be 0 or more")
    since_seconds = math.ceil(parse_duration(since, "--since")) if since else None
    opts = LogOptions(container=container, slice=slice_, host=host, follow=follow,
                      since_seconds=since_seconds, tail_lines=tail)
    b = get_backend(target)
    out, err = sys.stdout, sys.stderr
    for event in b.logs(name, opts):
        if event.notice:
            err.write(f"elastix: {event.text}\n")
            err.flush()
        else:
            out.write(event.text + "\n")
            out.flush()
