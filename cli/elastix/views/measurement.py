"""Rich tables for recovery measurements, soaks and goodput (what the chaos/goodput commands print)."""

from __future__ import annotations

from typing import Any

from elastix.backends.base import KillRecord
from elastix.measure.events import Recovery, fmt_ms, ms_of
from elastix.measure.goodput import GoodputReport
from elastix.measure.report import ChaosReport, KillMeasurement
from elastix.protocol.timefmt import iso_ms
from elastix.views.console import goodput_phrase


def _steps(first: int, last: int) -> str:
    return f"step {first}" if first == last else f"steps {first}-{last}"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f} s"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _yn(x: bool | None) -> str:
    return "?" if x is None else ("yes" if x else "no")


def _in_process(m: KillMeasurement, long: bool = False) -> str:
    """Whether it recovered in process; a stall (a hang shorter than the loss timeout) and a
    fault before the first step opened no recovery, which "no" would misread as a restart."""
    r = m.recovery
    if r is not None and r.complete and r.kind == "stall" and m.pid_same is not False:
        return "none needed: a stall (training waited for the host)" if long else "stall"
    if r is not None and r.complete and r.kind == "start-up" and m.pid_same is not False:
        return "none needed: before the first step" if long else "start-up"
    return _yn(m.in_process)


NOT_IN_LOG = "not in the log"


def _phase(r: Recovery | None, phase: str, secs: float | None) -> str:
    """A phase's seconds; one the recovery went through but its source did not log says so
    (MaxText logs no restore end when Orbax's line is missing), instead of a number or "-"."""
    if secs is None and r is not None and phase in r.not_in_log:
        return NOT_IN_LOG
    return _s(secs)


def recovery_rows(m: KillMeasurement) -> list[tuple[str, str]]:
    """(what, value) rows of one kill's recovery timeline, in time order."""
    r: Recovery | None = m.recovery
    k = m.kills[0]
    aimed = m.kills[m.openers] if 0 < m.openers < len(m.kills) else None
    rows = [("kill" if m.openers else _fault_word(m.fault),
             f"{fmt_ms(ms_of(k.time))}  {', '.join(x.pod for x in m.kills[:m.openers or None])}"
             + (" (opened the recovery)" if m.openers else ""))]
    if aimed is not None:
        rows.append((_fault_word(m.fault), f"{fmt_ms(ms_of(aimed.time))}  "
                                           f"{', '.join(x.pod for x in m.kills[m.openers:])}"))
    if m.fault != "kill" and m.fault != _fault_word(m.fault):
        rows.append(("fault", m.fault))
    if m.landing is not None:
        rows.append(("aimed", m.landing.text()))
    if m.cut_short:
        rows.append(("cut short", ", ".join(f"recovery {i}" for i in m.cut_short)
                     + ": never stepped; the phases below are the next one's, its downtime "
                       "counted from the first fault"))
    if m.planned is not None:
        rows.append(("planned", f"{m.planned:.3f} s after stepping"
                                + (f", landed {m.late:.3f} s late" if m.late else "")))
    if r is None:
        rows.append(("recovery", "none observed" + (" (timed out)" if m.timed_out else "")))
    else:
        for phase, secs in r.phase_seconds().items():
            rows.append((phase, _phase(r, phase, secs)))
            split = r.restore_split() if phase == "restore" else None
            if split is not None:
                rows.append(("of which", f"re-initialisation {_s(split['reinitialisation'])}, "
                                         f"load {_s(split['load'])}"))
        rows.append(("detection counted from", r.detection_from or "-"))
        if r.kill_to_loss is not None:  # before the loss the trainer dated: in no phase
            rows.append(("kill to loss", f"{_s(r.kill_to_loss)} (from the kill until the "
                                         "trainer dated the loss; in no phase above)"))
        for t in r.also_killed:
            rows.append(("also killed", f"{fmt_ms(t)}  {_when(r, t)}: replaced in this "
                                        "recovery"))
        for t, sl in r.lost_again:
            rows.append(("lost again", f"{fmt_ms(t)}  slices {sl} {_when(r, t)} (the "
                                       "trainer saw it)"))
        if r.restored_step is not None and r.restore_source == "init":
            rows.append(("restored", f"step {r.restored_step} from init (nothing saved was "
                                     "loaded)"))
        elif r.restored_step is not None:
            size = NOT_IN_LOG if r.restore_bytes is None else f"{r.restore_bytes:,}"
            rows.append(("restored", f"step {r.restored_step} from {r.restore_source}, "
                                     f"{size} bytes in {_s(r.restore_load_seconds)}"))
        if "lost_slices" in r.not_in_log:
            rows.append(("slices lost", NOT_IN_LOG))
        if r.slices_before is not None or r.slices_after is not None:
            before, after = (("?" if n is None else n) for n in (r.slices_before, r.slices_after))
            rows.append(("live slices (steps)", f"{before} -> {after}"))
        if r.first_step is not None:
            rows.append(("first step after", f"step {r.first_step} at {fmt_ms(r.first_step_at)}"
                                             f" ({_s(r.first_step_time_seconds)})"))
        rows += [("downtime", _s(r.downtime)),
                 ("steps lost", "-" if r.steps_lost is None else
                  f"{r.steps_lost} (step {max(r.last_step or 0, (r.steps_skipped or (0, 0))[1])}"
                  f" -> {r.restored_step})")]
        if r.steps_skipped is not None:
            first, last, said = r.steps_skipped
            rows.append(("steps skipped", f"{_steps(first, last)}: computed, never logged, "
                         "losses not read" + ("" if said else
                                              " (inferred: an events file from before "
                                              "steps_skipped)")))
    rows += [("JobSet restarts", str(m.jobset_restarts)), ("head restarts", str(m.head_restarts)),
             ("controller PID same", _yn(m.pid_same)),
             ("in-process recovery", _in_process(m, long=True)), ("source", m.source)]
    if m.timed_out:
        rows.append(("result", "timed out before training resumed"))
    if m.unreadable is not None:
        rows.append(("result", f"not measured to its end: {m.unreadable}"))
    if m.gone is not None and not (r and r.complete):
        rows.append(("result", f"not measured to its end: {m.gone}"))
    if m.interrupted:
        rows.append(("result", "not measured to its end: interrupted (Ctrl-C)"))
    return rows


