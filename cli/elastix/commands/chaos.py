"""`elastix chaos` commands: kill-worker and run (registered in main).

Both measure through one driver and print one report (:mod:`elastix.measure.report`): the same
JSON, bounds, JUnit and Markdown files, and exit codes (:class:`elastix.errors.ExitCode`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated

import typer

from elastix.backends import Target, choose_backend, get_backend
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
from elastix.errors import EXIT_CODES_HELP, BackendError, ElastixError, NotFoundError, UsageError

if TYPE_CHECKING:
    from elastix.backends.base import Backend, Fault, KillRecord
    from elastix.measure.plan import Flags, Plan, Round
    from elastix.measure.report import Bounds, ChaosReport

KILL_OUTPUTS = ("text", "json")
RUN_OUTPUTS = ("table", "json")


def _complete_mode(incomplete: str) -> list[str]:
    from elastix.measure.plan import MODES  # imported when completing, not for --help

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


Slice = Annotated[int | None, typer.Option(
    "--slice", help="Kill a worker of this slice [random].", autocompletion=complete_slice)]
Host = Annotated[int | None, typer.Option("--host", help="Kill this host of --slice [random].")]
KillSeed = Annotated[int | None, typer.Option(
    "--seed", help="Seed of the random choice (reproducible).")]
KillAtStep = Annotated[int | None, typer.Option(
    "--at-step", help="Land while step N runs (after step N-1 completed).")]
KillDryRun = Annotated[bool, typer.Option(
    "--dry-run", help="Say what would be killed; send nothing. Offline: on GKE the request, "
                      "the pod chosen when it runs; --dry-run=server reads the cluster to "
                      "name the pod --seed picks.")]
KillServerDryRun = Annotated[bool, typer.Option("--server-dry-run", hidden=True)]
KillOutput = Annotated[str, output_option(
    (*KILL_OUTPUTS, "table"), "text or json; with --measure, table or json.")]
Measure = Annotated[bool, typer.Option(
    "--measure", help="Wait for the recovery and report its timeline, downtime and steps "
                      "lost (the report chaos run prints).")]
KillTimeout = Annotated[str, typer.Option(
    "--timeout", help="--measure: give up on the recovery (or the aimed moment) after this.")]
KillPlot = Annotated[str | None, typer.Option(
    "--plot", help="--measure: draw the timeline to FILE.png.")]


@with_target
@with_workload_option
def kill_worker(target: Target, name: WorkloadName, slice_: Slice = None, host: Host = None,
                seed: KillSeed = None, fault: FaultOpt = "kill", grace: Grace = None,
                hang_for: HangFor = None, at_step: KillAtStep = None, during: During = None,
                after: After = None, dry_run: KillDryRun = False,
                server_dry_run: KillServerDryRun = False, output: KillOutput = "text",
                measure: Measure = False, timeout: KillTimeout = "10m", plot: KillPlot = None,
                max_downtime: MaxDowntime = None, max_steps_lost: MaxStepsLost = None,
                junit: Junit = None, summary: Summary = None) -> None:
    """Deliver one fault: by default delete a worker pod with grace 0 (SIGKILL, a crash)."""
    from elastix.measure.plan import Flags

    reporting = [f for f, v in (("--plot", plot), ("--max-downtime", max_downtime),
                                ("--max-steps-lost", max_steps_lost), ("--junit", junit),
                                ("--summary", summary), ("--at-step", at_step),
                                ("--during", during), ("--after", after)) if v is not None]
    measuring = measure or bool(reporting)
    offline, dry_run = dry_run and not server_dry_run, dry_run or server_dry_run
    if not (measuring and output == "table"):  # --measure prints a table: it takes -o table
        check_output(output, KILL_OUTPUTS)
    if measuring and dry_run:
        raise UsageError(f"{'--measure' if measure else reporting[0]} cannot be combined with "
                         "--dry-run", hint="drop --dry-run to kill and measure")
    plan = _plan(target, Flags(
        fault=fault, grace=grace, hang_for=hang_for, during=during, after=after, seed=seed,
        at_step=None if at_step is None else str(at_step), kill_worker=True, slice=slice_,
        host=host), None)
    if measuring:
        bounds = _bounds(max_downtime, max_steps_lost, timeout)
        _check_files(junit, summary, plot)
        _measured_kill(target, name, plan, output=output, bounds=bounds, plot=plot,
                       junit=junit, summary=summary)
        return
    if offline and choose_backend(target) != "local":  # no cluster, no credentials
        import json

        from elastix.commands import dry_runs

        r = plan.rounds[0]
        said = dry_runs.kill_gke(target, name, r.fault, r.slice, r.host)
        typer.echo(json.dumps(said) if output == "json" else dry_runs.kill_text(said))
        return
    _plain_kill(get_backend(target), name, plan.rounds[0], seed, dry_run, output)


def _plain_kill(backend: Backend, name: str, r: Round, seed: int | None, dry_run: bool,
                output: str) -> None:
    """``kill-worker`` unmeasured: deliver the fault, print what it hit (a hang ``--for``:
    resume it on time); no host is left stopped on any other way out."""
    import json

    from elastix.measure.chaos import Stops, check_killable
    from elastix.views.measurement import fault_line
    from elastix.views.status import kill_json

    flt = r.fault
    stops = Stops()  # a hang's hosts: resumed on every way out but the fault's own end
    try:
        try:
            recs = stops.held(lambda: backend.inject(name, flt, slice=r.slice, host=r.host,
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


def _plan(target: Target, flags: Flags, plan_file: str | None) -> Plan:
    """The plan of the flags (or of ``--plan FILE``), every rule checked and every fault one
    the target's backend delivers: exit 2 before anything is killed."""
    from elastix.commands.faults import duration, load_plan, load_schedule
    from elastix.measure.plan import build_plan

    plan = build_plan(flags, duration=duration, read_schedule=load_schedule,
                      plan_file=plan_file, read_plan=load_plan)
    for f in plan.faults():
        _deliverable(target, f)
    return plan


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


