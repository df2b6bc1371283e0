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
from typing import TYPE_CHECKING, Any

from elastix.errors import UsageError, shown
from elastix.measure.events import Event, Recovery
from elastix.measure.goodput import GoodputReport, auto_window
from elastix.views.console import duration_words, goodput_phrase

if TYPE_CHECKING:
    from elastix.measure.report import ChaosReport

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
    "snapshot stall": "#dbdb8d",
    "steps re-done": "#7f7f7f",
    "startup": "#17becf",
    "final save": "#aec7e8",
    "teardown": "#c7c7c7",
    "start-up": "#17becf",  # a fault the run's start absorbed (chaos --during startup)
    "stall": "#ffbb78",  # a hang shorter than the loss timeout
    "other": "#dddddd",
}
# A missed bound, in both charts: brighter than detection's red, and drawn as a span with its
# words, never as a bar of its own.
MISSED = "#ff0000"
MISSED_LABEL = "bound missed"


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


def check_plot_path(path: str, flag: str = "--plot") -> None:
    """Fail now, not after a kill, when ``--plot`` cannot be written: checked before acting.

    Raises:
        UsageError: not ``*.png``, a directory, its directory missing or not writable, or no
            matplotlib.
    """
    if not str(path).lower().endswith(".png"):
        raise UsageError(f"{flag} {path}: only PNG is written", hint="name the file *.png")
    try:
        _check_plot_path(Path(path), path, flag)
    except OSError as e:  # a name too long, a loop of links
        raise UsageError(f"{flag} {shown(path)}: {e.strerror or e}",
                         hint="give a shorter path you can write") from None
    _pyplot()


def _check_plot_path(p: Path, path: str, flag: str) -> None:
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise UsageError(f"cannot write {path}: it is a directory", hint="give a file name *.png")
    if not parent.is_dir():
        raise UsageError(f"cannot write {path}: no directory {parent}",
                         hint=f"create the directory first, or {flag} another path")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"cannot write {path}: permission denied",
                         hint=f"{flag} a path you can write")


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
    figure: Any = None
    """The matplotlib figure drawn (closed), for the tests to look at its artists."""


def _pad(span_seconds: float, cap: float) -> float:
    """Room around the data: a quarter of its span, at least half a second, at most ``cap``."""
    return min(max(span_seconds * 0.25, 0.5), cap)


def _legend_below(fig: Any, axes: list[Any], ncol: int = 4) -> tuple[str, ...]:
    """One legend for every labelled artist, under the plot (never over data or border)."""
    handles, labels = [], []
    for ax in axes:
        h, lab = ax.get_legend_handles_labels()
        handles += h
        labels += lab
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), ncol), fontsize=8,
                   frameon=False, bbox_to_anchor=(0.5, 0.0))
    return tuple(labels)


def _draw_recovery(ax: Any, axp: Any, events: list[Event], rec: Recovery,
                   margin_seconds: float, fault: str, missed: tuple[str, ...],
                   title: str = "") -> tuple[list[str], tuple[float, float]]:
    """One recovery on ``ax`` (steps) and ``axp`` (phases); returns (phases, x limits)."""
    phases = rec.phases()
    origin = rec.kill if rec.kill is not None else phases[0][1]
    end = phases[-1][2]
    pad = _pad((end - origin) / 1000, margin_seconds)
    ts, steps = _steps(events, origin - int(pad * 1000), end + int(pad * 1000))
    lo, hi = -pad, (end - origin) / 1000 + pad  # the steps drawn are those inside
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
    title = title or f"recovery {rec.index} ({rec.kind})"
    if rec.downtime is not None:
        title += f": downtime {rec.downtime:.3f} s"  # the table's number, to the ms
    if rec.steps_lost is not None:
        title += f", {rec.steps_lost} step{'' if rec.steps_lost == 1 else 's'} lost"
    if missed:
        _missed_span(ax, 0.0, (end - origin) / 1000, missed, (lo, hi))
        axp.axvspan(0.0, (end - origin) / 1000, facecolor=MISSED, alpha=0.15, edgecolor=MISSED,
                    lw=1.2, zorder=0)
        title += ": bound missed"
    ax.set_title(title, color=MISSED if missed else "black")
    ax.set_xlim(lo, hi)
    return [n for n, _, _ in phases], (lo, hi)


