"""``elastix workload forecast``: the same training at a size the user names, simulated with
what a run measured (:mod:`elastix.measure.forecast`), each policy at today's periods and at
the best the simulation finds."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from elastix.backends import Target, choose_backend
from elastix.commands.advise import MAX_RUN_FILE, load_run
from elastix.commands.options import (
    EventsFileOpt,
    RunNameArg,
    check_output,
    output_option,
    parse_duration,
    with_target,
    with_workload_option,
)
from elastix.errors import UsageError

OUTPUTS = ("table", "json")
DEFAULT_TPU = "v5litepod-16"
# Llama 3 405B's pre-training: 419 unexpected interruptions in 54 days on 16,384 GPUs, 2,048
# hosts of 8 (Dubey et al., "The Llama 3 Herd of Models", 2024, section 3.3.4).
LLAMA3_HOST_MTBF = 2048 * 54 * 86400 / 419
LLAMA3_SOURCE = ("264 d: Llama 3's 419 interruptions in 54 days on 2,048 hosts (Dubey et al. "
                 "2024, 3.3.4)")
MAX_MTBF = 1000 * 365 * 86400.0


def _positive(text: str, flag: str, top: float = MAX_MTBF) -> float:
    """A duration more than 0 and at most ``top`` seconds, or a one-line UsageError."""
    secs = parse_duration(text, flag)
    if not 0 < secs <= top:
        raise UsageError(f"{flag} {text!r} is out of range: more than 0, at most "
                         f"{top / 86400:,.0f}d", hint=f"e.g. {flag} 6h or 200d")
    return secs


def _samples(text: str, flag: str) -> tuple[float, ...]:
    """``--replace-time 10m`` or a distribution, ``5m,10m,40m`` (sampled evenly); the same
    for ``--restart-time``."""
    return tuple(_positive(x, flag) for x in text.split(","))


def _inputs(name: str | None, events_file: Path | None, report: Path | None, target: Target
            ) -> tuple[Any, str, bool]:
    """The run's inputs, where they came from, and whether that was a GKE cluster."""
    from elastix.measure.forecast_inputs import from_report, inputs_of

    given = [f for f, v in (("NAME", name), ("--events", events_file), ("--report", report))
             if v]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)} each name the run: give one",
                         hint="elastix workload forecast NAME, or --events FILE, or --report "
                              "FILE")
    if not given:
        raise UsageError("missing workload NAME", hint="elastix workload forecast NAME (or "
                         "--events FILE, or --report FILE)")
    if report is not None:
        from elastix.workload.spec import read_user_text

        text = read_user_text(report, "report", "--report", "pass the JSON chaos run -o json "
                              "printed", limit=MAX_RUN_FILE)
        from elastix.measure.report import SCHEMA_VERSION

        return from_report(text, str(report), SCHEMA_VERSION), f"report {report}", False
    events, records, source = load_run(name, events_file, target, "forecast")
    if not events:
        raise UsageError(f"no trainer events found ({source})",
                         hint="has the trainer started? see docs/events.md")
    on_gke = events_file is None and choose_backend(target) == "gke"
    return inputs_of(events, records), source, on_gke


def _host_mtbf(host_mtbf: str | None, host_rate: float | None) -> float:
    """One host's MTBF in seconds: ``--host-mtbf``, ``--host-failures-per-day`` (not both),
    else Llama 3's."""
    if host_rate is None:
        return _positive(host_mtbf, "--host-mtbf") if host_mtbf else LLAMA3_HOST_MTBF
    if host_mtbf:
        raise UsageError("--host-mtbf and --host-failures-per-day say the same: give one",
                         hint="--host-failures-per-day R is --host-mtbf 1/R days")
    if not 86400 / MAX_MTBF <= host_rate < math.inf:  # False for nan too
        raise UsageError(f"--host-failures-per-day {host_rate:g} is out of range: more than 0",
                         hint="e.g. --host-failures-per-day 0.004")
    return 86400 / host_rate