def _measured_kill(target: Target, name: str, plan: Plan, *, output: str, bounds: Bounds,
                   plot: str | None, junit: str | None, summary: str | None) -> None:
    """``kill-worker --measure``: a chaos run of its one fault, reported as chaos run is.

    Every input was checked before; once the fault is made its measurement is printed (and
    the files written) whatever follows.

    Raises:
        ChaosFailed: exit 3 a bound missed or no recovery within --timeout, 4 the workload
            died, 5 it completed before recovering.
    """
    import json

    from elastix.measure.soak import run_soak
    from elastix.views.console import console
    from elastix.views.measurement import print_kill, print_verdict
    from elastix.views.waiting import WaitLine

    backend = get_backend(target)
    backend.status(name)  # a wrong name: one error line, before any wait
    r = plan.rounds[0]
    if r.aim().aimed:
        console(stderr=True).print(f"[dim]{name}: {r.fault.describe()} {r.aim().describe()}: "
                                   "waiting for that moment[/]")
    _say_copy(backend, name, plan)
    with WaitLine(console(stderr=True), name) as line:
        res = run_soak(backend, name, plan, bounds=bounds, report=line)
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


Kills = Annotated[int | None, typer.Option(
    "--kills", help="How many rounds of faults [3; --at-step's count; --schedule's].")]
Interval = Annotated[str | None, typer.Option(
    "--interval", help="Time from one fault to the next (90s, 2m, 1h); the first waits until "
                       "training is stepping [2m].")]
Mode = Annotated[str, typer.Option(
    "--mode", help="random (any worker), host (one chosen host) or slice (every host of one "
                   "slice, as --fault slice).", autocompletion=_complete_mode)]
Count = Annotated[int, typer.Option(
    "--count", help="Faults per round, each on a slice not yet hit (--fault slice --count 2: "
                    "two slices).")]
Spread = Annotated[str, typer.Option(
    "--spread", help="Time between a round's --count faults [0: at once].")]
AtSteps = Annotated[str | None, typer.Option(
    "--at-step", help="Land round i while step N_i runs: N or N1,N2,...")]
Mtbf = Annotated[str | None, typer.Option(
    "--mtbf", help="Fault at random times, exponential gaps of this mean (5m), as a fleet's "
                   "failures arrive; reproducible with --seed.")]
Schedule = Annotated[str | None, typer.Option(
    "--schedule", help="Replay the faults of a YAML FILE: a list of {at, fault, slice, host, "
                       "grace, for} (docs/chaos.md).")]
PlanFile = Annotated[str | None, typer.Option(
    "--plan", help="Run the rounds of a plan FILE, as --dry-run -o yaml wrote it (with --seed, "
                   "another seed for its victims).")]
RunDryRun = Annotated[bool, typer.Option(
    "--dry-run", help="Print the plan (-o yaml or json: the plan file); kill nothing.")]