def _missed_span(ax: Any, x0: float, x1: float, missed: tuple[str, ...],
                 xlim: tuple[float, float]) -> None:
    """A recovery that missed a bound: its span red, labelled with the bounds it missed (on
    the side of the span with room for the words)."""
    ax.axvspan(x0, x1, facecolor=MISSED, alpha=0.15, edgecolor=MISSED, lw=1.2, zorder=0,
               label=MISSED_LABEL)
    left = x1 > (xlim[0] + xlim[1]) / 2
    ax.text(x0 if left else x1, 0.96, "\n".join(missed), transform=ax.get_xaxis_transform(),
            color=MISSED, fontsize=8, fontweight="bold", ha="right" if left else "left",
            va="top", bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})


def plot_recovery(events: list[Event], rec: Recovery, path: str,
                  margin_seconds: float = 10.0, fault: str = "kill",
                  missed: tuple[str, ...] = ()) -> Chart:
    """Draw one recovery's timeline to a PNG: the steps completed over time above, the
    recovery's phases as one bar below, on one time axis that ends shortly after the data.
    ``missed``: the bounds it missed (``downtime 3.2 s > 2 s``), drawn in red.

    Raises:
        UsageError: no phase to draw, matplotlib missing, or the file cannot be written.
    """
    if not rec.phases():
        raise UsageError(f"recovery {rec.index} has no measured phase to plot")
    with _figure(path, 2, 1, figsize=(10, 4.4), sharex=True,
                 gridspec_kw={"height_ratios": [3, 1]}) as (ax, axp):
        fig = ax.figure
        drawn, xlim = _draw_recovery(ax, axp, events, rec, margin_seconds, fault, missed)
        legend = _legend_below(fig, [ax, axp])
        fig.tight_layout(rect=(0, 0.12, 1, 1))
    return Chart(drawn, xlim, legend=legend, figure=fig)


def plot_recoveries(events: list[Event], kills: list[Kill], path: str,
                    margin_seconds: float = 10.0) -> Chart:
    """``chaos run --timeline``: every kill's recovery as :func:`plot_recovery` draws it, one
    under the other in one PNG, each on its own axis (seconds since its fault). A kill with no
    measured recovery gets a row saying so. The legend lists each phase once.

    Raises:
        UsageError: no kill, matplotlib missing, or the file cannot be written.
    """
    if not kills:
        raise UsageError("no fault was made: no timeline to draw")
    height = 0.8 + 3.6 * len(kills)
    with _figure(path, 3 * len(kills), 1, figsize=(12, height), squeeze=False,
                 gridspec_kw={"height_ratios": [3, 1, 1.1] * len(kills), "hspace": 0.1}
                 ) as axes:
        fig = axes[0][0].figure
        drawn: list[str] = []
        legend: list[str] = []
        xlim = (0.0, 0.0)
        for n, k in enumerate(kills):
            ax, axp = axes[3 * n][0], axes[3 * n + 1][0]
            axes[3 * n + 2][0].set_axis_off()  # room for the x label and the next title
            axp.sharex(ax)
            ax.tick_params(labelbottom=False)
            head = f"kill {k.index}"
            if k.recovery is None or not k.recovery.phases():
                _no_recovery(ax, axp, head, k.missed)
                legend += _legend_right(ax, axp)
                continue
            names, xlim = _draw_recovery(ax, axp, events, k.recovery, margin_seconds, k.fault,
                                         k.missed, title=f"{head}, recovery {k.recovery.index}")
            drawn += [x for x in names if x not in drawn]
            legend += _legend_right(ax, axp)
        fig.subplots_adjust(left=0.07, right=0.8, top=1 - 0.45 / height, bottom=0.0)
    return Chart(drawn, xlim, legend=tuple(legend), figure=fig)


