"""``LocalBackend.trainer_events``: the events file, else the head's log, from real files.

No process runs: a workload directory is written as the supervisor leaves it (plan.json, the
trainer's events.jsonl, logs/head-N.log) and read through the backend.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from elastix.backends.base import EVENTS_FILE, HEAD_LOG, MAXTEXT_LOG
from elastix.backends.local.backend import LocalBackend
from elastix.backends.local.plan import Plan
from elastix.errors import NotFoundError
from elastix.measure.events import events_of

RECORDS = [
    {"ts": "2026-11-29T09:49:30.000000Z", "event": "run_start", "pid": 7, "num_slices": 2,
     "devices": 8},
    {"ts": "2026-11-29T09:49:32.000000Z", "event": "step", "pid": 7, "step": 1,
     "seconds": 2.0, "loss": 5.0, "live_slices": 2},
]
LINE = "2026-11-29T09:49:{s:02d}.000Z completed step: {n}, seconds: 0.500, live slice count: 2"


def _workload(root, name: str = "demo", maxtext: str = "") -> Plan:
    d = root / name
    (d / "logs").mkdir(parents=True)
    plan = Plan(name=name, created="2026-11-29T09:49:29.000000Z", dir=str(d), cwd=str(root),
                num_slices=2, hosts_per_slice=1, backoff_limit=1, max_restarts=0,
                devices_per_slice=4, scheduling_delay=0.0, health_timeout=10.0,
                heartbeat_interval=1.0, health_address="unix:/nowhere", events_file=str(
                    d / "events.jsonl"), head_command=["true"], head_env=[], worker_env=[],
                marker="m", maxtext=maxtext)
    (d / "plan.json").write_text(json.dumps(dataclasses.asdict(plan)), encoding="utf-8")
    return plan


@pytest.mark.parametrize("kw", [{}, {"cheap": True}, {"tail": True}])
def test_the_events_file_is_the_source_and_reaches_the_start(tmp_path, kw):
    plan = _workload(tmp_path)
    with open(plan.events_file, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in RECORDS)
    (tmp_path / "demo" / "logs" / "head-0.log").write_text(LINE.format(s=40, n=9) + "\n")
    got = LocalBackend(tmp_path).trainer_events("demo", **kw)
    assert got is not None and got.source == EVENTS_FILE and got.from_start
    assert got.records == RECORDS and got.lines is None  # the file wins over the log
    events, source = events_of(got)
    assert source == "events" and [e.name for e in events] == ["run_start", "step"]


def test_without_an_events_file_the_current_heads_log_with_no_notices(tmp_path):
    _workload(tmp_path)
    logs = tmp_path / "demo" / "logs"
    (logs / "head-0.log").write_text(LINE.format(s=31, n=1) + "\n")
    (logs / "head-1.log").write_text(LINE.format(s=40, n=2) + "\n" + LINE.format(s=41, n=3))
    got = LocalBackend(tmp_path).trainer_events("demo")
    assert got is not None and got.source == HEAD_LOG and got.from_start and got.records is None
    assert got.lines == [LINE.format(s=40, n=2), LINE.format(s=41, n=3)]
    events, source = events_of(got)
    assert source == "log" and [e.data["step"] for e in events] == [2, 3]


def test_a_maxtext_head_is_its_log_every_attempt(tmp_path):
    _workload(tmp_path, maxtext="none")
    logs = tmp_path / "demo" / "logs"
    (logs / "head-0.log").write_text(LINE.format(s=31, n=1) + "\n")
    (logs / "head-1.log").write_text(LINE.format(s=40, n=2) + "\n")
    got = LocalBackend(tmp_path).trainer_events("demo", cheap=True)
    assert got is not None and got.source == MAXTEXT_LOG and got.from_start
    assert got.lines == [LINE.format(s=31, n=1), LINE.format(s=40, n=2)]  # notices dropped


def test_nothing_to_read_before_a_head_starts_and_a_wrong_name_is_not_found(tmp_path):
    _workload(tmp_path)
    backend = LocalBackend(tmp_path)
    assert backend.trainer_events("demo") is None
    assert events_of(None) == ([], "log")
    with pytest.raises(NotFoundError):
        backend.trainer_events("other")
