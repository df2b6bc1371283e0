"""Advice from measurements (issue 36): the Young-Daly periods against their closed form, the
two levels (snapshots for slice failures, checkpoints for the controller's), what a run
measured, and the command's bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from measure_helpers import bad_input, ts

from elastix.errors import UsageError
from elastix.main import main
from elastix.measure.advise import Measured, advise, curve, measure, waste, young_daly
from elastix.measure.events import events_from_records

FIXTURE = Path(__file__).parent / "fixtures" / "real_run.events.jsonl"


def _m(**kw) -> Measured:
    base = dict(wall=3600.0, step=1.0, checkpoint_period=10, snapshot_period=0,
                checkpoint_stall=2.0, snapshot_stall=None, downtime=30.0, failures=1,
                restarts=0, saves=360, snapshots=0)
    return Measured(**{**base, **kw})


def test_checkpoints_alone_meet_the_closed_form():
    """delta 2 s, M 3600 s: T* = sqrt(2 * 2 * 3600) = 120 s, waste sqrt(2 delta / M) + R/M."""
    assert young_daly(2.0, 3600.0) == pytest.approx(120.0)
    a = advise(_m(), mtbf=3600.0)
    assert a.advised.checkpoint_period == 120 and a.advised.snapshot_period == 0
    parts = a.advised.waste
    assert parts["checkpoint stall"] + parts["work lost"] == pytest.approx(math.sqrt(4 / 3600))
    assert a.advised.goodput == pytest.approx(1 - math.sqrt(4 / 3600) - 30 / 3600)
    assert a.today.goodput == pytest.approx(1 - 2 / 10 - 5 / 3600 - 30 / 3600)
    # the optimum is a minimum: half and twice the period waste more
    for p in (60, 240):
        assert sum(waste(_m(), p, 0, 3600.0, None).values()) > sum(parts.values())


def test_snapshots_follow_slice_failures_and_checkpoints_the_controllers():
    m = _m(snapshot_period=5, snapshot_stall=0.5, checkpoint_period=100)
    a = advise(m, mtbf=1800.0, head_mtbf=86400.0)
    assert a.advised.snapshot_period == round(math.sqrt(2 * 0.5 * 1800))  # 42
    assert a.advised.checkpoint_period == round(math.sqrt(2 * 2.0 * 86400))  # 588
    assert a.advised.waste["work lost"] == pytest.approx(42 / 2 / 1800)
    assert a.advised.waste["work lost (controller)"] == pytest.approx(588 / 2 / 86400)
    kept = advise(m, mtbf=1800.0)  # no controller failure rate: the checkpoint period is kept
    assert kept.advised.checkpoint_period == 100 and any("--head-mtbf" in n for n in kept.notes)
    rare = advise(_m(snapshot_period=5, snapshot_stall=0.5, checkpoint_period=20),
                  mtbf=10 * 86400.0)
    assert rare.advised.snapshot_period == 20  # never less often than a checkpoint
    seen = advise(_m(snapshot_period=5, snapshot_stall=0.5, restarts=2), mtbf=1800.0)
    assert seen.head_mtbf == 1800.0  # the run's own restarts: 2 in 3600 s


def test_the_failure_rate_is_given_or_observed():
    a = advise(_m(failures=4))
    assert a.mtbf == 900.0 and a.mtbf_from == "observed: 4 failures in 3600 s"
    assert any("--mtbf" in n for n in a.notes)
    with pytest.raises(UsageError, match="no slice failure in this run"):
        advise(_m(failures=0))


def test_an_unmeasured_downtime_is_said_not_taken_for_zero():
    a = advise(_m(downtime=None, failures=2))
    assert any("no recovery downtime was measured (none of this run's 2 recoveries reached a "
               "first step after it): downtime is counted as 0 s" in n for n in a.notes), a.notes
    none = advise(_m(downtime=None, failures=0), mtbf=3600.0)
    assert any("(this run had no recovery)" in n for n in none.notes)
    assert not any("no recovery downtime" in n for n in advise(_m(), mtbf=3600.0).notes)


def test_badput_shares_are_bounded_by_the_wall_time():
    # One recovery of 1,300 s in a 1,000 s run with no saves: the raw model wastes more than
    # the run's time (it printed a badput share of 128.5 %).
    a = advise(_m(wall=1000.0, failures=1, downtime=1300.0, checkpoint_period=None,
                  checkpoint_stall=None))
    for setting in (a.today, a.advised):
        assert all(0.0 <= v <= 1.0 for v in setting.waste.values()), setting.waste
        assert sum(setting.waste.values()) == pytest.approx(1.0)
        assert setting.goodput == 0.0
    assert any("the first-order model's waste is" in n and "makes no progress" in n
               for n in a.notes), a.notes


def test_the_curve_spans_today_and_the_optimum():
    a = advise(_m(), mtbf=3600.0)
    which, pts = curve(a)
    steps = [p for p, _ in pts]
    assert which == "checkpoint" and steps[0] <= 10 and steps[-1] >= 1200
    best = min(pts, key=lambda x: x[1])[0]
    assert 100 <= best <= 145  # the model's minimum, on the curve's grid


def _rec(t: float, event: str, **data) -> dict:
    return {"ts": ts(t), "event": event, "pid": 1, **data}


def test_what_a_run_measured():
    recs = [_rec(0, "run_start", num_slices=2, devices=4,
                 config={"checkpoint_dir": "ck", "checkpoint_period": 4, "snapshot_period": 2})]
    for n in range(1, 13):
        recs.append(_rec(n * 0.1, "step", step=n, seconds=0.1, loss=1.0, live_slices=2))
        if n % 2 == 0:
            recs.append(_rec(n * 0.1 + 0.001, "snapshot_taken", step=n, seconds=0.004, bytes=1))
        if n % 4 == 0:
            recs.append(_rec(n * 0.1 + 0.05, "checkpoint_committed", step=n, seconds=0.2,
                             bytes=1, blocking_seconds=0.03))
    m = measure(events_from_records(recs), recs)
    assert (m.checkpoint_period, m.snapshot_period) == (4, 2)
    assert (m.checkpoint_stall, m.snapshot_stall, m.step) == (0.03, 0.004, 0.1)
    assert (m.saves, m.snapshots, m.failures) == (3, 6, 0)
    no_config = measure(events_from_records(recs[1:]))  # a log: periods from the saves
    assert (no_config.checkpoint_period, no_config.snapshot_period) == (4, 2)


def test_a_completed_runs_final_save_is_not_a_periodic_stall():
    recs = [_rec(0, "run_start", num_slices=1, devices=1,
                 config={"checkpoint_dir": "ck", "checkpoint_period": 5, "snapshot_period": 0})]
    for n in range(1, 13):
        recs.append(_rec(n * 0.1, "step", step=n, seconds=0.1, loss=1.0, live_slices=1))
    for n, blocking in ((5, 0.02), (10, 0.04), (12, 1.7)):
        recs.append(_rec(n * 0.1 + 0.05, "checkpoint_committed", step=n, seconds=3.9,
                         bytes=1, blocking_seconds=blocking))
    unfinished = measure(events_from_records(recs), recs)
    assert unfinished.checkpoint_stall == 0.04  # no run_end: step 12's save may be periodic
    recs.append(_rec(2.0, "run_end", status="completed", reason="all steps done", step=12))
    m = measure(events_from_records(recs), recs)
    assert m.checkpoint_stall == pytest.approx(0.03) and m.saves == 3


def test_the_command_on_a_real_run(tmp_path, capsys):
    out = tmp_path / "a.png"
    assert main(["workload", "advise", "--events", str(FIXTURE), "--mtbf", "6h", "-o", "json",
                 "--plot", str(out)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["mtbf_seconds"] == 21600 and d["mtbf_from"] == "--mtbf"
    assert d["advised"]["goodput"] >= d["today"]["goodput"]
    assert d["today"]["checkpoint_period"] == 10  # the run's config
    assert out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--mtbf", "soon"], "--mtbf 'soon' is not a duration"),
    (["--head-mtbf", "0"], "--head-mtbf '0' is out of range"),
    (["-o", "yaml"], "--output 'yaml'"),
])
def test_bad_input(argv, fragment, capsys):
    bad_input(capsys, ["workload", "advise", "--events", str(FIXTURE), *argv], fragment)


def test_the_plot_shows_the_cap_and_the_advised_point_in_percent(tmp_path):
    # Snapshots every 5 steps, checkpoints every 20, a rare failure: Young-Daly alone would
    # snapshot less often than the checkpoints; the advice stops at the checkpoint period.
    from elastix.views.plot import plot_advice

    a = advise(_m(snapshot_period=5, snapshot_stall=0.5, checkpoint_period=20),
               mtbf=10 * 86400.0)
    assert a.advised.snapshot_period == 20 and a.uncapped == round(math.sqrt(2 * 0.5 * 864000))
    assert any("capped at the checkpoint period (every 20 steps): Young-Daly alone gives every "
               f"{a.uncapped} steps" in n for n in a.notes), a.notes
    chart = plot_advice(a, *curve(a), str(tmp_path / "advice.png"))
    assert (tmp_path / "advice.png").stat().st_size > 0
    assert chart.drawn == ["expected badput", "advised", "cap"]
    assert any(e.startswith("advised: every 20 steps (") and e.endswith(" %)")
               for e in chart.legend), chart.legend
    assert any("past the cap (--checkpoint-period 20)" in e for e in chart.legend)
    ax = chart.figure.axes[0]
    assert ax.get_ylabel() == "expected badput (% of wall time)"
    advised_y = [line for line in ax.get_lines() if line.get_label().startswith("advised")]
    (y,) = advised_y[0].get_ydata()
    assert y == pytest.approx(100 * (1 - a.advised.goodput))  # the point, in %
    uncapped = advise(_m(snapshot_period=5, snapshot_stall=0.5, checkpoint_period=1000),
                      mtbf=3600.0)
    assert uncapped.uncapped is None
    assert "cap" not in plot_advice(uncapped, *curve(uncapped), str(tmp_path / "b.png")).drawn