def _hosts(tpu_type: str) -> int:
    from elastix.workload import tpu

    if tpu.problem(tpu_type) or tpu_type not in tpu.catalogue():
        raise UsageError(f"--tpu-type {tpu_type!r} is not a TPU type elastix knows",
                         hint=tpu.unknown_hint(tpu_type))
    return tpu.lookup(tpu_type).hosts


ReportOpt = Annotated[Path | None, typer.Option(
    "--report", help="Read a saved chaos report (chaos run ... -o json) instead: the run may be "
                     "gone.")]
SlicesOpt = Annotated[int | None, typer.Option(
    "--slices", help="Slices of the training to forecast [the run's].")]
TpuTypeOpt = Annotated[str, typer.Option(
    "--tpu-type", help="TPU type: its hosts per slice fail independently.")]
HostMtbfOpt = Annotated[str | None, typer.Option(
    "--host-mtbf", help="Mean time between one host's failures [264d: Llama 3's 419 "
                        "interruptions in 54 days on 2,048 hosts].")]
HostRateOpt = Annotated[float | None, typer.Option(
    "--host-failures-per-day", help="Instead of --host-mtbf: failures per host-day (0.0038 is "
                                    "Llama 3's).")]
HeadMtbfOpt = Annotated[str | None, typer.Option(
    "--head-mtbf", help="Mean time between controller failures [never].")]
ReplaceTimeOpt = Annotated[str | None, typer.Option(
    "--replace-time", help="How long the platform takes to replace a slice: 10m, or a "
                           "distribution 5m,10m,40m [the run's waits for slices].")]
RestartTimeOpt = Annotated[str | None, typer.Option(
    "--restart-time", help="How long a full restart takes, to its first step: 10m, or a "
                           "distribution 5m,10m,20m [restarts measured on GKE, else 10m, an "
                           "assumption].")]
RecoveryTimeOpt = Annotated[str | None, typer.Option(
    "--recovery-time", help="A recovery's downtime to assume when the run measured none.")]
SpareOpt = Annotated[int, typer.Option("--spare-slices", help="Idle spare slices.")]
MinSlicesOpt = Annotated[int | None, typer.Option(
    "--min-slices", help="replica-resize trains on no fewer [half of --slices].")]
DaysOpt = Annotated[float, typer.Option("--days", help="Length of the run forecast.")]
CheckpointOpt = Annotated[int | None, typer.Option(
    "--checkpoint-period", help="Steps between checkpoints [the run's].")]
SnapshotOpt = Annotated[int | None, typer.Option(
    "--snapshot-period", help="Steps between host snapshots, 0 for none [the run's].")]
RunsOpt = Annotated[int, typer.Option("--runs", help="Repetitions, for the interval.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the first repetition.")]
PlotOpt = Annotated[Path | None, typer.Option(
    "--plot", help="Draw goodput against slices, a line per policy, to FILE.png.")]


