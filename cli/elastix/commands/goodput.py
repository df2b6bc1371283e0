"""`elastix workload goodput NAME`: productive step time over wall time, and badput by cause."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from elastix.backends import Target, get_backend
from elastix.commands.options import with_target
from elastix.commands.workload import app


@app.command("goodput")
@with_target
def goodput_command(
    target: Target,
    name: str = typer.Argument(None, help="Workload name (not needed with --events/--log)."),
    events_file: Path = typer.Option(None, "--events", help="Read this events.jsonl instead "
                                     "of asking the backend."),
    log_file: Path = typer.Option(None, "--log", help="Read this head log instead."),
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
    plot: Path = typer.Option(None, "--plot", help="Write goodput over time to FILE.png."),
    window: float = typer.Option(60.0, "--window", help="Seconds per goodput window (--plot)."),
) -> None:
    """Goodput of a run and where the rest went (detection, slices, restore, re-done steps...)."""
    from rich.console import Console

    from elastix.errors import UsageError
    from elastix.measure.goodput import goodput
    from elastix.views.measurement import print_goodput

    if output not in ("table", "json"):
        raise UsageError(f"--output {output!r} is not table or json", hint="use -o table|json")
    if window <= 0:
        raise UsageError("--window must be > 0 seconds")
    events, source = _load(name, events_file, log_file, target)
    if not events:
        raise UsageError(f"no trainer events found ({source})",
                         hint="has the trainer started? see docs/events.md")
    rep = goodput(events)
    if plot:
        from elastix.views.plot import plot_goodput

        plot_goodput(rep, events, str(plot), window_seconds=window)
    if output == "json":
        d = rep.to_json()
        d["source"] = source
        d["series"] = [{"seconds": x, "window_goodput": w, "cumulative_goodput": c}
                       for x, w, c in rep.series(window)]
        typer.echo(json.dumps(d, indent=2))
        return
    console = Console(highlight=False)
    print_goodput(console, rep, source)
    if plot:
        console.print(f"wrote {plot}")


def _load(name: str | None, events_file: Path | None, log_file: Path | None,
          target: Target):
    from elastix.errors import UsageError
    from elastix.measure.events import events_from_jsonl, events_from_log

    if events_file and log_file:
        raise UsageError("give --events or --log, not both")
    path = events_file or log_file
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as err:
            raise UsageError(f"cannot read {path}: {err.strerror or err}") from None
        if events_file:
            return events_from_jsonl(text), f"events {path}"
        return events_from_log(text.splitlines()), f"log {path}"
    if not name:
        raise UsageError("missing workload NAME", hint="elastix workload goodput NAME "
                         "(or --events FILE / --log FILE)")
    from elastix.measure.chaos import read_stream

    return read_stream(get_backend(target), name)
