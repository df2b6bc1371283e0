"""The words of a chaos report as a user reads them (issue 60): counts in the singular when
there is one, a late fault's reason only when it is the reason, a stall not called a failed
recovery, and a note never cut mid-phrase in a CI log."""

from __future__ import annotations

import datetime as dt
import io

from rich.console import Console

from elastix.backends.base import KillRecord
from elastix.measure.events import Recovery
from elastix.measure.goodput import goodput
from elastix.measure.report import Bounds, ChaosReport, KillMeasurement, check_bounds
from elastix.views.console import console
from elastix.views.measurement import print_soak, recovery_rows

T0 = 1_764_000_000_000  # ms


def _kill(i: int, *, kind: str = "in-process", lost: int = 1, first_ms: int = 1200,
          late: float | None = None) -> KillMeasurement:
    t = T0 + i * 60_000
    rec = Recovery(i, kind, kill=t, start=t + 41, cleanup_done=t + 42, slices_ready=t + 1064,
                   restored=t + 1072, first_step_at=t + first_ms, last_step=100 * i + lost,
                   restored_step=100 * i, restore_source="snapshot", restore_bytes=1234,
                   restore_load_seconds=0.003, first_step=100 * i + 1,
                   first_step_time_seconds=0.1, pid_before=7, pid_after=7)
    when = dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc)
    m = KillMeasurement([KillRecord("demo", f"demo-worker-0-{i}", 0, 0, "localhost", when,
                                    pid=40 + i)], rec, "events", "Running", 0, 0, 7, 7, False)
    m.late = late
    return m


def _soak_text(measurements: list[KillMeasurement], bounds: Bounds | None = None) -> str:
    bounds = bounds or Bounds()
    violations = [v for i, m in enumerate(measurements, 1) for v in check_bounds(m, i, bounds)]
    res = ChaosReport(measurements, goodput([]), violations, False, workload="demo",
                      bounds=bounds, stopped="done")
    buf = io.StringIO()
    print_soak(Console(file=buf, width=200, soft_wrap=True), res)
    return buf.getvalue()


def test_one_step_lost_is_said_in_the_singular():
    text = _soak_text([_kill(1, lost=1)], Bounds(max_steps_lost=0))
    assert "; 1 step lost; goodput" in text and "1 steps" not in text
    assert "kill 1: 1 step lost > 0" in text
    assert "; 4 steps lost; goodput" in _soak_text([_kill(1, lost=4)])


def test_a_late_first_fault_does_not_blame_a_recovery_that_never_was():
    text = _soak_text([_kill(1, late=0.4)])
    assert "fault 1 landed 0.400 s after it was due (reading the workload and delivering " \
           "the fault took that long)" in text
    assert "previous recovery" not in text


def test_a_late_fault_after_a_recovery_still_measured_names_it():
    # fault 2 was due 1 s after fault 1's kill (late 59 s: its kill is 60 s after the first),
    # when fault 1's recovery had not stepped yet (it stepped 1.2 s after its kill)
    text = _soak_text([_kill(1), _kill(2, late=59.0)])
    assert "fault 2 landed 59.000 s after it was due (the previous recovery was being " \
           "measured)" in text
    # due 30 s after fault 1, long after its recovery stepped: the delay was its own
    text = _soak_text([_kill(1), _kill(2, late=30.0)])
    assert "fault 2 landed 30.000 s after it was due (reading the workload" in text


def test_a_stall_is_not_shown_as_a_recovery_that_was_not_in_process():
    stall = _kill(1, kind="stall", lost=0)
    rows = dict(recovery_rows(stall))
    assert rows["in-process recovery"] == "none needed: a stall (training waited for the host)"
    text = _soak_text([stall])
    row = [line for line in text.splitlines() if line.split()[:2] == ["1", "0/0"]][0]
    assert row.split()[-1] == "stall"
    assert dict(recovery_rows(_kill(1)))["in-process recovery"] == "yes"


def test_a_note_is_never_wrapped_off_a_terminal(monkeypatch, capsys):
    # A CI log is no terminal: a note wider than the piped width stays one line.
    monkeypatch.delenv("COLUMNS", raising=False)
    note = "note: budget: " + " ".join(f"word{i}" for i in range(60))
    assert len(note) > 160
    console(stderr=True).print(note, markup=False)
    assert capsys.readouterr().err == note + "\n"


def test_the_budget_note_counts_in_the_singular():
    from elastix.workload.lint import lint
    from elastix.workload.render import render
    from elastix.workload.spec import build_spec

    mt = ("python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml "
          "run_name=r base_output_directory=gs://b/o enable_single_controller=true "
          "elastic_enabled=true elastic_max_retries=2")
    found = lint(render(build_spec(None, {
        "name": "nb", "tpu_type": "v5litepod-16", "docker_image": "img:1", "command": mt,
        "num_slices": 1, "elastic_slices": 1, "max_slice_restarts": 10})))
    ((rule, msg, _),) = found.warnings
    assert rule == "budget"
    assert "recovers from 1 slice loss, but the JobSet replaces 10 in-process (10 restarts x " \
           "1 slice)" in msg


def test_the_readmes_kill_table_names_every_row_a_local_kill_prints():
    # A local in-process kill as the quickstart's: its loss dated, the restore's load known,
    # the steps' slice counts logged. The README shows some rows and names the rest.
    import re
    from pathlib import Path

    m = _kill(1, lost=4)
    r = m.recovery
    r.loss, r.slices_before, r.slices_after, r.lost_slices = r.kill + 76, 2, 2, [1]
    labels = [label for label, _ in recovery_rows(m)]
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    intro, table = re.search(r"The measured kill, as it printed (.*?):\n\n```\n(.*?)```",
                             readme, re.S).groups()
    shown = [line.split("│")[1].strip() for line in table.splitlines()]
    said = re.search(r"(\d+) of\s+its (\d+) rows; the other \d+ are (.*)", intro, re.S)
    others = [w.strip() for w in re.split(r",\s*(?:and\s+)?|\s+and\s+",
                                          re.sub(r"\s*\([^)]* [^)]*\)", "", " ".join(
                                              said.group(3).split())))]
    assert int(said.group(1)) == len(shown) and int(said.group(2)) == len(labels) == 19
    assert sorted(shown + others) == sorted(labels), (shown, others, labels)