@with_target
@with_workload_option(required=False)
def forecast(target: Target, name: RunNameArg = None, events_file: EventsFileOpt = None,
             report: ReportOpt = None, slices: SlicesOpt = None,
             tpu_type: TpuTypeOpt = DEFAULT_TPU, host_mtbf: HostMtbfOpt = None,
             host_rate: HostRateOpt = None, head_mtbf: HeadMtbfOpt = None,
             replace_time: ReplaceTimeOpt = None, restart_time: RestartTimeOpt = None,
             recovery_time: RecoveryTimeOpt = None, spare_slices: SpareOpt = 0,
             min_slices: MinSlicesOpt = None, days: DaysOpt = 30.0,
             checkpoint_period: CheckpointOpt = None, snapshot_period: SnapshotOpt = None,
             runs: RunsOpt = 20, seed: SeedOpt = 0,
             output: Annotated[str, output_option(OUTPUTS, "table or json.")] = "table",
             plot: PlotOpt = None) -> None:
    """Simulate the run at another size, calibrated by what it measured: goodput of full
    restart, pause-resume and replica-resize at today's and at the best periods."""
    from elastix.measure.forecast import Scenario
    from elastix.measure.forecast_report import MAX_DAYS, calibrate, check
    from elastix.measure.forecast_report import forecast as run_forecast

    check_output(output, OUTPUTS)
    if not (0 < days <= MAX_DAYS) or math.isnan(days):
        raise UsageError(f"--days {days:g} is out of range: more than 0, at most {MAX_DAYS}",
                         hint="e.g. --days 30")
    hosts = _hosts(tpu_type)
    host = _host_mtbf(host_mtbf, host_rate)
    head = _positive(head_mtbf, "--head-mtbf") if head_mtbf else None
    replace = _samples(replace_time, "--replace-time") if replace_time else None
    restart = _samples(restart_time, "--restart-time") if restart_time else None
    assumed = _positive(recovery_time, "--recovery-time") if recovery_time else None
    if plot:
        from elastix.views.plot import check_plot_path

        check_plot_path(str(plot))
    run, source, on_gke = _inputs(name, events_file, report, target)
    cal = calibrate(run, replace, assumed, restart, on_gke)
    m = run.measured
    n = slices if slices is not None else run.slices or 1
    sc = Scenario(n, hosts, host, head, spare_slices, days * 86400,
                  checkpoint_period if checkpoint_period is not None else m.checkpoint_period,
                  snapshot_period if snapshot_period is not None else m.snapshot_period,
                  min_slices if min_slices is not None else max(1, math.ceil(n / 2)))
    check(sc, cal.costs, runs)
    result = run_forecast(cal.costs, sc, runs, seed)
    sources = {**cal.sources, "hosts per slice": f"{hosts} ({tpu_type})",
               "host MTBF": "--host-mtbf" if host_mtbf else "--host-failures-per-day"
               if host_rate is not None else LLAMA3_SOURCE,
               "controller MTBF": "--head-mtbf" if head_mtbf else "none: it never fails"}
    if plot:
        from elastix.views.forecast_plot import plot_forecast, sweep

        plot_forecast(sweep(cal.costs, sc, min(runs, 5), seed), str(plot))
    if output == "json":
        typer.echo(json.dumps({"source": source, "sources": sources, "notes": cal.notes,
                               **result.to_json()}, indent=2))
        return
    _print(result, source, sources, cal.notes)
    if plot:
        typer.echo(f"wrote {plot}")


def _print(result: Any, source: str, sources: dict[str, str], notes: list[str]) -> None:
    from rich.table import Table

    from elastix.views.console import console

    sc = result.scenario
    out = console()
    out.print(f"forecast: {sc.slices} slices for {sc.seconds / 86400:g} days, {sc.spare_slices} "
              f"spare, {result.runs} runs (seed {result.seed}); calibrated by {source}",
              markup=False)
    for what, where in sources.items():
        out.print(f"  {what}: {where}", markup=False)
    # A column per policy and setting, a row per number: 80 columns hold six settings.
    t = Table(box=None, pad_edge=False, header_style="bold")
    t.add_column("", no_wrap=True)
    for r in result.rows:
        t.add_column(r.policy.replace("-", "-\n") + f"\n{r.periods}", justify="right")
    rows = result.rows
    t.add_row("checkpoint period", *[str(r.checkpoint_period or "-") for r in rows])
    t.add_row("snapshot period", *[str(r.snapshot_period or "-") for r in rows])
    t.add_row("goodput", *[f"{r.goodput.mean:.1%}" for r in rows])
    t.add_row("  95 % interval", *[f"±{(r.goodput.high - r.goodput.low) / 2:.1%}" for r in rows])
    t.add_row("slice-weighted", *[f"{r.slice_weighted_goodput.mean:.1%}" for r in rows])
    t.add_row("steps lost a day", *[f"{r.steps_lost_per_day.mean:,.0f}" for r in rows])
    t.add_row("on fewer slices", *[f"{r.fewer_slices_share.mean:.1%}" for r in rows])
    t.add_row("restarts", *[f"{r.restarts.mean:.1f}" for r in rows])
    t.add_row("recoveries", *[f"{r.recoveries.mean:.1f}" for r in rows])
    out.print(t)
    out.print("a simulation: start-up, evaluation and anything the run did not measure are "
              "left out; `elastix workload goodput` measures a run", markup=False)
    for note in notes:
        out.print(f"note: {note}", markup=False)