def _legend_right(ax: Any, axp: Any) -> list[str]:
    """One kill's legend, right of its rows (each kill's phases have their own seconds)."""
    handles, labels = ax.get_legend_handles_labels()
    h, lab = axp.get_legend_handles_labels()
    ax.legend(handles + h, labels + lab, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              fontsize=7, frameon=False)
    return labels + lab


@dataclasses.dataclass(frozen=True)
class Kill:
    """One row of :func:`plot_recoveries`: a fault and what it measured."""

    index: int
    """1-based, as the report numbers kills."""
    recovery: Recovery | None
    fault: str = "kill"
    missed: tuple[str, ...] = ()
    """The bounds it missed, as :meth:`Violation.label` words them."""


def kills_of(res: ChaosReport) -> list[Kill]:
    """A chaos report's kills as :func:`plot_recoveries` draws them, each with its missed
    bounds."""
    return [Kill(i, m.recovery, m.fault, tuple(v.label() for v in res.kill_violations(i)))
            for i, m in enumerate(res.measurements, 1)]


def _no_recovery(ax: Any, axp: Any, head: str, missed: tuple[str, ...]) -> None:
    colour = MISSED if missed else "black"
    ax.set_title(f"{head}: no recovery measured" + (": bound missed" if missed else ""),
                 color=colour)
    ax.text(0.5, 0.5, "\n".join(missed) or "no recovery phase in the events",
            transform=ax.transAxes, ha="center", va="center", color=colour)
    if missed:
        ax.axvspan(0, 1, facecolor=MISSED, alpha=0.15, edgecolor=MISSED, label=MISSED_LABEL)
    for a in (ax, axp):
        a.set_xticks([])
        a.set_yticks([])


@dataclasses.dataclass(frozen=True)
class _TimeAxis:
    """The goodput chart's time axis: seconds since ``origin``, drawn to scale from ``lo`` on;
    the time before ``lo`` folded into a block ``fold`` seconds of axis wide (0: none)."""

    origin: int
    lo: int
    fold: float

    def x(self, t: int) -> float:
        return (t - self.origin) / 1000

    @property
    def left(self) -> float:
        return self.x(self.lo) - self.fold


FOLD_SHARE = 0.07  # of the axis's width, for the folded start-up


def _time_axis(report: GoodputReport, chaos_window: tuple[int, int] | None) -> _TimeAxis:
    """A chaos run's axis: from a little before its first fault, the run's start folded into one
    narrow block (a start-up of minutes would leave the recoveries a few pixels wide)."""
    if chaos_window is None:
        return _TimeAxis(report.start, report.start, 0.0)
    first = max(chaos_window[0], report.start)
    margin = _pad((report.end - first) / 1000, 30.0)  # as much room as a recovery chart's
    lo = max(report.start, first - int(margin * 1000))
    fold = (report.end - lo) / 1000 * FOLD_SHARE / (1 - FOLD_SHARE)
    if (lo - report.start) / 1000 <= fold:  # folding would not save room: draw it to scale
        return _TimeAxis(first, report.start, 0.0)
    return _TimeAxis(first, lo, fold)


