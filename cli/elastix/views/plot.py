"""PNG charts of a recovery and of goodput over a run. matplotlib is imported lazily (Agg).

- :func:`plot_recovery`: one recovery's phases as coloured bars over time (seconds since the
  kill), with the steps completed as a line: the picture the Pathways blog post draws by hand.
- :func:`plot_goodput`: a run's time coloured by cause, the step line, and goodput over time
  (per window and cumulative), for a soak.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from elastix.errors import UsageError
from elastix.measure.events import Event, Recovery
from elastix.measure.goodput import GoodputReport, auto_window

# One colour per phase / cause; the recovery phases and their goodput causes share colours.
COLORS = {
    "productive": "#2ca02c",
    "detection": "#d62728",
    "cleanup": "#9467bd",
    "waiting for slices": "#ff7f0e",
    "restore": "#1f77b4",
    "first step": "#8c564b",
    "reinitialisation": "#c5b0d5",
    "recompile": "#8c564b",
    "restart": "#e377c2",
    "checkpoint stall": "#bcbd22",
    "steps re-done": "#7f7f7f",
    "startup": "#17becf",
    "start-up": "#17becf",  # a fault the run's start absorbed (chaos --during startup)
    "stall": "#ffbb78",  # a hang shorter than the loss timeout
    "other": "#dddddd",
}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UsageError("--plot needs matplotlib",
                         hint="pip install 'elastix[plot]'") from None
    from elastix.views.fonts import bundled_fonts_only

    bundled_fonts_only()  # no scan of the system's fonts: minutes on some machines
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


@dataclasses.dataclass(frozen=True)
class Chart:
    """What a chart drew, for the caller to report and the tests to check."""

    drawn: list[str]
    """The phases or causes drawn, in order."""
    xlim: tuple[float, float]
    """The x axis's range, in the chart's seconds."""
    window_seconds: float | None = None
    """The goodput window the lower panel used (goodput charts)."""
    legend: tuple[str, ...] = ()
    """Every legend entry, in order: each names something drawn."""


def _pad(span_seconds: float, cap: float) -> float:
    """Room around the data: a quarter of its span, at least half a second, at most ``cap``."""
    return min(max(span_seconds * 0.25, 0.5), cap)


def _legend_below(fig: Any, axes: list[Any]) -> tuple[str, ...]:
    """One legend for every labelled artist, under the plot (never over data or border)."""
    handles, labels = [], []
    for ax in axes:
        h, lab = ax.get_legend_handles_labels()
        handles += h
        labels += lab
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=8,
                   frameon=False, bbox_to_anchor=(0.5, 0.0))
    return tuple(labels)


def plot_recovery(events: list[Event], rec: Recovery, path: str,
                  margin_seconds: float = 10.0, fault: str = "kill") -> Chart:
    """Draw one recovery's timeline to a PNG: the steps completed over time above, the
    recovery's phases as one bar below, on one time axis that ends shortly after the data.

    Raises:
        UsageError: no phase to draw, matplotlib missing, or the file cannot be written.
    """
    phases = rec.phases()
    if not phases:
        raise UsageError(f"recovery {rec.index} has no measured phase to plot")
    origin = rec.kill if rec.kill is not None else phases[0][1]
    end = phases[-1][2]
    pad = _pad((end - origin) / 1000, margin_seconds)
    ts, steps = _steps(events, origin - int(pad * 1000), end + int(pad * 1000))
    lo, hi = -pad, (end - origin) / 1000 + pad  # the steps drawn are those inside
    with _figure(path, 2, 1, figsize=(10, 4.4), sharex=True,
                 gridspec_kw={"height_ratios": [3, 1]}) as (ax, axp):
        fig = ax.figure
        ax.plot([(t - origin) / 1000 for t in ts], steps, color="black", lw=1.2, marker=".",
                ms=3, drawstyle="steps-post", label="step completed")
        ax.set_ylabel("step")
        for name, a, b in phases:
            axp.barh(0, (b - a) / 1000, left=(a - origin) / 1000, height=0.8,
                     color=COLORS[name], label=f"{name} {_secs((b - a) / 1000)}")
        axp.set_yticks([])
        axp.set_ylim(-0.6, 0.6)
        kill = fault if rec.kill is not None else "first event"
        for a in (ax, axp):
            a.axvline(0, color="black", ls="--", lw=0.8, label=kill if a is ax else None)
        for t in rec.also_killed:  # faults this recovery took in besides its first
            for a in (ax, axp):
                a.axvline((t - origin) / 1000, color="black", ls=":", lw=0.8,
                          label="also killed" if a is ax and t == rec.also_killed[0] else None)
        axp.set_xlabel(f"seconds since the {fault.split(' ')[0]}" if rec.kill is not None
                       else "seconds")
        title = f"recovery {rec.index} ({rec.kind})"
        if rec.downtime is not None:
            title += f": downtime {rec.downtime:.1f} s"
        if rec.steps_lost is not None:
            title += f", {rec.steps_lost} step{'' if rec.steps_lost == 1 else 's'} lost"
        ax.set_title(title)
        ax.set_xlim(lo, hi)
        legend = _legend_below(fig, [ax, axp])
        fig.tight_layout(rect=(0, 0.12, 1, 1))
    return Chart([n for n, _, _ in phases], (lo, hi), legend=legend)


def plot_goodput(report: GoodputReport, events: list[Event], path: str,
                 window_seconds: float | None = None,
                 faults: dict[int, str] | None = None) -> Chart:
    """Draw a run's steps over time, what each moment was spent on, and goodput over time
    (per window, and cumulative from the first moment on); return what was drawn.

    ``window_seconds`` None picks about 20 windows over the run (:func:`auto_window`): a fixed
    minute would draw one flat block for a short smoke run. ``faults`` names the fault at each
    kill time (ms): ``term``, ``hang (10 s)``... (a plain kill when not named).

    Raises:
        UsageError: an empty run, matplotlib missing, or the file cannot be written.
    """
    if report.end <= report.start:
        raise UsageError("no events to plot", hint="has the trainer started?")
    wall = (report.end - report.start) / 1000
    window = window_seconds if window_seconds is not None else auto_window(wall)
    drawn: list[str] = []
    with _figure(path, 3, 1, figsize=(11, 6.4), sharex=True,
                 gridspec_kw={"height_ratios": [1.4, 0.5, 1.4]}) as (ax, axc, axg):
        fig = ax.figure
        ts, steps = _steps(events, report.start, report.end)
        ax.plot([(t - report.start) / 1000 for t in ts], steps, color="black", lw=1,
                drawstyle="steps-post")
        ax.set_ylabel("step")
        # one collection per cause (in order of first appearance: the legend's order), not a
        # bar per segment: a soak has thousands (a step, then a save's stall...), and a bar
        # each took seconds to draw after the last measurement
        bars: dict[str, list[tuple[float, float]]] = {}
        for cause, a, b in report.segments:
            bars.setdefault(cause, []).append(((a - report.start) / 1000, (b - a) / 1000))
        for cause, spans in bars.items():
            axc.broken_barh(spans, (-0.4, 0.8), color=COLORS[cause], label=cause, linewidth=0)
            drawn.append(cause)
        axc.set_yticks([])
        axc.set_ylim(-0.6, 0.6)
        n = len(report.recoveries)
        ax.set_title(f"goodput {report.goodput:.1%} over {report.wall_seconds:.0f} s, "
                     f"{n} recover{'y' if n == 1 else 'ies'}")
        series = report.series(window)
        xs = [x for x, _, _ in series]
        lefts = [0.0] + xs[:-1]
        widths = [b - a for a, b in zip(lefts, xs, strict=True)]
        axg.bar(lefts, [w for _, w, _ in series], width=widths, align="edge",
                color=COLORS["productive"], alpha=0.6, edgecolor="white",
                label=f"goodput per {_window_label(window)}")
        fine = report.series(max(wall / 200, 0.001))
        axg.plot([0.0] + [x for x, _, _ in fine], [0.0] + [c for _, _, c in fine],
                 color="black", label="cumulative goodput")
        labelled: set[str] = set()
        styles = ("--", ":", "-.", (0, (5, 1)), (0, (1, 3)))
        kinds: list[str] = []
        for rec in report.recoveries:
            at = rec.kill if rec.kill is not None else rec.start
            if at is None:
                continue
            kind = (faults or {}).get(at, "kill")
            if kind not in kinds:
                kinds.append(kind)
            for a in (ax, axc, axg):
                a.axvline((at - report.start) / 1000, color=COLORS["detection"],
                          ls=styles[kinds.index(kind) % len(styles)], lw=0.8,
                          label=kind if a is axg and kind not in labelled else None)
            labelled.add(kind)
        axg.set_ylim(0, 1.05)
        axg.set_ylabel("goodput")
        axg.set_xlabel("seconds since the run started")
        axg.set_xlim(0, wall)
        legend = _legend_below(fig, [axc, axg])
        fig.tight_layout(rect=(0, 0.13, 1, 1))
    return Chart(drawn, (0.0, wall), window_seconds=window, legend=legend)


def _window_label(seconds: float) -> str:
    """``60 s`` as a window's label, ``1.5 s`` for short ones."""
    return f"{seconds:g} s"


