"""Training progress for list/status, from the events of a real run."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from elastix.backends.base import PodInfo, SliceStatus, WorkloadStatus
from elastix.measure.events import events_from_records
from elastix.measure.goodput import goodput
from elastix.measure.progress import progress
from elastix.views.console import console
from elastix.views.status import status_renderable, training_line, workloads_table

REAL = Path(__file__).parent / "fixtures" / "real_run2.events.jsonl"


def _records():
    return [json.loads(ln) for ln in REAL.read_text().splitlines() if ln.strip()]


def test_progress_is_the_last_step_its_loss_and_the_runs_goodput():
    recs = _records()
    events = events_from_records(recs)
    steps = [r for r in recs if r["event"] == "step"]
    p = progress(events, loss=steps[-1]["loss"])
    assert p.last_step == steps[-1]["step"] and p.loss == steps[-1]["loss"]
    assert p.goodput == goodput(events).goodput and p.recoveries == len(goodput(events).recoveries)
    assert p.step_seconds is not None and p.step_seconds > 0
    assert progress([]).last_step is None


def _status(name="demo"):
    t = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)
    pod = PodInfo(name=f"{name}-w", role="worker", phase="Running", node="n", started=t)
    return WorkloadStatus(name=name, namespace="default", backend="local", state="Running",
                          created=t, num_slices=1,
                          slices=[SliceStatus(index=0, hosts=1, pods=[pod], job_failures=3,
                                              backoff_limit=10)])


def _render(renderable, width=80) -> str:
    c = console(width=width)
    with c.capture() as cap:
        c.print(renderable)
    return cap.get()


def test_list_fits_80_columns_and_counts_slice_restarts_as_status_does():
    recs = _records()
    p = progress(events_from_records(recs), loss=1.5)
    now = dt.datetime.fromtimestamp(p.last_step_at / 1000 + 7, dt.timezone.utc)
    out = _render(workloads_table([_status()], now=now, progress={"demo": p}))
    assert max(len(ln) for ln in out.splitlines()) <= 80, out
    assert "7s ago" in out and "1.5000" in out and f" {p.last_step} " in out
    assert out.split()[-2] == "3"  # 3 slice restarts, as status's SLICE RESTARTS column
    wide = _render(workloads_table([_status()], now=now, progress={"demo": p}, wide=True), 200)
    assert "GOODPUT" in wide and f"{p.goodput * 100:.1f} %" in wide
    line = training_line(p, now)
    assert line.startswith(f"training: step {p.last_step} (7s ago)") and "goodput" in line
    assert "training: nothing to read yet" in _render(status_renderable(_status(), progress=None))