def _fold(axes: list[Any], axc: Any, report: GoodputReport, axis: _TimeAxis) -> str:
    """Draw the folded start of the run as one labelled block and break each axis after it;
    returns its label."""
    folded = (axis.lo - report.start) / 1000
    startup = sum(max(0, min(b, axis.lo) - a) for c, a, b in report.segments
                  if c == "startup" and a < axis.lo) / 1000
    rest = folded - startup  # steps (and their stalls) before the axis goes to scale
    label = f"start-up\n{duration_words(folded)}" if rest < max(0.05 * folded, 0.5) else \
        f"start-up\n{duration_words(startup)}\n+ {duration_words(rest)}\ntraining"
    right = axis.x(axis.lo)
    axc.barh(0, axis.fold, left=axis.left, height=0.8, color=COLORS["startup"], hatch="//",
             edgecolor="white", gid="fold")
    for ax in axes:
        ax.axvspan(axis.left, right, color=COLORS["startup"], alpha=0.2, lw=0)
    axes[0].text(axis.left + axis.fold / 2, 0.5, label, transform=axes[0].get_xaxis_transform(),
                 ha="center", va="center", fontsize=8, gid="fold")
    for ax in [*axes, axc]:  # the broken-axis marks, on both spines
        ax.plot([right, right], [0, 1], transform=ax.get_xaxis_transform(), ls="none",
                marker=[(-1, -2), (1, 2)], ms=10, mew=1, color="black", clip_on=False)
    return label.replace("\n", " ")


def plot_goodput(report: GoodputReport, events: list[Event], path: str,
                 window_seconds: float | None = None,
                 faults: dict[int, str] | None = None,
                 chaos_window: tuple[int, int] | None = None,
                 missed: dict[int, tuple[str, ...]] | None = None,
                 run_missed: tuple[str, ...] = (),
                 min_goodput: float | None = None) -> Chart:
    """Draw a run's steps over time, what each moment was spent on, and goodput over time
    (per window, and cumulative from the first moment on); return what was drawn.

    ``window_seconds`` None picks about 20 windows over the axis (:func:`auto_window`): a fixed
    minute would draw one flat block for a short smoke run. ``faults`` names the fault at each
    kill time (ms): ``term``, ``hang (10 s)``... (a plain kill when not named).

    A chaos run passes its ``chaos_window`` (ms, first fault to end): the axis is then seconds
    since the first fault, the run before it folded into one narrow labelled block, and the
    cumulative goodput counts from the first fault, as ``--min-goodput`` does. ``missed`` maps a
    fault's time to the bounds its recovery missed and ``run_missed`` lists the run's own
    (``min_goodput``): each is drawn in red, and the title says "bound missed".

    Raises:
        UsageError: an empty run, matplotlib missing, or the file cannot be written.
    """
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    if report.end <= report.start:
        raise UsageError("no events to plot", hint="has the trainer started?")
    axis = _time_axis(report, chaos_window)
    shown = (report.end - axis.lo) / 1000
    window = window_seconds if window_seconds is not None else _auto_window(shown)
    drawn: list[str] = []
    with _figure(path, 3, 1, figsize=(11, 6.4), sharex=True,
                 gridspec_kw={"height_ratios": [1.4, 0.5, 1.4]}) as (ax, axc, axg):
        fig = ax.figure
        ts, steps = _steps(events, axis.lo, report.end)
        ax.plot([axis.x(t) for t in ts], steps, color="black", lw=1, drawstyle="steps-post")
        ax.set_ylabel("step")
        # one collection per cause (in order of first appearance: the legend's order), not a
        # bar per segment: a soak has thousands (a step, then a save's stall...), and a bar
        # each took seconds to draw after the last measurement
        bars: dict[str, list[tuple[float, float]]] = {}
        for cause, a, b in report.segments:
            if b <= axis.lo:
                continue
            a = max(a, axis.lo)
            bars.setdefault(cause, []).append((axis.x(a), (b - a) / 1000))
        for cause, spans in bars.items():
            axc.broken_barh(spans, (-0.4, 0.8), color=COLORS[cause], label=cause, linewidth=0)
            drawn.append(cause)
        axc.set_yticks([])
        axc.set_ylim(-0.6, 0.6)
        if axis.fold:
            _fold([ax, axg], axc, report, axis)
        _goodput_panel(axg, report, axis, window, chaos_window is not None)
        _faults(ax, axc, axg, report, axis, faults or {})
        spans = _missed_spans(ax, axc, axg, report, axis, missed or {})
        if min_goodput is not None:
            got_missed = any(m.startswith("goodput") for m in run_missed)
            axg.axhline(min_goodput, color=MISSED if got_missed else "black", ls="--", lw=1,
                        label=f"--min-goodput {min_goodput:.1%}")
        axg.set_ylim(0, 1.05)
        axg.yaxis.set_major_formatter(PercentFormatter(1.0))
        axg.set_ylabel("goodput")
        axg.set_xlabel("seconds since the first fault" if chaos_window is not None
                       else "seconds since the run started")
        xlim = (axis.left, axis.x(report.end))
        axg.set_xlim(*xlim)
        if axis.fold:  # no tick inside the fold: its seconds are not to scale
            lo = axis.x(axis.lo)
            axg.set_xticks([t for t in MaxNLocator(8).tick_values(lo, xlim[1])
                            if lo <= t <= xlim[1]])
        ax.set_title(_goodput_title(report, axis, chaos_window, spans + list(run_missed)),
                     color=MISSED if spans or run_missed else "black")
        legend = _legend_below(fig, [axc, axg])
        fig.tight_layout(rect=(0, 0.13, 1, 1))
    return Chart(drawn, xlim, window_seconds=window, legend=legend, figure=fig)


