"""PNG charts of a recovery and of goodput over a run. matplotlib is imported lazily (Agg).

- :func:`plot_recovery`: one recovery's phases as coloured bars over time (seconds since the
  kill), with the steps completed as a line: the picture the Pathways blog post draws by hand.
- :func:`plot_goodput`: a run's time coloured by cause, the step line, and goodput over time
  (per window and cumulative), for a soak.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from elastix.errors import UsageError
from elastix.measure.events import Event, Recovery
from elastix.measure.goodput import GoodputReport

# One colour per phase / cause; the recovery phases and their goodput causes share colours.
COLORS = {
    "productive": "#2ca02c",
    "detection": "#d62728",
    "cleanup": "#9467bd",
    "waiting for slices": "#ff7f0e",
    "restore": "#1f77b4",
    "first step": "#8c564b",
    "recompile": "#8c564b",
    "restart": "#e377c2",
    "checkpoint stall": "#bcbd22",
    "steps re-done": "#7f7f7f",
    "startup": "#17becf",
    "other": "#dddddd",
}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UsageError("--plot needs matplotlib",
                         hint="pip install 'elastix[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_plot_path(path: str) -> None:
    """Fail now, not after a kill, when ``--plot`` cannot be written: checked before acting.

    Raises:
        UsageError: not ``*.png``, a directory, its directory missing or not writable, or no
            matplotlib.
    """
    if not str(path).lower().endswith(".png"):
        raise UsageError(f"--plot {path}: only PNG is written", hint="name the file *.png")
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise UsageError(f"cannot write {path}: it is a directory", hint="give a file name *.png")
    if not parent.is_dir():
        raise UsageError(f"cannot write {path}: no directory {parent}",
                         hint="create the directory first, or --plot another path")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"cannot write {path}: permission denied",
                         hint="--plot a path you can write")
    _pyplot()


def _save(fig: Any, path: str) -> None:
    check_plot_path(path)
    try:
        fig.savefig(path, dpi=110)
    except OSError as err:
        raise UsageError(f"cannot write {path}: {err.strerror or err}") from None


@contextlib.contextmanager
def _figure(path: str, *args: Any, **kwargs: Any) -> Iterator[Any]:
    """``plt.subplots(*args, **kwargs)``'s axes to draw on; then laid out, saved to ``path``
    and closed (closed also when drawing fails: pyplot keeps every open figure alive)."""
    plt = _pyplot()
    fig, axes = plt.subplots(*args, **kwargs)
    try:
        yield axes
        fig.tight_layout()
        _save(fig, path)
    finally:
        plt.close(fig)


def _secs(x: float) -> str:
    return f"{x:.2f} s" if x < 1 else f"{x:.1f} s"


def _steps(events: list[Event], lo: int, hi: int) -> tuple[list[int], list[int]]:
    ts, steps = [], []
    for ev in events:
        if ev.name == "step" and lo <= ev.t <= hi:
            ts.append(ev.t)
            steps.append(ev.data["step"])
    return ts, steps


def plot_recovery(events: list[Event], rec: Recovery, path: str,
                  margin_seconds: float = 10.0) -> list[str]:
    """Draw one recovery's timeline to a PNG and return the phases drawn, in order.

    Raises:
        UsageError: no phase to draw, matplotlib missing, or the file cannot be written.
    """
    phases = rec.phases()
    if not phases:
        raise UsageError(f"recovery {rec.index} has no measured phase to plot")
    origin = rec.kill if rec.kill is not None else phases[0][1]
    end = phases[-1][2]
    margin = int(margin_seconds * 1000)
    with _figure(path, figsize=(10, 3.6)) as ax:
        for name, a, b in phases:
            ax.barh(0, (b - a) / 1000, left=(a - origin) / 1000, height=0.5,
                    color=COLORS[name], label=f"{name} {_secs((b - a) / 1000)}")
        ax.set_yticks([])
        ax.set_ylim(-0.5, 2.0)  # the bars take the lower third, the step line runs above
        ax.set_xlabel("seconds since the kill" if rec.kill is not None else "seconds")
        ts, steps = _steps(events, origin - margin, end + margin)
        ax2 = ax.twinx()
        ax2.plot([(t - origin) / 1000 for t in ts], steps, color="black", lw=1.2, marker=".",
                 ms=3, drawstyle="steps-post", label="step completed")
        ax2.set_ylabel("step")
        ax.axvline(0, color="black", ls="--", lw=0.8)
        title = f"recovery {rec.index} ({rec.kind})"
        if rec.downtime is not None:
            title += f": downtime {rec.downtime:.1f} s"
        if rec.steps_lost is not None:
            title += f", {rec.steps_lost} step{'' if rec.steps_lost == 1 else 's'} lost"
        ax.set_title(title)
        ax.set_xlim((max(origin - margin, ts[0] if ts else origin) - origin) / 1000,
                    (end + margin - origin) / 1000)
        ax.legend(loc="upper left", fontsize=8, ncol=3, frameon=False)
    return [n for n, _, _ in phases]


def plot_goodput(report: GoodputReport, events: list[Event], path: str,
                 window_seconds: float = 60.0) -> list[str]:
    """Draw a run's causes over time, its steps and goodput over time; return the causes drawn.

    Raises:
        UsageError: an empty run, matplotlib missing, or the file cannot be written.
    """
    if report.end <= report.start:
        raise UsageError("no events to plot", hint="has the trainer started?")
    drawn: list[str] = []
    with _figure(path, 2, 1, figsize=(11, 5.5), sharex=True,
                 gridspec_kw={"height_ratios": [1, 1.3]}) as (ax, axg):
        for cause, a, b in report.segments:
            ax.barh(0, (b - a) / 1000, left=(a - report.start) / 1000, height=0.6,
                    color=COLORS[cause], label=None if cause in drawn else cause)
            if cause not in drawn:
                drawn.append(cause)
        ax.set_yticks([])
        ax.set_ylim(-0.5, 0.9)
        ax2 = ax.twinx()
        ts, steps = _steps(events, report.start, report.end)
        ax2.plot([(t - report.start) / 1000 for t in ts], steps, color="black", lw=1,
                 drawstyle="steps-post")
        ax2.set_ylabel("step")
        ax.legend(loc="upper left", fontsize=7, ncol=6, frameon=False)
        n = len(report.recoveries)
        ax.set_title(f"goodput {report.goodput:.1%} over {report.wall_seconds:.0f} s, "
                     f"{n} recover{'y' if n == 1 else 'ies'}")
        series = report.series(window_seconds)
        xs = [x for x, _, _ in series]
        lefts = [0.0] + xs[:-1]
        widths = [b - a for a, b in zip(lefts, xs, strict=True)]
        axg.bar(lefts, [w for _, w, _ in series], width=widths,
                align="edge", color=COLORS["productive"], alpha=0.6, edgecolor="white",
                label=f"goodput per {window_seconds:g} s")
        axg.plot(xs, [c for _, _, c in series], color="black", label="cumulative goodput")
        for rec in report.recoveries:
            at = rec.kill if rec.kill is not None else rec.start
            if at is not None:
                axg.axvline((at - report.start) / 1000, color=COLORS["detection"], ls="--", lw=0.8)
        axg.set_ylim(0, 1.05)
        axg.set_ylabel("goodput")
        axg.set_xlabel("seconds since the run started")
        axg.legend(loc="lower right", fontsize=8, frameon=False)
    return drawn