def fault_line(rec: KillRecord) -> str:
    """``killed pod X (pid N) (slice 1, host 2) on node N at 2026-...Z`` (UTC, to the ms); the
    head, which is on no slice, is named as the head."""
    verb = fault_verb(rec)
    where = "the head" if rec.slice is None and rec.host is None else \
        f"slice {rec.slice}, host {rec.host}"
    node = f" on node {rec.node}" if rec.node else ""
    pid = f" (pid {rec.pid})" if rec.pid else ""
    return f"{verb} pod {rec.pod}{pid} ({where}){node} at {iso_ms(rec.time)}"


_VERBS = {
    # What was done to the pod, in the fault's own words (a hang kills nothing).
    "term": ("would terminate", "terminated (SIGTERM, then SIGKILL after the grace)"),
    "hang": ("would stop", "stopped (SIGSTOP)"),
}


def fault_verb(rec: KillRecord) -> str:
    """``killed``, ``terminated (SIGTERM, ...)``, ``stopped (SIGSTOP)``: by the fault made."""
    would, did = _VERBS.get(_fault_word(rec.fault or "kill"), ("would kill", "killed"))
    if rec.fault and rec.fault.startswith("term") and rec.grace is not None:
        did = f"terminated (SIGTERM, then SIGKILL after {rec.grace:g} s)"
    return would if rec.dry_run else did


def _when(r: Recovery, t: int) -> str:
    """``during restore``, or ``before the trainer detected the loss`` (in no phase yet)."""
    phase = r.phase_at(t)
    return "before the trainer detected the loss" if phase == "before detection" else \
        f"during {phase}"


def _fault_word(fault: str) -> str:
    """The row name of a fault: ``kill``, ``term``, ``hang``, ``slice``, ``head``."""
    return fault.split(" ", 1)[0]


def print_kill(console: Any, m: KillMeasurement, title: str = "recovery") -> None:
    from rich.table import Table

    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    for what, val in recovery_rows(m):
        t.add_row(what, val)
    console.print(t)


def _victims(m: KillMeasurement) -> str:
    """``1/0`` (slice 1, host 0); a slice killed whole is ``1/all``; the head ``head``."""
    if all(k.slice is None for k in m.kills):
        return "head"
    slices = sorted({k.slice for k in m.kills})
    if len(m.kills) > 1 and len(slices) == 1:
        return f"{slices[0]}/all"
    return ", ".join(f"{k.slice}/{k.host}" for k in m.kills)


def _n(secs: float | None) -> str:
    return "-" if secs is None else f"{secs:.3f}"


SOAK_COLUMNS = ("kill", "slice/host", "detect", "wait", "restore", "1st step", "downtime",
                "lost", "in-process")
