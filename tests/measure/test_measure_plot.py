"""The PNG charts are valid images with every phase drawn in its colour."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest
from matplotlib import colors as mcolors
from matplotlib import image as mimage
from measure_helpers import T0, recorded_run, to_jsonl

from elastix.errors import UsageError
from elastix.measure.events import assign_kills, events_from_jsonl, ms_of, recoveries
from elastix.measure.goodput import goodput
from elastix.views.plot import COLORS, FOLD_SHARE, MISSED, plot_goodput, plot_recovery


def _has_colour(img: np.ndarray, hex_colour: str) -> bool:
    rgb = np.array(mcolors.to_rgb(hex_colour))
    return bool((np.abs(img[..., :3] - rgb) < 0.02).all(axis=-1).sum() > 20)


@pytest.fixture
def run():
    recs, kill = recorded_run()
    events = events_from_jsonl(to_jsonl(recs))
    return events, ms_of(T0 + dt.timedelta(seconds=kill))


def test_recovery_png_has_every_phase(tmp_path, run):
    events, kill = run
    (rec,) = recoveries(events)
    assign_kills([rec], [kill])
    out = tmp_path / "recovery.png"
    drawn = plot_recovery(events, rec, str(out)).drawn
    assert drawn == ["detection", "cleanup", "waiting for slices", "restore", "first step"]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = mimage.imread(str(out))
    assert img.shape[0] > 200 and img.shape[1] > 600
    for phase in drawn:
        assert _has_colour(img, COLORS[phase]), phase
    assert not _has_colour(img, COLORS["restart"])  # a colour that must not be there


def test_goodput_png(tmp_path, run):
    events, kill = run
    rep = goodput(events, kills=[kill])
    out = tmp_path / "goodput.png"
    drawn = plot_goodput(rep, events, str(out), window_seconds=5).drawn
    assert {"productive", "detection", "waiting for slices", "steps re-done", "startup"} <= set(
        drawn)
    img = mimage.imread(str(out))
    for cause in ("productive", "detection", "waiting for slices", "startup"):
        assert _has_colour(img, COLORS[cause]), cause


def test_plot_errors(tmp_path, run):
    events, _ = run
    (rec,) = recoveries(events)
    with pytest.raises(UsageError, match="only PNG"):
        plot_recovery(events, rec, str(tmp_path / "x.svg"))
    with pytest.raises(UsageError, match="cannot write"):
        plot_recovery(events, rec, str(tmp_path / "no" / "dir" / "x.png"))


def test_recovery_axis_ends_near_the_data_and_every_legend_entry_is_drawn(tmp_path, run):
    """The x axis spans the recovery and a little room, not a fixed 10 s past its end, and
    the legend names the kill line, the step line and each phase."""
    events, kill = run
    (rec,) = recoveries(events)
    assign_kills([rec], [kill])
    chart = plot_recovery(events, rec, str(tmp_path / "r.png"))
    span = (rec.phases()[-1][2] - kill) / 1000
    lo, hi = chart.xlim
    assert span < hi <= span * 1.25 + 0.5 + 1e-9 and -(span * 0.25 + 0.5) - 1e-9 <= lo < 0
    assert chart.legend[:2] == ("step completed", "kill")
    assert [e.split(" ")[0] for e in chart.legend[2:]] == [p.split(" ")[0] for p in chart.drawn]


def test_goodput_window_fits_a_short_run_and_the_axis_is_the_run(tmp_path, run):
    events, kill = run
    rep = goodput(events, kills=[kill])
    chart = plot_goodput(rep, events, str(tmp_path / "g.png"))
    wall = (rep.end - rep.start) / 1000
    assert chart.xlim == (0.0, wall)
    assert wall / chart.window_seconds >= 10  # many bars, not one flat block
    assert {"cumulative goodput", "kill", f"goodput per {chart.window_seconds:g} s"} <= set(
        chart.legend)
    long = plot_goodput(rep, events, str(tmp_path / "g2.png"), window_seconds=60)
    assert long.window_seconds == 60  # a window the user asks for is kept


def test_auto_window_is_round_and_about_a_twentieth():
    from elastix.measure.goodput import auto_window

    assert auto_window(18.7) == 1 and auto_window(600) == 30 and auto_window(3 * 3600) == 600


def test_the_fault_kind_is_named_on_both_charts(tmp_path, run):
    """Issue 35: a term's line is labelled term, and a fault the start absorbed is drawn in
    its own colour (a phase with no colour used to be a KeyError)."""
    from elastix.measure.events import Recovery

    events, kill = run
    rep = goodput(events, kills=[kill])
    chart = plot_goodput(rep, events, str(tmp_path / "g.png"), faults={kill: "term (grace 30 s)"})
    assert "term (grace 30 s)" in chart.legend and "kill" not in chart.legend
    (rec,) = recoveries(events)
    assign_kills([rec], [kill])
    chart = plot_recovery(events, rec, str(tmp_path / "r.png"), fault="hang (2 s)")
    assert chart.legend[:2] == ("step completed", "hang (2 s)")
    first = next(e for e in events if e.name == "step")
    boot = Recovery(1, "start-up", kill=first.t - 4000, start=first.t - 4000,
                    first_step_at=first.t, first_step=1, last_step=0, restored_step=0)
    out = tmp_path / "s.png"
    assert plot_recovery(events, boot, str(out)).drawn == ["start-up"]
    assert _has_colour(mimage.imread(str(out)), COLORS["start-up"])


# Issue 39 item 5: pictures for CI, on a recorded real run (two workers SIGKILLed; no kill
# times in it, so each recovery counts from its detection, as goodput attributes it).
REAL = Path(__file__).resolve().parent / "fixtures" / "real_run.events.jsonl"


@pytest.fixture(scope="module")
def real():
    events = events_from_jsonl(REAL.read_text())
    rep = goodput(events)
    return events, rep, rep.recoveries


def _red_spans(ax) -> list[tuple[float, float]]:
    """The red spans drawn on ``ax`` (a missed bound), as (x0, x1)."""
    out = []
    for p in ax.patches:
        if mcolors.to_hex(p.get_facecolor()) == MISSED:
            xs = [x for x, _ in p.get_xy()] if hasattr(p, "get_xy") and not hasattr(
                p, "get_width") else [p.get_x(), p.get_x() + p.get_width()]
            out.append((round(min(xs), 3), round(max(xs), 3)))
    return out


def test_the_goodput_chart_is_the_chaos_window_with_start_up_folded(tmp_path, real):
    """The smoke job's goodput.png was 60-83 % start-up with each recovery a few pixels wide:
    the axis is now seconds since the first fault, the run before it one narrow labelled block
    (hatched, after an axis break) and goodput a percentage."""
    events, rep, (r1, _) = real
    chart = plot_goodput(rep, events, str(tmp_path / "g.png"), chaos_window=(r1.start, rep.end))
    ax, axc, axg = chart.figure.axes
    lo, hi = chart.xlim
    assert hi == (rep.end - r1.start) / 1000 == 12.985  # to the window's end
    (fold,) = [p for p in axc.patches if p.get_gid() == "fold"]
    # to scale from a quarter of the window before the first fault, as a recovery chart's room
    assert lo + fold.get_width() == pytest.approx(-hi * 0.25, abs=0.001)  # whole ms
    assert fold.get_x() == lo and fold.get_width() / (hi - lo) == pytest.approx(FOLD_SHARE)
    assert fold.get_hatch() == "//"
    (label,) = [t.get_text() for t in ax.texts if t.get_gid() == "fold"]
    assert label == "start-up\n27 s\n+ 2.3 s\ntraining"  # 27.3 s of start-up, then steps
    assert min(axg.get_xticks()) >= lo + fold.get_width()  # no tick inside the fold
    assert axg.get_xlabel() == "seconds since the first fault"
    assert axg.yaxis.get_major_formatter()(0.5, 0) == "50%"
    # Both spans are under a minute: seconds first, the share named as such (issue 49).
    assert ax.get_title() == ("chaos window: 9.6 s of 13.0 s productive (73.6%, under a "
                              "minute), 2 recoveries\nwhole run: 12.9 s of 45.9 s productive "
                              "(28.1%, under a minute)"), ax.get_title()
    assert "cumulative goodput since the first fault" in chart.legend
    # a met bound: no red anywhere, the title black
    assert not any(_red_spans(a) for a in chart.figure.axes)
    assert mcolors.to_hex(ax.title.get_color()) == "#000000"


def test_a_missed_bound_is_red_in_the_goodput_chart(tmp_path, real):
    events, rep, (r1, r2) = real
    chart = plot_goodput(rep, events, str(tmp_path / "g.png"), chaos_window=(r1.start, rep.end),
                         missed={r2.start: ("downtime 0.34 s > 0.2 s",)},
                         run_missed=("goodput 73.6% < 90.0% (chaos window)",), min_goodput=0.9)
    ax, axc, axg = chart.figure.axes
    span = ((r2.start - r1.start) / 1000, (r2.phases()[-1][2] - r1.start) / 1000)
    for a in (ax, axc, axg):  # the second recovery, kill to first step, red on every panel
        assert _red_spans(a) == [span], a
    assert "downtime 0.34 s > 0.2 s" in [t.get_text() for t in ax.texts
                                         if mcolors.to_hex(t.get_color()) == MISSED]
    assert ax.get_title().endswith("\nbound missed: downtime 0.34 s > 0.2 s; goodput 73.6% < "
                                   "90.0% (chaos window)")
    assert mcolors.to_hex(ax.title.get_color()) == MISSED
    (bound,) = [ln for ln in axg.get_lines() if ln.get_label() == "--min-goodput 90.0%"]
    assert mcolors.to_hex(bound.get_color()) == MISSED and set(bound.get_ydata()) == {0.9}


def test_the_timeline_has_a_row_per_kill_and_a_missed_bound_in_red(tmp_path, real):
    """chaos run --timeline: plot_recovery's picture per kill, one under the other; the kill
    that missed a bound spanned in red, labelled, its title saying so; the other not."""
    from elastix.views.plot import Kill, plot_recoveries

    events, _, (r1, r2) = real
    out = tmp_path / "timeline.png"
    chart = plot_recoveries(events, [Kill(1, r1), Kill(2, r2, missed=("8 steps lost > 5",)),
                                     Kill(3, None, missed=("no recovery within 60 s",))],
                            str(out))
    assert out.read_bytes()[:4] == b"\x89PNG"
    axes = chart.figure.axes
    rows = [axes[0], axes[3], axes[6]]  # each kill: steps, phases, a spacer
    assert [a.get_title() for a in rows] == [
        "kill 1, recovery 1: downtime 0.204 s, 6 steps lost",
        "kill 2, recovery 2: downtime 0.284 s, 8 steps lost: bound missed",
        "kill 3: no recovery measured: bound missed"]
    assert [mcolors.to_hex(a.title.get_color()) for a in rows] == ["#000000", MISSED, MISSED]
    assert _red_spans(axes[0]) == _red_spans(axes[1]) == []
    end = (r2.phases()[-1][2] - r2.phases()[0][1]) / 1000  # from the loss: no kill time
    assert _red_spans(axes[3]) == _red_spans(axes[4]) == [(0.0, end)]
    assert "8 steps lost > 5" in [t.get_text() for t in axes[3].texts]
    assert chart.legend.count("bound missed") == 2


def test_the_recovery_chart_marks_a_missed_bound_and_not_a_met_one(tmp_path, real):
    events, _, (_, r2) = real
    met = plot_recovery(events, r2, str(tmp_path / "a.png")).figure
    missed = plot_recovery(events, r2, str(tmp_path / "b.png"),
                           missed=("downtime 0.28 s > 0.1 s",)).figure
    assert not _red_spans(met.axes[0]) and "bound missed" not in met.axes[0].get_title()
    assert _red_spans(missed.axes[0]) and missed.axes[0].get_title().endswith(": bound missed")
    assert "downtime 0.28 s > 0.1 s" in [t.get_text() for t in missed.axes[0].texts]