def plot_advice(advice: Any, which: str, points: list[tuple[int, float]], path: str) -> Chart:
    """``workload advise --plot``: the expected badput against the ``which`` period (steps, log
    scale), today's and the advised period marked."""
    today = advice.today.snapshot_period if which == "snapshot" else \
        advice.today.checkpoint_period
    best = advice.advised.snapshot_period if which == "snapshot" else \
        advice.advised.checkpoint_period
    with _figure(path, figsize=(8, 4.4)) as ax:
        fig = ax.figure
        ax.plot([p for p, _ in points], [b for _, b in points], color="black", lw=1.2,
                label="expected badput")
        for steps, label, colour in ((today, "today", COLORS["detection"]),
                                     (best, "advised", COLORS["productive"])):
            if steps:
                ax.axvline(steps, color=colour, ls="--", lw=1,
                           label=f"{label}: every {steps} steps")
        ax.set_xscale("log")
        ax.set_xlabel(f"--{which}-period (steps)")
        ax.set_ylabel("expected badput (fraction of wall time)")
        ax.set_title(f"{which} period: stall against work lost (MTBF {advice.mtbf:.0f} s)")
        legend = _legend_below(fig, [ax])
        fig.tight_layout(rect=(0, 0.12, 1, 1))
    return Chart(["expected badput"], (points[0][0], points[-1][0]), legend=legend)
