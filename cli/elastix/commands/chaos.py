"""`elastix chaos` commands: kill-worker and run (registered in main).

Both measure through one driver and print one report (:mod:`elastix.measure.report`): the same
JSON, bounds, JUnit and Markdown files, and exit codes (:class:`elastix.errors.ExitCode`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from elastix.backends import Target, get_backend
from elastix.commands import chaos_verify
from elastix.commands.options import (
    GoodputWindow,
    WorkloadName,
    check_output,
    check_window,
    complete_slice,
    output_option,
    parse_duration_in,
    with_target,
    with_workload_option,
)
from elastix.errors import EXIT_CODES_HELP, BackendError, NotFoundError, UsageError

if TYPE_CHECKING:
    from elastix.backends.base import Backend, Fault, KillRecord
    from elastix.measure.aim import Aim
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
FaultOpt = Annotated[str, typer.Option(
    "--fault", help="kill (a host crashes: SIGKILL), term (planned maintenance: SIGTERM, "
                    "SIGKILL after the grace), hang (SIGSTOP until replaced, or --for), slice "
                    "(every host of a slice) or head (the controller dies: the workload "
                    "restarts).", autocompletion=lambda incomplete: [
                        f for f in ("kill", "term", "hang", "slice", "head")
                        if f.startswith(incomplete)])]
Grace = Annotated[str | None, typer.Option(
    "--grace", help="--fault term: SIGTERM to SIGKILL (default: the pod's "
                    "terminationGracePeriodSeconds, 30s).")]
HangFor = Annotated[str | None, typer.Option(
    "--for", help="--fault hang: SIGCONT after this (default: stopped until the platform "
                  "replaces the host).")]
During = Annotated[str | None, typer.Option(
    "--during", help="Land in a moment: save (a checkpoint's copy), snapshot, restore, "
                     "recovery, startup or compile; found in the trainer's events (or a "
                     "MaxText head's log).", autocompletion=lambda incomplete: [
                         m for m in ("save", "snapshot", "restore", "recovery", "startup",
                                     "compile") if m.startswith(incomplete)])]
After = Annotated[str | None, typer.Option(
    "--after", help="Land this long after the command starts (90s, 5m), stepping or not.")]


def _bounds(max_downtime: str | None, max_steps_lost: int | None, timeout: str,
            min_goodput: str | None = None) -> Bounds:
    """The bounds from their flags (exit 2 on a bad one, before anything is killed)."""
    from elastix.measure.report import Bounds

    if max_steps_lost is not None and max_steps_lost < 0:
        raise UsageError(f"--max-steps-lost {max_steps_lost} is out of range: 0 or more",
                         hint="e.g. --max-steps-lost 0 (no step may be lost)")
    down = parse_duration_in(max_downtime, "--max-downtime") if max_downtime is not None \
        else None
    return Bounds(down, max_steps_lost, parse_duration_in(timeout, "--timeout"),
                  _fraction(min_goodput) if min_goodput is not None else None)


def _fraction(text: str) -> float:
    """``--min-goodput``: ``95%`` or ``0.95``, more than 0 and at most 100 %."""
    import math

    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        v = math.nan
    if t and not t.endswith("%") and v > 1:
        raise UsageError(f"--min-goodput {text!r} is ambiguous: a fraction is at most 1",
                         hint="say --min-goodput 95% or --min-goodput 0.95")
    if not 0 < v <= 1:  # False for nan
        raise UsageError(f"--min-goodput {text!r} is not a goodput: more than 0, at most 100%",
                         hint="e.g. --min-goodput 95%")
    return v


def _fault(fault: str, grace: str | None, hang_for: str | None) -> Fault:
    """``--fault`` and its options, checked (exit 2 before anything is killed)."""
    from elastix.backends.base import FAULTS, Fault

    if fault not in FAULTS:
        raise UsageError(f"--fault {fault!r} is not one of {', '.join(FAULTS)}",
                         hint="e.g. --fault term (planned maintenance)")
    if grace is not None and fault != "term":
        raise UsageError(f"--grace is for --fault term, not {fault}", hint="drop --grace")
    if hang_for is not None and fault != "hang":
        raise UsageError(f"--for is for --fault hang, not {fault}", hint="drop --for")
    return Fault(fault, parse_duration_in(grace, "--grace", allow_zero=True)
                 if grace is not None else None,
                 parse_duration_in(hang_for, "--for") if hang_for is not None else None)


def _aim(at_step: int | None, during: str | None, after: str | None) -> Aim:
    from elastix.measure.aim import Aim

    return Aim(at_step, during, parse_duration_in(after, "--after", allow_zero=True)
               if after is not None else None)


def _deliverable(target: Target, fault: Fault) -> None:
    """Refuse a fault the target's backend cannot deliver, in one line, before anything is
    killed or any cluster is reached."""
    from elastix.backends import backend_class, choose_backend

    why = backend_class(choose_backend(target)).fault_support(fault)
    if why is not None:
        raise UsageError(why, hint="see elastix chaos kill-worker --help for the faults")


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
        "--slice", help="Kill a worker of this slice [random].",
        autocompletion=complete_slice)] = None,
    host: Annotated[int | None, typer.Option(
        "--host", help="Kill this host of --slice [random].")] = None,
    seed: Annotated[int | None, typer.Option(
        "--seed", help="Seed of the random choice (reproducible).")] = None,
    fault: FaultOpt = "kill",
    grace: Grace = None,
    hang_for: HangFor = None,
    at_step: Annotated[int | None, typer.Option(
        "--at-step", help="Land while step N runs (after step N-1 completed).")] = None,
    during: During = None,
    after: After = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Show which pod would be killed.")] = False,
    output: Annotated[str, output_option(
        (*KILL_OUTPUTS, "table"), "text or json; with --measure, table or json.")] = "text",
    measure: Annotated[bool, typer.Option(
        "--measure", help="Wait for the recovery and report its timeline, downtime and steps "
                          "lost (the report chaos run prints).")] = False,
    timeout: Annotated[str, typer.Option(
        "--timeout", help="--measure: give up on the recovery (or the aimed moment) after "
                          "this.")] = "10m",
    plot: Annotated[str | None, typer.Option(
        "--plot", help="--measure: draw the timeline to FILE.png.")] = None,
    max_downtime: MaxDowntime = None,
    max_steps_lost: MaxStepsLost = None,
    junit: Junit = None,
    summary: Summary = None,
) -> None:
    """Deliver one fault: by default delete a worker pod with grace 0 (SIGKILL, a crash)."""
    import json

    from elastix.measure.chaos import Stops, check_killable
    from elastix.views.measurement import fault_line
    from elastix.views.status import kill_json

    reporting = [f for f, v in (("--plot", plot), ("--max-downtime", max_downtime),
                                ("--max-steps-lost", max_steps_lost), ("--junit", junit),
                                ("--summary", summary), ("--at-step", at_step),
                                ("--during", during), ("--after", after)) if v is not None]
    measuring = measure or bool(reporting)
    if not (measuring and output == "table"):  # --measure prints a table: it takes -o table
        check_output(output, KILL_OUTPUTS)
    if measuring and dry_run:
        raise UsageError(f"{'--measure' if measure else reporting[0]} cannot be combined with "
                         "--dry-run", hint="drop --dry-run to kill and measure")
    if host is not None and slice_ is None:
        raise UsageError("--host needs --slice", hint="e.g. --slice 0 --host 1")
    flt = _fault(fault, grace, hang_for)
    _deliverable(target, flt)
    if flt.kind == "head" and slice_ is not None:
        raise UsageError("--fault head takes no --slice or --host",
                         hint="the head is one pod: drop --slice/--host")
    if flt.kind == "slice" and host is not None:
        raise UsageError("--fault slice takes every host of a slice: not --host",
                         hint="drop --host (or --fault kill --slice S --host H)")
    aim = _aim(at_step, during, after)
    if measuring:
        bounds = _bounds(max_downtime, max_steps_lost, timeout)
        _check_files(junit, summary, plot)
        _measured_kill(target, name, slice_=slice_, host=host, seed=seed, output=output,
                       bounds=bounds, plot=plot, junit=junit, summary=summary, fault=flt,
                       aim=aim)
        return
    backend = get_backend(target)
    stops = Stops()  # a hang's hosts: resumed on every way out but the fault's own end
    try:
        try:
            recs = stops.held(lambda: backend.inject(name, flt, slice=slice_, host=host,
                                                     seed=seed, dry_run=dry_run))
        except BackendError as err:
            if isinstance(err, NotFoundError):
                raise
            check_killable(backend, name)  # a completed workload: exit 5, as chaos run gives
            raise
        for rec in recs:
            typer.echo(json.dumps(kill_json(rec)) if output == "json" else fault_line(rec))
        if flt.kind == "hang" and flt.hang_for is not None and not dry_run:
            _hang_for(backend, name, recs, flt.hang_for, output)
    except BaseException:  # Ctrl-C, SIGTERM, a closed stdout: no host is left stopped
        _say_resumed(stops.undo(backend, name), "before exiting")
        raise


def _hang_for(backend: Backend, name: str, recs: list[KillRecord], hang_for: float,
              output: str) -> None:
    """``--fault hang --for``: the hosts answer again after ``hang_for`` s, as a stalled VM
    resumes (the caller resumes them on any other way out)."""
    import time

    from elastix.interrupts import sigterm_interrupts

    with sigterm_interrupts():
        time.sleep(hang_for)
    for rec in recs:
        resumed = backend.resume(name, rec)
        if output != "json":
            typer.echo(f"resumed pod {rec.pod} after {hang_for:g} s" if resumed else
                       f"pod {rec.pod} was replaced before it could be resumed")


def _say_resumed(recs: list[KillRecord], when: str) -> None:
    """Name each host a hang had stopped that the command resumed on its way out (stderr)."""
    import sys

    for rec in recs:
        sys.stderr.write(f"elastix: resumed pod {rec.pod} (slice {rec.slice}, host {rec.host})"
                         f", stopped by this command's hang, {when}\n")


def _measured_kill(target: Target, name: str, *, slice_: int | None, host: int | None,
                   seed: int | None, output: str, bounds: Bounds, plot: str | None,
                   junit: str | None, summary: str | None, fault: Fault, aim: Aim) -> None:
    """``kill-worker --measure``: a chaos run of one pinned fault, reported as chaos run is.

    Every input was checked before; once the fault is made its measurement is printed (and
    the files written) whatever follows.

    Raises:
        ChaosFailed: exit 3 a bound missed or no recovery within --timeout, 4 the workload
            died, 5 it completed before recovering.
    """
    import json

    from elastix.measure.chaos import run_soak
    from elastix.views.console import console
    from elastix.views.measurement import print_kill, print_verdict
    from elastix.views.waiting import WaitLine

    backend = get_backend(target)
    backend.status(name)  # a wrong name: one error line, before any wait
    if aim.aimed:
        console(stderr=True).print(f"[dim]{name}: {fault.describe()} {aim.describe()}: "
                                   "waiting for that moment[/]")
    # The victim is the plain kill-worker's (the same --seed picks the same pod, measured or
    # not, dry run or not), unless an aim picks it (at a recovery: a slice the opener spared).
    pinned = slice_ is not None or host is not None or not aim.aimed
    with WaitLine(console(stderr=True), name) as line:
        res = run_soak(backend, name, kills=1, interval=0, bounds=bounds, fault=fault, aim=aim,
                       seed=seed, report=line, killer=(
                           lambda: backend.inject(name, fault, slice=slice_, host=host,
                                                  seed=seed)) if pinned else None)
    _say_resumed(res.resumed, "before exiting")
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

        plot_recovery(res.events, m.recovery, plot, fault=m.fault,
                      missed=tuple(v.label() for v in res.kill_violations(1)))
        _wrote(plot, "recovery timeline")
    elif plot:
        _wrote_none(plot)
    _finish(res, name, "kill-worker --measure")


@with_target
@with_workload_option
def run(
    target: Target,
    name: WorkloadName,
    kills: Annotated[int | None, typer.Option(
        "--kills", help="How many rounds of faults [3; --at-step's count; --schedule's].")
    ] = None,
    interval: Annotated[str | None, typer.Option(
        "--interval", help="Time from one fault to the next (90s, 2m, 1h); the first waits "
                           "until training is stepping [2m].")] = None,
    mode: Annotated[str, typer.Option(
        "--mode", help="random (any worker), host (one chosen host) or slice (every host of "
                       "one slice, as --fault slice).", autocompletion=_complete_mode)
    ] = "random",
    fault: FaultOpt = "kill",
    grace: Grace = None,
    hang_for: HangFor = None,
    count: Annotated[int, typer.Option(
        "--count", help="Faults per round, each on a slice not yet hit (--fault slice "
                        "--count 2: two slices).")] = 1,
    spread: Annotated[str, typer.Option(
        "--spread", help="Time between a round's --count faults [0: at once].")] = "0",
    at_step: Annotated[str | None, typer.Option(
        "--at-step", help="Land round i while step N_i runs: N or N1,N2,...")] = None,
    during: During = None,
    after: After = None,
    mtbf: Annotated[str | None, typer.Option(
        "--mtbf", help="Fault at random times, exponential gaps of this mean (5m), as a "
                       "fleet's failures arrive; reproducible with --seed.")] = None,
    schedule: Annotated[str | None, typer.Option(
        "--schedule", help="Replay the faults of a YAML FILE: a list of {at, fault, slice, "
                           "host, grace, for} (docs/chaos.md).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the faults planned (times, kinds, targets); kill "
                          "nothing.")] = False,
    seed: Annotated[int | None, typer.Option(
        "--seed", help="Seed for choosing victims and --mtbf times.")] = None,
    max_downtime: MaxDowntime = None,
    max_steps_lost: MaxStepsLost = None,
    min_goodput: Annotated[str | None, typer.Option(
        "--min-goodput", help="Fail (exit 3) if goodput from the first fault to the end "
                              "(the chaos window) is lower (95% or 0.95).")] = None,
    timeout: Annotated[str, typer.Option(
        "--timeout", help="Give up on a recovery (or an aimed moment) after this.")] = "10m",
    output: Annotated[str, output_option(RUN_OUTPUTS, "table or json.")] = "table",
    plot: Annotated[str | None, typer.Option(
        "--plot", help="Write goodput over time to FILE.png.")] = None,
    timeline: Annotated[str | None, typer.Option(
        "--timeline", help="Write every kill's recovery timeline to FILE.png, one under the "
                           "other.")] = None,
    window: GoodputWindow = None,
    junit: Junit = None,
    summary: Summary = None,
    verify: chaos_verify.Verify = False,
    reference: chaos_verify.Reference = None,
    loss_tolerance: chaos_verify.LossTolerance = None,
    keep_reference: chaos_verify.KeepReference = False,
) -> None:
    """Chaos experiment: faults at intervals, aimed, or on a schedule; each recovery measured."""
    import json

    from elastix.measure.aim import Aim
    from elastix.measure.chaos import MODES, KillMeasurement, run_soak
    from elastix.measure.schedule import mtbf_schedule
    from elastix.views.console import console
    from elastix.views.measurement import print_kill, print_schedule, print_soak
    from elastix.views.waiting import WaitLine

    # Every input is checked before the first fault.
    check_output(output, RUN_OUTPUTS)
    if mode not in MODES:
        raise UsageError(f"--mode {mode!r} is not {', '.join(MODES)}",
                         hint="use --mode random, --mode host or --mode slice")
    flt = _fault(fault, grace, hang_for)
    if count < 1:
        raise UsageError(f"--count {count} is out of range: 1 or more", hint="e.g. --count 2")
    gap = parse_duration_in(spread, "--spread", allow_zero=True)
    steps = _steps(at_step)
    timing = [f for f, v in (("--at-step", at_step), ("--during", during), ("--after", after),
                             ("--mtbf", mtbf), ("--schedule", schedule)) if v is not None]
    if len(timing) > 1:
        raise UsageError(f"{timing[0]} and {timing[1]} cannot be combined: they both say when "
                         "faults land", hint=f"keep one of {', '.join(timing)}")
    if interval is not None and (mtbf or schedule):
        raise UsageError(f"--interval and {'--mtbf' if mtbf else '--schedule'} cannot be "
                         "combined", hint="the schedule says when each fault lands")
    plan = None
    if schedule is not None:
        from elastix.commands.faults import load_schedule

        if kills is not None:
            raise UsageError("--kills and --schedule cannot be combined: the file lists the "
                             "faults", hint="drop --kills")
        plan = load_schedule(schedule)
        kills = len(plan)  # the file's count: the header, JUnit's cases (not --kills' 3)
    if steps is not None:
        if kills is not None and kills != len(steps):
            raise UsageError(f"--kills {kills} but --at-step names {len(steps)} steps",
                             hint="one step per round, or drop --kills")
        kills = len(steps)
    kills = 3 if kills is None else kills
    if kills < 1:
        raise UsageError(f"--kills {kills} is out of range: 1 or more", hint="e.g. --kills 3")
    if mtbf is not None:
        plan = mtbf_schedule(parse_duration_in(mtbf, "--mtbf"), kills, seed, flt)
    if during in ("startup", "compile") and kills > 1 and flt.kind != "head":
        raise UsageError(f"--during {during} aims at the run's start, which comes once: "
                         f"--kills {kills} cannot all land in it",
                         hint="use --kills 1 (or --fault head, whose restarts start again)")
    aim = _aim(None, during, after)
    bounds = _bounds(max_downtime, max_steps_lost, timeout, min_goodput)
    every = parse_duration_in(interval or "2m", "--interval", allow_zero=True)
    check_window(window)
    _check_files(junit, summary, plot)
    if timeline:
        from elastix.views.plot import check_plot_path

        check_plot_path(timeline, "--timeline")
    for f in {p.fault for p in plan} if plan else {flt}:
        _deliverable(target, f)
    backend = get_backend(target)
    verifying = chaos_verify.check(backend, name, verify=verify, reference=reference,
                                   tolerance=loss_tolerance, keep=keep_reference)
    err = console(stderr=True)
    if dry_run:
        from elastix.measure.chaos import describe_plan

        backend.status(name)
        rows = describe_plan(kills, every, flt, count, gap, steps, aim, plan)
        if output == "json":
            typer.echo(json.dumps({"workload": name, "faults": rows}, indent=2))
        else:
            print_schedule(console(), name, rows)
        return

    def progress(i: int, m: KillMeasurement) -> None:
        print_kill(err, m, title=f"fault {i}/{kills}")

    backend.status(name)  # a wrong name: one error line, before anything else is said
    when = (f"on a schedule of {len(plan)} from {schedule}" if schedule else
            f"at exponential times of mean {mtbf} (seed {seed})" if mtbf else
            f"{aim.describe()}" if aim.aimed else
            f"at steps {at_step}" if steps else f"{interval or '2m'} apart")
    err.print(f"[dim]{name}: {kills} round{'s' if kills != 1 else ''} of "
              f"{flt.describe()}{f' x{count}' if count > 1 else ''}, {when}; un-aimed faults "
              "wait until it is stepping (a step after its first save)[/]")
    with WaitLine(err, name) as line:
        res = run_soak(backend, name, kills=kills, interval=every, mode=mode, seed=seed,
                       bounds=bounds, on_kill=progress, fault=flt, aim=aim, count=count,
                       spread=gap, schedule=plan, report=line,
                       aims=[Aim(at_step=n) for n in steps] if steps else None)
    _say_resumed(res.resumed, "before exiting")
    chaos_verify.finish(backend, name, res, verifying, bounds.timeout, err)
    if output == "json":
        typer.echo(json.dumps(res.to_json(), indent=2))
    else:
        print_soak(console(), res)
    _write_files(res, kills, junit, summary)
    if plot and res.goodput.end > res.goodput.start:
        from elastix.views.plot import plot_goodput

        plot_goodput(res.goodput, res.events, plot, window_seconds=window,
                     faults={t: "kill (opener)" if t != m.fault_times()[-1] else m.fault
                             for m in res.measurements for t in m.fault_times()},
                     chaos_window=res.window, missed=res.missed_by_fault(),
                     run_missed=tuple(v.label() for v in res.kill_violations(0)),
                     min_goodput=res.bounds.min_goodput)
        _wrote(plot, "goodput chart")
    elif plot:
        _wrote_none(plot)
    if timeline and res.measurements:
        from elastix.views.plot import kills_of, plot_recoveries

        plot_recoveries(res.events, kills_of(res), timeline)
        _wrote(timeline, "recovery timelines")
    elif timeline:
        _wrote_none(timeline)
    _finish(res, name, "chaos run")


def _steps(text: str | None) -> list[int] | None:
    """``--at-step N`` or ``N1,N2,...``: increasing step numbers, 1 or more."""
    if text is None:
        return None
    try:
        steps = [int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"--at-step {text!r} is not a step or a list of steps",
                         hint="e.g. --at-step 40 or --at-step 40,80,120") from None
    if any(n < 1 for n in steps) or steps != sorted(set(steps)):
        raise UsageError(f"--at-step {text!r}: steps must be 1 or more and increasing",
                         hint="e.g. --at-step 40,80,120")
    return steps


run.__doc__ = f"{run.__doc__}\n\n{EXIT_CODES_HELP} Whatever the code, every recovery " \
    "measured is printed (with -o json: the goodput so far and why the run stopped) and " \
    "--plot, --timeline, --junit and --summary are written."
kill_worker.__doc__ = (
    f"{kill_worker.__doc__}\n\nWith --measure (or any of its report flags, or an aim: "
    f"--at-step, --during, --after) it is a chaos run of this one fault, with the same report "
    f"(docs/chaos.md). {EXIT_CODES_HELP}")


def _where_to_look(name: str) -> str:
    """The hint when a workload did not recover: its log and its status."""
    return f"see elastix logs {name} and elastix workload status {name}"
