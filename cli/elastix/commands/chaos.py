"""`elastix chaos` commands: kill-worker and run (registered in main)."""

from __future__ import annotations

from typing import Annotated

import typer

from elastix.backends import Target, get_backend
from elastix.commands.options import (
    GoodputWindow,
    WorkloadName,
    check_output,
    check_window,
    parse_duration_in,
    with_target,
    with_workload_option,
)
from elastix.errors import BackendError, UsageError


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
    output: Annotated[str, typer.Option("--output", "-o", help="text or json.")] = "text",
    measure: Annotated[bool, typer.Option(
        "--measure", help="Wait for the recovery and report its timeline, downtime and steps "
                          "lost.")] = False,
    timeout: Annotated[str, typer.Option(
        "--timeout", help="--measure: give up after this.")] = "10m",
    plot: Annotated[str | None, typer.Option(
        "--plot", help="--measure: draw the timeline to FILE.png.")] = None,
) -> None:
    """Delete one worker pod with grace period 0 (SIGKILL, like a hardware fault)."""
    import json

    from elastix.views.status import kill_json, kill_line

    measuring = measure or bool(plot)
    if not (measuring and output == "table"):  # --measure prints a table: it takes -o table
        check_output(output, ("text", "json"))
    if measuring and dry_run:
        raise UsageError("--measure cannot be combined with --dry-run")
    if host is not None and slice_ is None:
        raise UsageError("--host needs --slice", hint="e.g. --slice 0 --host 1")
    if measuring:
        _measured_kill(target, name, slice_=slice_, host=host, seed=seed, output=output,
                       timeout=timeout, plot=plot)
        return
    rec = get_backend(target).kill_worker(name, slice=slice_, host=host, seed=seed,
                                          dry_run=dry_run)
    typer.echo(json.dumps(kill_json(rec)) if output == "json" else kill_line(rec))


def _measured_kill(target: Target, name: str, *, slice_: int | None, host: int | None,
                   seed: int | None, output: str, timeout: str, plot: str | None) -> None:
    """``kill-worker --measure``: kill, wait for the recovery, print its timeline.

    Everything that can be checked is checked before the kill; once the kill is made, its
    measurement is printed whatever follows (the plot is drawn after it).

    Raises:
        ChaosFailed: no recovery (exit 3 timed out, 4 the workload died, 5 it completed).
    """
    import json

    from elastix.measure.chaos import ChaosFailed, Outcome, measure_kill, read_stream
    from elastix.views.console import console
    from elastix.views.measurement import print_kill

    secs = parse_duration_in(timeout, "--timeout")
    if plot:
        from elastix.views.plot import check_plot_path

        check_plot_path(plot)
    backend = get_backend(target)
    m = measure_kill(backend, name,
                     lambda: [backend.kill_worker(name, slice=slice_, host=host, seed=seed)],
                     timeout=secs)
    if output == "json":
        typer.echo(json.dumps(m.to_json(), indent=2))
    else:
        print_kill(console(), m)
    if plot and m.recovery is not None and m.recovery.phases():
        from elastix.views.plot import plot_recovery

        plot_recovery(read_stream(backend, name)[0], m.recovery, plot)
    if m.outcome is not Outcome.OK:
        why = {Outcome.BOUND_MISSED: f"training did not resume within {timeout}",
               Outcome.DIED: f"workload {name} is {m.state_after}",
               Outcome.COMPLETED_EARLY: f"workload {name} completed before it recovered"}
        raise ChaosFailed(m.outcome, f"no recovery measured: {why[m.outcome]}",
                          hint=_where_to_look(name))


# The values are measure.chaos.Outcome's (tests/measure checks the two agree).
EXIT_CODES = (
    "Exit codes: 0 every kill measured within the bounds; 3 a bound missed (--max-downtime, "
    "--max-steps-lost, or no recovery within --timeout); 4 the workload failed or was deleted; "
    "5 the workload completed before the last kill; 1 a runtime error; 2 bad input; 130 Ctrl-C. "
    "Whatever the code, every recovery measured is printed (with -o json: the goodput so far and "
    "why the run stopped) and --plot is written."
)