RunSeed = Annotated[int | None, typer.Option(
    "--seed", help="Seed for choosing victims and --mtbf times.")]
MinGoodput = Annotated[str | None, typer.Option(
    "--min-goodput", help="Fail (exit 3) if goodput from the first fault to the end (the chaos "
                          "window) is lower (95% or 0.95).")]
RunTimeout = Annotated[str, typer.Option(
    "--timeout", help="Give up on a recovery (or an aimed moment) after this.")]
RunOutput = Annotated[str, output_option(
    (*RUN_OUTPUTS, "yaml"), "table or json; with --dry-run, also yaml (the plan file).")]
Plot = Annotated[str | None, typer.Option(
    "--plot", help="Write goodput over time to FILE.png.")]
Timeline = Annotated[str | None, typer.Option(
    "--timeline", help="Write every kill's recovery timeline to FILE.png, one under the "
                       "other.")]


@with_target
@with_workload_option
def run(target: Target, name: WorkloadName, kills: Kills = None, interval: Interval = None,
        mode: Mode = "random", fault: FaultOpt = "kill", grace: Grace = None,
        hang_for: HangFor = None, count: Count = 1, spread: Spread = "0",
        at_step: AtSteps = None, during: During = None, after: After = None,
        mtbf: Mtbf = None, schedule: Schedule = None, plan_file: PlanFile = None,
        dry_run: RunDryRun = False, seed: RunSeed = None, max_downtime: MaxDowntime = None,
        max_steps_lost: MaxStepsLost = None, min_goodput: MinGoodput = None,
        timeout: RunTimeout = "10m", output: RunOutput = "table", plot: Plot = None,
        timeline: Timeline = None, window: GoodputWindow = None, junit: Junit = None,
        summary: Summary = None, verify: chaos_verify.Verify = False,
        reference: chaos_verify.Reference = None,
        loss_tolerance: chaos_verify.LossTolerance = None,
        keep_reference: chaos_verify.KeepReference = False,
        allow_unverified_steps: chaos_verify.AllowUnverified = False) -> None:
    """Chaos experiment: faults at intervals, aimed, or on a schedule; each recovery measured."""
    from elastix.measure.plan import Flags
    from elastix.views.console import console

    # Every input is checked before the first fault.
    check_output(output, (*RUN_OUTPUTS, "yaml") if dry_run else RUN_OUTPUTS)
    flags = Flags(kills, interval, mode, fault, grace, hang_for, count, spread, at_step, during,
                  after, mtbf, schedule, seed if seed is not None or plan_file else _new_seed())
    plan = _plan(target, flags, plan_file)
    if plan.seed is None:  # a plan file saved without one: this run's, in its report
        plan = dataclasses.replace(plan, seed=_new_seed())
    bounds = _bounds(max_downtime, max_steps_lost, timeout, min_goodput)
    check_window(window)
    _check_files(junit, summary, plot)
    if timeline:
        from elastix.views.plot import check_plot_path

        check_plot_path(timeline, "--timeline")
    if dry_run and choose_backend(target) != "local":  # offline: no cluster, no credentials
        from elastix.commands import dry_runs

        _print_plan(name, plan, output)
        console(stderr=True).print(f"note: {dry_runs.aside()}", markup=False)
        return
    backend = get_backend(target)
    verifying = chaos_verify.check(backend, name, verify=verify, reference=reference,
                                   tolerance=loss_tolerance, keep=keep_reference,
                                   allow_gaps=allow_unverified_steps)
    plan.check_targets(backend.status(name))  # a wrong name, or a target it has not: now
    past = _past_the_end(backend, name, plan)
    if dry_run:
        _print_plan(name, plan, output)
        if past:
            console(stderr=True).print(f"note: {past[0]} ({past[1]})", markup=False)
        return
    if past:
        raise UsageError(*past)
    res = _run_plan(backend, name, plan, bounds, _origin(flags, plan_file, len(plan.rounds)))
    chaos_verify.finish(backend, name, res, verifying, bounds.timeout, console(stderr=True))
    _report(res, output, junit, summary)
    _charts(res, plot, timeline, window)
    _finish(res, name, "chaos run")


def _new_seed() -> int:
    """The seed of a run not given one: drawn, and kept in its plan (``--dry-run -o yaml``
    writes it, the report holds it), so a replay of the plan hits the same victims."""
    import secrets

    return secrets.randbelow(2**31)


