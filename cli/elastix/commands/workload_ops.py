"""`elastix workload list | status | delete` (registered on ``elastix.commands.workload.app``)."""

from __future__ import annotations

import json

import typer

from elastix.backends import Target, get_backend
from elastix.commands.options import with_target
from elastix.commands.workload import app


def _check_output(output: str) -> None:
    from elastix.errors import UsageError

    if output not in ("table", "json"):
        raise UsageError(f"--output {output!r} is not table or json", hint="use -o table or -o json")


def _watch(render, interval: float) -> None:
    """Redraw ``render()`` every ``interval`` seconds until Ctrl-C (exit 130 by the entry point).

    On a terminal the frame is redrawn in place; piped, each frame is printed after the last.
    """
    import time

    from rich.live import Live

    from elastix.views.status import console as make_console

    console = make_console()
    if not console.is_terminal:
        while True:
            console.print(render())
            console.print()
            console.file.flush()
            time.sleep(interval)  # a refresh period, not synchronisation
    with Live(render(), console=console, auto_refresh=False) as live:
        while True:
            time.sleep(interval)
            live.update(render(), refresh=True)


@app.command("list")
@with_target
def list_(
    target: Target,
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
    watch: bool = typer.Option(False, "--watch", "-w", help="Refresh until Ctrl-C."),
    interval: float = typer.Option(2.0, "--interval", help="Seconds between refreshes."),
) -> None:
    """List workloads: state, slices ready, pods, restarts, head, age."""
    from elastix.views import status as display
    _check_output(output)
    b = get_backend(target)
    if output == "json":
        typer.echo(json.dumps([s.to_json() for s in b.list()], indent=2))
        return

    def render():
        items = b.list()
        if not items:
            from rich.text import Text

            return Text(f"no {b.name} workloads in {b.where()}")
        return display.workloads_table(items)

    if watch:
        _watch(render, interval)
    display.console().print(render())


@app.command("status")
@with_target
def status(
    target: Target,
    name: str = typer.Argument(..., help="Workload name."),
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
    watch: bool = typer.Option(False, "--watch", "-w", help="Refresh until Ctrl-C."),
    interval: float = typer.Option(2.0, "--interval", help="Seconds between refreshes."),
) -> None:
    """One workload: head, per-slice pods and phases, restarts, and why it is stuck."""
    from elastix.views import status as display
    _check_output(output)
    b = get_backend(target)
    if output == "json":
        typer.echo(json.dumps(b.status(name).to_json(), indent=2))
        return
    if watch:
        _watch(lambda: display.status_renderable(b.status(name)), interval)
    display.console().print(display.status_renderable(b.status(name)))


@app.command("delete")
@with_target
def delete(
    target: Target,
    name: str = typer.Argument(..., help="Workload name."),
    wait: bool = typer.Option(False, "--wait", help="Return only once every pod is gone."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds to wait with --wait."),
) -> None:
    """Delete a workload (its JobSet, Jobs and pods)."""
    from rich.console import Console

    b = get_backend(target)
    b.delete(name, wait=wait, timeout=timeout)
    gone = "deleted; every pod is gone" if wait else "deletion requested"
    Console(stderr=True, highlight=False).print(f"workload [bold]{name}[/]: {gone}")