"""The summary's columns: whole words that fit 80 columns with three-decimal seconds (the
units are in the title; the per-kill tables above carry the pods and every detail)."""


def print_soak(console: Any, res: ChaosReport) -> None:
    from rich.table import Table

    t = Table(title="chaos run (seconds; steps lost)", title_justify="left", box=None,
              pad_edge=False, header_style="bold")
    for col in SOAK_COLUMNS:
        t.add_column(col, justify="left" if col == "slice/host" else "right", no_wrap=True)
    unknown = False
    for i, m in enumerate(res.measurements, 1):
        r = m.recovery
        ph = r.phase_seconds() if r else {}
        cells = [_phase(r, p, ph.get(p)) if r else "-"
                 for p in ("detection", "waiting for slices", "restore", "first step")]
        unknown = unknown or NOT_IN_LOG in cells
        cells = ["?" if c == NOT_IN_LOG else c.removesuffix(" s") for c in cells]
        kind = _fault_word(m.fault)
        t.add_row(f"{i}" + ("" if kind == "kill" else f" {kind}"), _victims(m), *cells,
                  _n(r.downtime if r else None),
                  "-" if not r or r.steps_lost is None else str(r.steps_lost),
                  _in_process(m))
    console.print(t)
    if unknown:
        console.print(f"?: {NOT_IN_LOG}", markup=False)
    origins = sorted({m.recovery.detection_from for m in res.measurements
                      if m.recovery and m.recovery.detection_from})
    if origins:
        console.print(f"detection counted from: {' and '.join(origins)}", markup=False)
    for i, m in enumerate(res.measurements, 1):
        if m.landing is not None:
            console.print(f"fault {i} aimed {m.landing.text()}", markup=False)
        if m.late:
            console.print(f"fault {i} landed {m.late:.3f} s after it was due ("
                          f"{_why_late(res.measurements[i - 2] if i > 1 else None, m)})",
                          markup=False)
    tot = res.to_json()["totals"]
    console.print(f"{tot['recovered']}/{tot['kills']} recovered; mean downtime "
                  f"{_s(tot['mean_downtime_seconds'])}, max {_s(tot['max_downtime_seconds'])}; "
                  f"{tot['steps_lost']} step{'' if tot['steps_lost'] == 1 else 's'} lost; goodput "
                  f"{run_goodput(res)}"
                  + (f" (chaos window: {window_goodput(res)} from the first fault)"
                     if res.window else ""), markup=False)
    if res.verify is not None:
        console.print(res.verify.text(), markup=False)
    print_verdict(console, res)


def _why_late(prev: KillMeasurement | None, m: KillMeasurement) -> str:
    """Why fault ``m`` came after its time: the fault before it was still being measured
    (its recovery had not stepped yet when ``m`` was due), or else its own delivery."""
    due = ms_of(m.kills[0].time) - round((m.late or 0.0) * 1000)
    r = prev.recovery if prev is not None else None
    if prev is not None and (r is None or not r.complete or (r.first_step_at or 0) > due):
        return "the previous recovery was being measured"
    return "reading the workload and delivering the fault took that long"


def print_schedule(console: Any, name: str, rows: list[dict[str, Any]]) -> None:
    """``chaos run --dry-run``: the faults planned, one row a round; nothing was killed."""
    from rich.table import Table

    t = Table(title=f"chaos run {name}: faults planned (nothing killed)", title_justify="left",
              box=None, pad_edge=False, header_style="bold")
    for col in ("round", "fault", "when", "target"):
        t.add_column(col, justify="right" if col == "round" else "left", no_wrap=True)
    for r in rows:
        fault = r["fault"] + (f" x{r['count']}" if r["count"] > 1 else "") + (
            f", {r['spread_seconds']:g} s apart" if r["count"] > 1 and r["spread_seconds"]
            else "")
        t.add_row(str(r["round"]), fault, r["when"], r["target"])
    console.print(t)


def run_goodput(res: ChaosReport) -> str:
    """The run's goodput, in seconds first where it is short or mostly start-up."""
    g = res.goodput
    if g is None:
        return "-"
    return goodput_phrase(g.goodput, g.wall_seconds, g.badput.get("startup"))


def window_goodput(res: ChaosReport) -> str:
    """The chaos window's goodput (the ``--min-goodput`` bound's), phrased as the run's."""
    if not res.window:
        return "-"
    return goodput_phrase(res.window_goodput, (res.window[1] - res.window[0]) / 1000)