def _origin(flags: Flags, plan_file: str | None, rounds: int) -> str:
    """When the rounds land, in the words of the flags that said so (the run's first line);
    one round has no interval."""
    if plan_file is not None:
        return f"as planned in {plan_file}"
    if flags.schedule is not None:
        return f"on a schedule from {flags.schedule}"
    if flags.mtbf is not None:
        return f"at exponential times of mean {flags.mtbf} (seed {flags.seed})"
    if flags.during is not None or flags.after is not None:
        return f"during {flags.during}" if flags.during else f"after {flags.after}"
    if flags.at_step is not None:
        return f"at steps {flags.at_step}"
    return f"{flags.interval or '2m'} apart" if rounds > 1 else ""


def _print_plan(name: str, plan: Plan, output: str) -> None:
    """``chaos run --dry-run``: the plan, a table (nothing killed) or the plan file."""
    import json

    from elastix.views.console import console

    if output == "table":
        from elastix.views.measurement import print_schedule

        print_schedule(console(), name, plan.rows())
    elif output == "json":
        typer.echo(json.dumps(plan.to_json(), indent=2))
    else:
        import yaml

        typer.echo(f"# elastix chaos plan, made for {name}: elastix chaos run NAME --plan FILE"
                   " (docs/chaos.md)")
        typer.echo(yaml.safe_dump(plan.to_json(), sort_keys=False, default_flow_style=None,
                                  width=100), nl=False)


def _run_plan(backend: Backend, name: str, plan: Plan, bounds: Bounds, origin: str
              ) -> ChaosReport:
    """Run the plan's rounds, saying each one's recovery as it is measured (stderr)."""
    from elastix.measure.report import KillMeasurement
    from elastix.measure.soak import run_soak
    from elastix.views.console import console
    from elastix.views.measurement import print_kill
    from elastix.views.waiting import WaitLine

    err = console(stderr=True)
    n = len(plan.rounds)

    def progress(i: int, m: KillMeasurement) -> None:
        print_kill(err, m, title=f"fault {i}/{n}")

    kinds = ", ".join(dict.fromkeys(r.fault.describe() for r in plan.rounds))
    count = plan.rounds[0].count
    err.print(f"[dim]{name}: {n} round{'s' if n != 1 else ''} of {kinds}"
              f"{f' x{count}' if count > 1 else ''}{f', {origin}' if origin else ''}; un-aimed "
              "faults wait until it is stepping (a step after its first save)[/]")
    _say_copy(backend, name, plan)
    with WaitLine(err, name) as line:
        res = run_soak(backend, name, plan, bounds=bounds, on_kill=progress, report=line)
    _say_resumed(res.resumed, "before exiting")
    return res


def _past_the_end(backend: Backend, name: str, plan: Plan) -> tuple[str, str] | None:
    """Why the plan outlasts the run (its last fault due after the trainer's last step), or
    None: refused before anything is killed, said by a dry run."""
    from elastix.measure.events import events_of
    from elastix.measure.horizon import outlasts

    try:
        got = backend.trainer_events(name)
        events = events_of(got)[0]
    except ElastixError:  # unreadable now: not judged here (the run says it when it reads)
        return None
    return outlasts(plan, events, got.records if got is not None else None, name)


def _say_copy(backend: Backend, name: str, plan: Plan) -> None:
    """``--during save`` on a run whose checkpoint copies are too short to hit here: said
    before anything is killed (the fault lands in the write, where it can)."""
    if not any(r.during == "save" for r in plan.rounds):
        return
    import os

    from elastix.measure.aim import save_copy_note
    from elastix.measure.events import events_of
    from elastix.views.console import console

    path = backend.events_path(name)
    try:
        events = events_of(backend.trainer_events(name))[0]
    except ElastixError:  # unreadable now: nothing to say (the run says it when it reads)
        return
    note = save_copy_note(events, following=path is not None and os.path.exists(path))
    if note:
        console(stderr=True).print(f"note: {note}", markup=False)


def _report(res: ChaosReport, output: str, junit: str | None, summary: str | None) -> None:
    import json

    from elastix.views.console import console
    from elastix.views.measurement import print_soak

    if output == "json":
        typer.echo(json.dumps(res.to_json(), indent=2))
    else:
        print_soak(console(), res)
    _write_files(res, len(res.plan.rounds) if res.plan else 1, junit, summary)


def _charts(res: ChaosReport, plot: str | None, timeline: str | None,
            window: float | None) -> None:
    """``--plot`` (goodput over the chaos window) and ``--timeline`` (every recovery)."""
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
