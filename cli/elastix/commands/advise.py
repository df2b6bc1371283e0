"""``elastix workload advise``: the checkpoint and snapshot periods a run's own measurements call
for (:mod:`elastix.measure.advise`), with the expected goodput of today's and of the advised."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from elastix.backends import Target, get_backend
from elastix.commands.options import (
    EventsFileOpt,
    RunNameArg,
    check_output,
    output_option,
    parse_duration_in,
    with_target,
    with_workload_option,
)
from elastix.errors import UsageError

OUTPUTS = ("table", "json")
MAX_RUN_FILE = 1 << 30


def load_run(name: str | None, events_file: Path | None, target: Target, command: str
             ) -> tuple[list[Any], list[dict[str, Any]] | None, str]:
    """The run's events, its raw records when it has an events file (for its config), and
    where they came from; ``command`` names the asking one in the missing-NAME hint."""
    from elastix.measure.events import events_from_records, events_of, log_note, with_skipped
    from elastix.protocol import eventspec
    from elastix.workload.spec import read_user_text

    if events_file is not None:
        text = read_user_text(events_file, "events file", "--events",
                              "pass the events.jsonl the trainer wrote", limit=MAX_RUN_FILE)
        split = eventspec.split_jsonl(text)
        if split.bad:
            from elastix.errors import EventsUnreadable

            raise EventsUnreadable("events file", split.bad, split.total)
        events = with_skipped(events_from_records(split.records), len(split.skipped),
                              split.skipped_note())
        return events, split.records, f"events {events_file}{log_note(events)}"
    if not name:
        raise UsageError("missing workload NAME", hint=f"elastix workload {command} NAME (or "
                         "--events FILE)")
    got = get_backend(target).trainer_events(name)
    events, source = events_of(got)
    return events, got.records if got is not None else None, source


@with_target
@with_workload_option(required=False)
def advise(
    target: Target,
    name: RunNameArg = None,
    events_file: EventsFileOpt = None,
    mtbf: Annotated[str | None, typer.Option(
        "--mtbf", help="Mean time between slice failures of your fleet (6h, 2d) [the "
                       "failures this run saw].")] = None,
    head_mtbf: Annotated[str | None, typer.Option(
        "--head-mtbf", help="Mean time between controller failures, which only a checkpoint "
                            "recovers [the restarts this run saw].")] = None,
    output: Annotated[str, output_option(OUTPUTS, "table or json.")] = "table",
    plot: Annotated[Path | None, typer.Option(
        "--plot", help="Draw the expected badput against the period to FILE.png.")] = None,
) -> None:
    """Checkpoint and snapshot periods from a run's measurements (Young-Daly), with the
    expected goodput at today's and at the advised periods."""
    from elastix.measure.advise import advise as compute
    from elastix.measure.advise import measure

    check_output(output, OUTPUTS)
    m_f = parse_duration_in(mtbf, "--mtbf") if mtbf is not None else None
    h_f = parse_duration_in(head_mtbf, "--head-mtbf") if head_mtbf is not None else None
    if plot:
        from elastix.views.plot import check_plot_path

        check_plot_path(str(plot))
    events, records, source = load_run(name, events_file, target, "advise")
    if not events:
        raise UsageError(f"no trainer events found ({source})",
                         hint="has the trainer started? see docs/events.md")
    advice = compute(measure(events, records), m_f, h_f)
    if plot:
        from elastix.measure.advise import curve
        from elastix.views.plot import plot_advice

        plot_advice(advice, *curve(advice), str(plot))
    if output == "json":
        typer.echo(json.dumps({"source": source, **advice.to_json()}, indent=2))
        return
    from elastix.views.console import console
    from elastix.views.measurement import print_advice

    print_advice(console(), advice, source)
    if plot:
        console().print(f"wrote {plot}")
