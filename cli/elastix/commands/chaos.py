"""`elastix chaos` commands: kill-worker and run (registered in main).

Both measure through one driver and print one report (:mod:`elastix.measure.report`): the same
JSON, bounds, JUnit and Markdown files, and exit codes (:class:`elastix.errors.ExitCode`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from elastix.backends import Target, get_backend
from elastix.commands.options import (
    GoodputWindow,
    WorkloadName,
    check_output,
    check_window,
    output_option,
    parse_duration_in,
    with_target,
    with_workload_option,
)
from elastix.errors import EXIT_CODES_HELP, BackendError, NotFoundError, UsageError

if TYPE_CHECKING:
    from elastix.measure.report import Bounds, ChaosReport

KILL_OUTPUTS = ("text", "json")
RUN_OUTPUTS = ("table", "json")


def _complete_mode(incomplete: str) -> list[str]:
    from elastix.measure.chaos import MODES  # imported when completing, not for --help

    return [m for m in MODES if m.startswith(incomplete)]


MaxDowntime = Annotated[str | None, typer.Option(
    "--max-downtime", help="Fail (exit 3) if a recovery takes longer, kill to the next step "
                           "(e.g. 3m, 500ms).")]
MaxStepsLost = Annotated[int | None, typer.Option(
    "--max-steps-lost", help="Fail (exit 3) if a recovery loses more steps.")]
Junit = Annotated[str | None, typer.Option(
    "--junit", help="Write a JUnit XML report to FILE: one testcase per kill, a failure per "
                    "missed bound.")]
Summary = Annotated[str | None, typer.Option(
    "--summary", help="Append a Markdown report to FILE (e.g. $GITHUB_STEP_SUMMARY).")]


def _bounds(max_downtime: str | None, max_steps_lost: int | None, timeout: str) -> Bounds:
    """The bounds from their flags (exit 2 on a bad one, before anything is killed)."""
    from elastix.measure.report import Bounds

    if max_steps_lost is not None and max_steps_lost < 0:
        raise UsageError(f"--max-steps-lost {max_steps_lost} is out of range: 0 or more",
                         hint="e.g. --max-steps-lost 0 (no step may be lost)")
    down = parse_duration_in(max_downtime, "--max-downtime") if max_downtime is not None \
        else None
    return Bounds(down, max_steps_lost, parse_duration_in(timeout, "--timeout"))


def _check_files(junit: str | None, summary: str | None, plot: str | None) -> None:
    from elastix.views.report import check_report_path

    if junit is not None:
        check_report_path(junit, "--junit")
    if summary is not None:
        check_report_path(summary, "--summary")
    if plot:
        from elastix.views.plot import check_plot_path

        check_plot_path(plot)


def _write_files(res: ChaosReport, planned: int, junit: str | None,
                 summary: str | None) -> None:
    from elastix.views.report import junit_xml, summary_markdown, write_report

    if junit is not None:
        write_report(junit, junit_xml(res, planned))
        _wrote(junit, "JUnit report")
    if summary is not None:  # appended: $GITHUB_STEP_SUMMARY collects every step's
        with open(summary, "a", encoding="utf-8") as f:
            f.write(summary_markdown(res, planned))
        _wrote(summary, "Markdown summary (appended)")


def _wrote_none(path: str) -> None:
    import sys

    sys.stderr.write(f"elastix: no plot written to {path}: no measured recovery or trainer "
                     "events to draw\n")


def _wrote(path: str, what: str) -> None:
    """Say where a file went (on stderr: stdout may be the JSON report)."""
    import sys

    sys.stderr.write(f"elastix: wrote {what} to {path}\n")


def _finish(res: ChaosReport, name: str, what: str) -> None:
    """The exit after the report was printed: Ctrl-C, a runtime error, or the outcome."""
    from elastix.measure.report import ChaosFailed

    if res.interrupted:
        raise KeyboardInterrupt
    if res.error is not None:
        raise BackendError(f"{what} stopped: {res.error}", hint=_where_to_look(name))
    if not res.ok:
        n = len(res.violations)
        missed = f"; {n} bound{'s' if n != 1 else ''} missed" if n else ""
        raise ChaosFailed(res.outcome, f"{what}: {res.stopped}{missed}",
                          hint="; ".join(v.text() for v in res.violations)
                          or _where_to_look(name))


@with_target
@with_workload_option
def kill_worker(
    target: Target,
    name: WorkloadName,
    slice_: Annotated[int | None, typer.Option(
        "--slice", help="Kill a worker of this slice [random].")] = None,
    host: Annotated[int | None, typer.Option(
        "--host", help="Kill this host of --slice [random].")] = None,
    seed: Annotated[int | None, typer.Option(
        "--seed", help="Seed of the random choice (reproducible).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Show which pod would be killed.")] = False,
    output: Annotated[str, output_option(
        (*KILL_OUTPUTS, "table"), "text or json; with --measure, table or json.")] = "text",
    measure: Annotated[bool, typer.Option(
        "--measure", help="Wait for the recovery and report its timeline, downtime and steps "
                          "lost (the report chaos run prints).")] = False,
    timeout: Annotated[str, typer.Option(
        "--timeout", help="--measure: give up on the recovery after this.")] = "10m",
    plot: Annotated[str | None, typer.Option(
        "--plot", help="--measure: draw the timeline to FILE.png.")] = None,
    max_downtime: MaxDowntime = None,
    max_steps_lost: MaxStepsLost = None,
    junit: Junit = None,
    summary: Summary = None,
) -> None:
    """Delete one worker pod with grace period 0 (SIGKILL, like a hardware fault)."""
    import json

    from elastix.measure.chaos import check_killable
    from elastix.views.status import kill_json, kill_line

    reporting = [f for f, v in (("--plot", plot), ("--max-downtime", max_downtime),
                                ("--max-steps-lost", max_steps_lost), ("--junit", junit),
                                ("--summary", summary)) if v is not None]
    measuring = measure or bool(reporting)
    if not (measuring and output == "table"):  # --measure prints a table: it takes -o table
        check_output(output, KILL_OUTPUTS)
    if measuring and dry_run:
        raise UsageError(f"{'--measure' if measure else reporting[0]} cannot be combined with "
                         "--dry-run", hint="drop --dry-run to kill and measure")
    if host is not None and slice_ is None:
        raise UsageError("--host needs --slice", hint="e.g. --slice 0 --host 1")
    if measuring:
        bounds = _bounds(max_downtime, max_steps_lost, timeout)
        _check_files(junit, summary, plot)
        _measured_kill(target, name, slice_=slice_, host=host, seed=seed, output=output,
                       bounds=bounds, plot=plot, junit=junit, summary=summary)
        return
    backend = get_backend(target)
    try:
        rec = backend.kill_worker(name, slice=slice_, host=host, seed=seed, dry_run=dry_run)
    except BackendError as err:
        if isinstance(err, NotFoundError):
            raise
        check_killable(backend, name)  # a completed workload: exit 5, as chaos run gives
        raise
    typer.echo(json.dumps(kill_json(rec)) if output == "json" else kill_line(rec))


def _measured_kill(target: Target, name: str, *, slice_: int | None, host: int | None,
                   seed: int | None, output: str, bounds: Bounds, plot: str | None,
                   junit: str | None, summary: str | None) -> None:
    """``kill-worker --measure``: a chaos run of one pinned kill, reported as chaos run is.

    Every input was checked before; once the kill is made its measurement is printed (and
    the files written) whatever follows.

    Raises:
        ChaosFailed: exit 3 a bound missed or no recovery within --timeout, 4 the workload
            died, 5 it completed before recovering.
    """
    import json

    from elastix.measure.chaos import run_soak
    from elastix.views.console import console
    from elastix.views.measurement import print_kill, print_verdict

    backend = get_backend(target)
    res = run_soak(backend, name, kills=1, interval=0, bounds=bounds,
                   killer=lambda: [backend.kill_worker(name, slice=slice_, host=host,
                                                       seed=seed)])
    if output == "json":
        typer.echo(json.dumps(res.to_json(), indent=2))
    else:
        for m in res.measurements:
            print_kill(console(), m)
        print_verdict(console(), res)
    _write_files(res, 1, junit, summary)
    m = res.measurements[0] if res.measurements else None
    if plot and m is not None and m.recovery is not None and m.recovery.phases():
        from elastix.views.plot import plot_recovery

        plot_recovery(res.events, m.recovery, plot)
        _wrote(plot, "recovery timeline")
    elif plot:
        _wrote_none(plot)
    _finish(res, name, "kill-worker --measure")


@with_target
@with_workload_option
def run(
    target: Target,
    name: WorkloadName,
    kills: Annotated[int, typer.Option("--kills", help="How many kills.")] = 3,
    interval: Annotated[str, typer.Option(
        "--interval", help="Time from one kill to the next (90s, 2m, 1h); the first kill "
                           "waits until training is stepping.")] = "2m",
    mode: Annotated[str, typer.Option(
        "--mode", help="random (any worker), host (one chosen host) or slice (every host of "
                       "one slice).", autocompletion=_complete_mode)] = "random",
    seed: Annotated[int | None, typer.Option(
        "--seed", help="Seed for choosing victims.")] = None,
    max_downtime: MaxDowntime = None,
    max_steps_lost: MaxStepsLost = None,
    timeout: Annotated[str, typer.Option(
        "--timeout", help="Give up on a recovery after this.")] = "10m",
    output: Annotated[str, output_option(RUN_OUTPUTS, "table or json.")] = "table",
    plot: Annotated[str | None, typer.Option(
        "--plot", help="Write goodput over time to FILE.png.")] = None,
    window: GoodputWindow = None,
    junit: Junit = None,
    summary: Summary = None,
) -> None:
    """Chaos experiment: kill workers at intervals, measure every recovery and the goodput."""
    import json

    from elastix.measure.chaos import MODES, KillMeasurement, run_soak
    from elastix.views.console import console
    from elastix.views.measurement import print_kill, print_soak

    # Every input is checked before the first kill.
    check_output(output, RUN_OUTPUTS)
    if mode not in MODES:
        raise UsageError(f"--mode {mode!r} is not {', '.join(MODES)}",
                         hint="use --mode random, --mode host or --mode slice")
    if kills < 1:
        raise UsageError(f"--kills {kills} is out of range: 1 or more", hint="e.g. --kills 3")
    bounds = _bounds(max_downtime, max_steps_lost, timeout)
    every = parse_duration_in(interval, "--interval", allow_zero=True)
    check_window(window)
    _check_files(junit, summary, plot)
    backend = get_backend(target)
    err = console(stderr=True)

    def progress(i: int, m: KillMeasurement) -> None:
        print_kill(err, m, title=f"kill {i}/{kills}")

    backend.status(name)  # a wrong name: one error line, before anything else is said
    err.print(f"[dim]{name}: each kill waits until it is stepping (a step after its first "
              f"save); {kills} kill{'s' if kills != 1 else ''}, {interval} apart[/]")
    res = run_soak(backend, name, kills=kills, interval=every, mode=mode, seed=seed,
                   bounds=bounds, on_kill=progress)
    if output == "json":
        typer.echo(json.dumps(res.to_json(), indent=2))
    else:
        print_soak(console(), res)
    _write_files(res, kills, junit, summary)
    if plot and res.goodput.end > res.goodput.start:
        from elastix.views.plot import plot_goodput

        plot_goodput(res.goodput, res.events, plot, window_seconds=window)
        _wrote(plot, "goodput chart")
    elif plot:
        _wrote_none(plot)
    _finish(res, name, "chaos run")


run.__doc__ = f"{run.__doc__}\n\n{EXIT_CODES_HELP} Whatever the code, every recovery " \
    "measured is printed (with -o json: the goodput so far and why the run stopped) and " \
    "--plot, --junit and --summary are written."
kill_worker.__doc__ = (
    f"{kill_worker.__doc__}\n\nWith --measure (or any of its report flags) it is a chaos run "
    f"of this one kill, with the same report. {EXIT_CODES_HELP}")


def _where_to_look(name: str) -> str:
    """The hint when a workload did not recover: its log and its status."""
    return f"see elastix logs {name} and elastix workload status {name}"