def print_verdict(console: Any, res: ChaosReport) -> None:
    """The missed bounds and why the run stopped, under either table."""
    for v in res.violations:
        console.print(f"[red]bound missed:[/] {v.text()}")
    if res.stopped:
        console.print(f"stopped: {res.stopped}", markup=False)


def print_goodput(console: Any, rep: GoodputReport, source: str) -> None:
    from rich.table import Table

    wall = rep.wall_seconds
    n = len(rep.recoveries)
    # The caption on a line of its own: as a table title it wraps at the narrow table's width.
    console.print(f"goodput {goodput_phrase(rep.goodput, wall, rep.badput.get('startup'))}",
                  markup=False)
    console.print(f"({source}; {n} recover{'y' if n == 1 else 'ies'}, last step "
                  f"{rep.last_step})", markup=False)
    t = Table()
    t.add_column("time spent")
    t.add_column("seconds", justify="right")
    t.add_column("share", justify="right")
    rows = [("productive", rep.productive_seconds)] + [
        (c, v) for c, v in sorted(rep.badput.items(), key=lambda kv: -kv[1]) if v > 0]
    for cause, secs in rows:
        t.add_row(cause if cause == "productive" else f"badput: {cause}", f"{secs:.3f}",
                  f"{secs / wall:.1%}" if wall else "-")
    console.print(t)
    if rep.clock == "device":
        console.print("steps timed on the devices (each from the previous result ready to its "
                      "own); a copy's stall is what it added to the steps' pace",
                      markup=False)
    elif rep.last_step is not None:
        console.print("steps timed by the loop (no device clock in these events: MaxText, a "
                      "log, or elastix before issue 74); a copy's stall is the loop's wait for "
                      "it", markup=False)
    if rep.slice_weighted_goodput is not None:
        console.print(f"slice-weighted goodput {_pct(rep.slice_weighted_goodput)} (productive "
                      f"time x live slices / {rep.full_mesh_slices} of the full mesh)",
                      markup=False)
    unknown = [f"recovery {r.index}: {', '.join(r.not_in_log)}" for r in rep.recoveries
               if r.not_in_log]
    if unknown:  # its time is counted as "other", never guessed into a phase
        console.print(f"{NOT_IN_LOG}: {'; '.join(unknown)}", markup=False)
    origins = sorted({r.detection_from for r in rep.recoveries if r.detection_from})
    if origins:
        console.print(f"detection counted from: {' and '.join(origins)} (docs/events.md)",
                      markup=False)
    if rep.failed_saves:  # training went on; the steps since the last commit were at risk
        n = rep.failed_saves
        console.print(f"{n} checkpoint save{'' if n == 1 else 's'} failed (last: "
                      f"{rep.last_save_error}); their blocking time is badput: failed saves",
                      markup=False)


def _period(steps: int | None, step_seconds: float, what: str) -> str:
    if not steps:
        return f"no {what}s"
    return f"every {steps} step{'s' if steps != 1 else ''} ({steps * step_seconds:.1f} s)"


def print_advice(console: Any, advice: Any, source: str) -> None:
    """``workload advise``: what was measured, today's periods and the advised ones, each with
    its expected goodput (first-order model), and the notes."""
    from rich.table import Table

    m = advice.measured
    console.print(
        f"measured ({source}): step {m.step:.3f} s; a save's stall "
        f"{_s(m.checkpoint_stall)} ({m.saves} saves), a snapshot's {_s(m.snapshot_stall)} "
        f"({m.snapshots}); recovery downtime {_s(m.downtime)} (median); failures: "
        f"MTBF {advice.mtbf:.0f} s ({advice.mtbf_from})"
        + (f", controller MTBF {advice.head_mtbf:.0f} s" if advice.head_mtbf else ""),
        markup=False)
    t = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("", "today", "advised"):
        t.add_column(col)
    today, adv = advice.today, advice.advised
    t.add_row("--snapshot-period", _period(today.snapshot_period, m.step, "snapshot"),
              _period(adv.snapshot_period, m.step, "snapshot"))
    t.add_row("--checkpoint-period", _period(today.checkpoint_period, m.step, "checkpoint"),
              _period(adv.checkpoint_period, m.step, "checkpoint"))
    for part in today.waste:
        t.add_row(f"  badput: {part}", _pct(today.waste[part]), _pct(adv.waste.get(part)))
    t.add_row("expected goodput", _pct(today.goodput), _pct(adv.goodput))
    console.print(t)
    console.print("expected: a first-order model (Young-Daly) of stalls, lost work and "
                  "downtime only; `elastix workload goodput` measures the run", markup=False)
    for note in advice.notes:
        console.print(f"note: {note}", markup=False)