def _auto_window(seconds: float) -> float:
    """:func:`auto_window`, and below 20 s a tenth of a second or so: a smoke run's chaos
    window can be a few seconds, one flat bar at 1 s windows."""
    if seconds >= 20:
        return auto_window(seconds)
    return next(w for w in (0.1, 0.2, 0.5, 1.0) if w >= seconds / 20 or w == 1.0)


def _goodput_title(report: GoodputReport, axis: _TimeAxis, chaos_window: tuple[int, int] | None,
                   missed: list[str]) -> str:
    n = sum(1 for r in report.recoveries
            if (r.kill if r.kill is not None else r.start or 0) >= axis.lo)
    recs = f"{n} recover{'y' if n == 1 else 'ies'}"
    got = report.between(*chaos_window) if chaos_window is not None else None
    whole = goodput_phrase(report.goodput, report.wall_seconds, report.badput.get("startup"))
    if got is not None and chaos_window is not None:
        span = (report.end - chaos_window[0]) / 1000
        title = (f"chaos window: {goodput_phrase(got, span)}, {recs}\n"
                 f"whole run: {whole}")
    else:
        title = f"goodput {whole}, {recs}"
    if missed:
        title += "\nbound missed: " + "; ".join(missed)
    return title


def _goodput_panel(axg: Any, report: GoodputReport, axis: _TimeAxis, window: float,
                   chaos: bool) -> None:
    """Goodput per window from the axis's first moment drawn to scale, and cumulative: from the
    first fault in a chaos run (the chaos window's goodput), else from the run's start."""
    win = max(1, int(window * 1000))
    since = axis.origin if chaos else report.start
    first = since - (since - axis.lo) // win * win  # windows meet at the first fault
    edges = ([axis.lo] if first > axis.lo else []) + list(range(first, report.end, win)) \
        + [report.end]
    pairs = list(zip(edges[:-1], edges[1:], strict=True))
    axg.bar([axis.x(a) for a, _ in pairs], [report.between(a, b) or 0.0 for a, b in pairs],
            width=[(b - a) / 1000 for a, b in pairs], align="edge",
            color=COLORS["productive"], alpha=0.6, edgecolor="white",
            label=f"goodput per {_window_label(window)}")
    fine = max(1, (report.end - since) // 200)
    ts = list(range(since + fine, report.end, fine)) + [report.end]
    axg.plot([axis.x(since)] + [axis.x(t) for t in ts],
             [0.0] + [report.between(since, t) or 0.0 for t in ts], color="black",
             label="cumulative goodput" + (" since the first fault" if chaos else ""))


def _faults(ax: Any, axc: Any, axg: Any, report: GoodputReport, axis: _TimeAxis,
            faults: dict[int, str]) -> None:
    """A line at each fault, one style per kind of fault, named in the legend."""
    styles = ("--", ":", "-.", (0, (5, 1)), (0, (1, 3)))
    kinds: list[str] = []
    for rec in report.recoveries:
        at = rec.kill if rec.kill is not None else rec.start
        if at is None or at < axis.lo:
            continue
        kind = faults.get(at, "kill")
        new = kind not in kinds
        if new:
            kinds.append(kind)
        for a in (ax, axc, axg):
            a.axvline(axis.x(at), color="black", ls=styles[kinds.index(kind) % len(styles)],
                      lw=0.8, label=kind if a is axg and new else None)


def _missed_spans(ax: Any, axc: Any, axg: Any, report: GoodputReport, axis: _TimeAxis,
                  missed: dict[int, tuple[str, ...]]) -> list[str]:
    """Each recovery that missed a bound, red from its fault to its first step (to the end when
    it never recovered), labelled with the bounds; returns those labels, kill by kill."""
    out: list[str] = []
    ends = {(r.kill if r.kill is not None else r.start): r.phases()[-1][2]
            for r in report.recoveries if r.phases()}
    for at, words in sorted(missed.items()):
        if not words:
            continue
        x0, x1 = axis.x(at), axis.x(ends.get(at, report.end))
        _missed_span(ax, x0, x1, words, (axis.left, axis.x(report.end)))
        for a in (axc, axg):
            a.axvspan(x0, x1, facecolor=MISSED, alpha=0.15, edgecolor=MISSED, lw=1.2, zorder=0)
        out += words
    return out


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
    from matplotlib.ticker import PercentFormatter

    adv = advice.advised
    drawn = ["expected badput"]
    with _figure(path, figsize=(8, 4.4)) as ax:
        fig = ax.figure
        # In %, as every other view shows goodput and badput.
        ax.plot([p for p, _ in points], [100 * b for _, b in points], color="black", lw=1.2,
                label="expected badput")
        if today:
            ax.axvline(today, color=COLORS["detection"], ls="--", lw=1,
                       label=f"today: every {today} steps "
                             f"({100 * (1 - advice.today.goodput):.1f} %)")
        if best:
            ax.plot([best], [100 * (1 - adv.goodput)], "o", color=COLORS["productive"],
                    label=f"advised: every {best} steps ({100 * (1 - adv.goodput):.1f} %)")
            drawn.append("advised")
        if which == "snapshot" and advice.uncapped and adv.checkpoint_period:
            # The curve still falls past the advised point: the advice stops at the checkpoint
            # period, where a snapshot less often would save nothing a checkpoint doesn't.
            right = max(points[-1][0], advice.uncapped * 1.5)
            ax.axvspan(adv.checkpoint_period, right, color="0.85", zorder=0,
                       label=f"past the cap (--checkpoint-period {adv.checkpoint_period}): "
                             "saves nothing more")
            ax.axvline(advice.uncapped, color="0.4", ls=":", lw=1,
                       label=f"Young-Daly alone: every {advice.uncapped} steps")
            drawn.append("cap")
        ax.set_xscale("log")
        if "cap" in drawn:
            ax.set_xlim(points[0][0] * 0.9, right * 1.05)
        ax.set_xlabel(f"--{which}-period (steps)")
        ax.set_ylabel("expected badput (% of wall time)")
        ax.yaxis.set_major_formatter(PercentFormatter(decimals=1))
        ax.set_title(f"{which} period: stall against work lost (MTBF {advice.mtbf:.0f} s)")
        legend = _legend_below(fig, [ax], ncol=2)
        fig.tight_layout(rect=(0, 0.18, 1, 1))
    return Chart(drawn, (points[0][0], points[-1][0]), legend=legend, figure=fig)
