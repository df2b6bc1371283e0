"""Training progress for list/status, from the events of a real run."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path

import pytest

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


# -- a recovery under way, as status --watch shows it ---------------------------------------------

def _cut_after(event: str) -> list[dict]:
    """The real run's records up to its recovery's ``event`` (as a file read mid-recovery)."""
    recs = _records()
    end = next(i for i, r in enumerate(recs) if r["event"] == event)
    return recs[:end + 1]


def test_a_recovery_under_way_replaces_the_stale_step_line():
    from elastix.measure.events import parse_ts

    for event, phase in [("elastic_detected", "cleanup"),
                         ("elastic_cleanup_done", "waiting for slices"),
                         ("elastic_slices_ready", "restore"), ("elastic_restored", "first step")]:
        recs = _cut_after(event)
        p = progress(events_from_records(recs))
        assert p.recovering is not None and p.recovering.phase == phase, event
        assert p.recovering.lost_slices == [0] and p.recovering.index == 1
        now = dt.datetime.fromtimestamp(parse_ts(recs[-1]["ts"]) / 1000 + 3.2, dt.timezone.utc)
        line = training_line(p, now)
        assert line.startswith(f"training: recovering: {phase} for 3.2 s (slice 0 lost); "
                               "recovery 1, "), line
        assert f"last step {p.last_step} (" in line
        assert p.to_json()["recovering"]["phase"] == phase
    assert progress(events_from_records(_cut_after("elastic_first_step"))).recovering is None
    assert progress(events_from_records(_records())).recovering is None
    ended = [*_cut_after("elastic_cleanup_done"),
             {**_records()[-1], "ts": _cut_after("elastic_cleanup_done")[-1]["ts"]}]
    assert progress(events_from_records(ended)).recovering is None  # run_end: it gave up


def test_status_watch_says_when_it_refreshed_and_the_recovery_phase(tmp_path):
    """The real CLI, piped: every frame names its refresh time and, on a workload whose
    events file stops inside a recovery (the real run's, moved to now), the phase."""
    import re
    import subprocess
    import sys
    import threading

    from fake_cluster import interrupt, wait_for
    from local_records import recorded_workload

    from elastix.measure.events import parse_ts
    from elastix.protocol import timefmt

    recs = _cut_after("elastic_cleanup_done")
    shift = timefmt.to_ms(timefmt.utc_now()) - 1000 - parse_ts(recs[-1]["ts"])
    recorded_workload(tmp_path, "demo", "Running", events=[
        json.dumps({**r, "ts": timefmt.from_ms(parse_ts(r["ts"]) + shift)}) for r in recs])
    import os

    env = {**os.environ, "ELASTIX_STATE_DIR": str(tmp_path), "ELASTIX_BACKEND": "local",
           "NO_COLOR": "1", "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "elastix", "workload", "status", "demo",
                             "--watch", "--interval", "0.2"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    err: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
    threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True).start()
    try:
        wait_for(lambda: sum(x.startswith("refreshed ") for x in lines) >= 2, timeout=60,
                 what="two frames")
    finally:
        code = interrupt(proc, lambda: "".join(err))
    assert code == 130, "".join(err)
    assert re.match(r"refreshed \d\d:\d\d:\d\dZ, every 0\.2s \(Ctrl-C to stop\)$",
                    next(x for x in lines if x.startswith("refreshed ")).rstrip())
    training = [x for x in lines if x.startswith("training:")]
    assert training and all(re.match(r"training: recovering: waiting for slices for "
                                     r"\d+\.\d s \(slice 0 lost\); recovery 1, ", x)
                            for x in training), training



@pytest.mark.parametrize(("state", "says"), [("Running", "not being deleted (it is Running)"),
                                             ("Terminating", "stopping pods")])
def test_a_wait_for_deleted_says_whether_anything_deletes_the_workload(tmp_path, state, says):
    """``wait --for deleted`` of a workload nobody deletes used to say "stopping pods"."""
    from local_records import recorded_workload

    from elastix.backends.local.backend import LocalBackend
    from elastix.backends.local.state import record_proc
    from elastix.errors import OutcomeError
    from elastix.measure.wait import wait_for

    d = recorded_workload(tmp_path, "demo", state)
    supervisor = subprocess.Popen(["sleep", "600"])  # a live one: else the workload is Failed
    try:
        record_proc(d, supervisor.pid, "supervisor")
        seen: list[str] = []
        now = [0.0]
        with pytest.raises(OutcomeError, match="timed out"):
            wait_for(LocalBackend(tmp_path), "demo", "deleted", timeout=2, poll=1,
                     clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s),
                     report=lambda p: seen.append(p.what))
    finally:
        supervisor.kill()
        supervisor.wait()
    assert seen and set(seen) == {says}, seen
