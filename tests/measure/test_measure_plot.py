"""The PNG charts are valid images with every phase drawn in its colour."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from matplotlib import colors as mcolors
from matplotlib import image as mimage
from measure_helpers import T0, recorded_run, to_jsonl

from elastix.errors import UsageError
from elastix.measure.events import assign_kills, events_from_jsonl, ms_of, recoveries
from elastix.measure.goodput import goodput
from elastix.views.plot import COLORS, plot_goodput, plot_recovery


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