@with_target
@with_workload_option
def run(
    target: Target,
    name: WorkloadName,
    kills: Annotated[int, typer.Option("--kills", help="How many kills.")] = 3,
    interval: Annotated[str, typer.Option(
        "--interval", help="Time between kills (90s, 2m, 1h).")] = "2m",
    mode: Annotated[str, typer.Option(
        "--mode", help="random (any worker), host (one chosen host) or slice (every host of "
                       "one slice).")] = "random",
    seed: Annotated[int | None, typer.Option(
        "--seed", help="Seed for choosing victims.")] = None,
    max_downtime: Annotated[str | None, typer.Option(
        "--max-downtime", help="Fail if a recovery takes longer (e.g. 3m).")] = None,
    max_steps_lost: Annotated[int | None, typer.Option(
        "--max-steps-lost", help="Fail if a recovery loses more steps.")] = None,
    timeout: Annotated[str, typer.Option(
        "--timeout", help="Give up on a recovery after this.")] = "10m",
    output: Annotated[str, typer.Option("--output", "-o", help="table or json.")] = "table",
    plot: Annotated[str | None, typer.Option(
        "--plot", help="Write goodput over time to FILE.png.")] = None,
    window: GoodputWindow = None,
) -> None:
    """Chaos experiment: kill workers at intervals, measure every recovery and the goodput."""
    import json

    from elastix.measure.chaos import MODES, ChaosFailed, KillMeasurement, run_soak
    from elastix.views.console import console
    from elastix.views.measurement import print_kill, print_soak

    # Every input is checked before the first kill.
    check_output(output, ("table", "json"))
    if mode not in MODES:
        raise UsageError(f"--mode {mode!r} is not {', '.join(MODES)}",
                         hint="use --mode random, --mode host or --mode slice")
    if kills < 1:
        raise UsageError(f"--kills {kills} is out of range: 1 or more", hint="e.g. --kills 3")
    if max_steps_lost is not None and max_steps_lost < 0:
        raise UsageError(f"--max-steps-lost {max_steps_lost} is out of range: 0 or more",
                         hint="e.g. --max-steps-lost 0 (no step may be lost)")
    bound = parse_duration_in(max_downtime, "--max-downtime") if max_downtime else None
    every = parse_duration_in(interval, "--interval", allow_zero=True)
    give_up = parse_duration_in(timeout, "--timeout")
    check_window(window)
    if plot:
        from elastix.views.plot import check_plot_path

        check_plot_path(plot)
    backend = get_backend(target)
    err = console(stderr=True)

    def progress(i: int, m: KillMeasurement) -> None:
        print_kill(err, m, title=f"kill {i}/{kills}")

    res = run_soak(backend, name, kills=kills, interval=every, mode=mode, seed=seed,
                   max_downtime=bound, max_steps_lost=max_steps_lost, timeout=give_up,
                   on_kill=progress)
    if output == "json":
        typer.echo(json.dumps(res.to_json(), indent=2))
    else:
        print_soak(console(), res)
    if plot and res.goodput.end > res.goodput.start:
        from elastix.views.plot import plot_goodput

        plot_goodput(res.goodput, res.events, plot, window_seconds=window)
    elif plot:
        err.print(f"no plot written to {plot}: no trainer events to draw")
    if res.interrupted:
        raise KeyboardInterrupt
    if res.error is not None:
        raise BackendError(f"chaos run stopped: {res.error}", hint=_where_to_look(name))
    if not res.ok:
        n = len(res.violations)
        missed = f"; {n} recover{'y' if n == 1 else 'ies'} missed a bound" if n else ""
        raise ChaosFailed(res.outcome, f"chaos run: {res.stopped}{missed}",
                          hint="; ".join(res.violations) or _where_to_look(name))


run.__doc__ = f"{run.__doc__}\n\n{EXIT_CODES}"
kill_worker.__doc__ = (
    f"{kill_worker.__doc__}\n\nWith --measure, exit codes: 0 recovered; 3 no recovery within "
    "--timeout; 4 the workload failed; 5 it completed before recovering; 1 a runtime error; "
    "2 bad input; 130 Ctrl-C. The measurement is printed whatever the code.")


def _where_to_look(name: str) -> str:
    """The hint when a workload did not recover: its log and its status."""
    return f"see elastix logs {name} and elastix workload status {name}"
