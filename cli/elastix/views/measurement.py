"""Rich tables for recovery measurements, soaks and goodput (what the chaos/goodput commands print)."""

from __future__ import annotations

from typing import Any

from elastix.measure.chaos import KillMeasurement
from elastix.measure.events import Recovery, fmt_ms, ms_of
from elastix.measure.goodput import GoodputReport
from elastix.measure.report import ChaosReport


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f} s"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _yn(x: bool | None) -> str:
    return "?" if x is None else ("yes" if x else "no")


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
    rows = [("kill", f"{fmt_ms(r.kill if r and r.kill else ms_of(k.time))}  "
                     f"{', '.join(x.pod for x in m.kills)}")]
    if r is None:
        rows.append(("recovery", "none observed" + (" (timed out)" if m.timed_out else "")))
    else:
        for phase, secs in r.phase_seconds().items():
            rows.append((phase, _phase(r, phase, secs)))
        rows.append(("detection counted from", r.detection_from or "-"))
        if r.restored_step is not None:
            size = NOT_IN_LOG if r.restore_bytes is None else f"{r.restore_bytes:,}"
            rows.append(("restored", f"step {r.restored_step} from {r.restore_source}, "
                                     f"{size} bytes in {_s(r.restore_seconds)}"))
        if "lost_slices" in r.not_in_log:
            rows.append(("slices lost", NOT_IN_LOG))
        if r.slices_before is not None or r.slices_after is not None:
            before, after = (("?" if n is None else n) for n in (r.slices_before, r.slices_after))
            rows.append(("live slices (steps)", f"{before} -> {after}"))
        if r.first_step is not None:
            rows.append(("first step after", f"step {r.first_step} at {fmt_ms(r.first_step_at)}"
                                             f" ({_s(r.first_step_seconds)})"))
        rows += [("downtime", _s(r.downtime)),
                 ("steps lost", "-" if r.steps_lost is None else
                  f"{r.steps_lost} (step {r.last_step} -> {r.restored_step})")]
    rows += [("JobSet restarts", str(m.jobset_restarts)), ("head restarts", str(m.head_restarts)),
             ("controller PID same", _yn(m.pid_same)),
             ("in-process recovery", _yn(m.in_process)), ("source", m.source)]
    if m.timed_out:
        rows.append(("result", "timed out before training resumed"))
    return rows


def print_kill(console: Any, m: KillMeasurement, title: str = "recovery") -> None:
    from rich.table import Table

    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    for what, val in recovery_rows(m):
        t.add_row(what, val)
    console.print(t)


def print_soak(console: Any, res: ChaosReport) -> None:
    from rich.table import Table

    t = Table(title="chaos run", title_justify="left")
    for col in ("kill", "pod", "detection", "from", "slices", "restore", "first step",
                "downtime", "steps lost", "in-process"):
        t.add_column(col, justify="left" if col == "pod" else "right")
    for i, m in enumerate(res.measurements, 1):
        r = m.recovery
        ph = r.phase_seconds() if r else {}
        t.add_row(str(i), ", ".join(k.pod for k in m.kills),
                  _phase(r, "detection", ph.get("detection")),
                  (r.detection_from if r else None) or "-",
                  _phase(r, "waiting for slices", ph.get("waiting for slices")),
                  _phase(r, "restore", ph.get("restore")),
                  _phase(r, "first step", ph.get("first step")), _s(r.downtime if r else None),
                  "-" if not r or r.steps_lost is None else str(r.steps_lost),
                  _yn(m.in_process))
    console.print(t)
    tot = res.to_json()["totals"]
    console.print(f"{tot['recovered']}/{tot['kills']} recovered; mean downtime "
                  f"{_s(tot['mean_downtime_seconds'])}, max {_s(tot['max_downtime_seconds'])}; "
                  f"{tot['steps_lost']} steps lost; goodput {_pct(tot['goodput'])}")
    print_verdict(console, res)


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
    t = Table(title=f"goodput {_pct(rep.goodput)} over {wall:.1f} s ({source}; {n} "
                    f"recover{'y' if n == 1 else 'ies'}, last step {rep.last_step})",
              title_justify="left")
    t.add_column("time spent")
    t.add_column("seconds", justify="right")
    t.add_column("share", justify="right")
    rows = [("productive", rep.productive_seconds)] + [
        (c, v) for c, v in sorted(rep.badput.items(), key=lambda kv: -kv[1]) if v > 0]
    for cause, secs in rows:
        t.add_row(cause if cause == "productive" else f"badput: {cause}", f"{secs:.3f}",
                  f"{secs / wall:.1%}" if wall else "-")
    console.print(t)
    unknown = [f"recovery {r.index}: {', '.join(r.not_in_log)}" for r in rep.recoveries
               if r.not_in_log]
    if unknown:  # its time is counted as "other", never guessed into a phase
        console.print(f"{NOT_IN_LOG}: {'; '.join(unknown)}", markup=False)
    origins = sorted({r.detection_from for r in rep.recoveries if r.detection_from})
    if origins:
        console.print(f"detection counted from: {' and '.join(origins)} (docs/events.md)",
                      markup=False)
