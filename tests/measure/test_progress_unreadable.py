"""``status`` tells events it cannot read from no events yet (issue 48): a torn line is skipped
and said once; a line that is no event says why nothing is shown; no file is nothing yet.

Real files as the local backend leaves them (no processes)."""

from __future__ import annotations

import json

import pytest
from local_records import recorded_workload

from elastix.backends.local.backend import LocalBackend
from elastix.measure.progress import read_progress
from elastix.views.status import training_line


def _step(n: int) -> str:
    return json.dumps({"ts": f"2026-11-29T10:40:0{n}.000000Z", "event": "step", "pid": 7,
                       "step": n, "seconds": 0.5, "loss": 2.5})


@pytest.fixture
def root(tmp_path):
    d = tmp_path / "state"
    d.mkdir()
    return d


def _line(root, events):
    recorded_workload(root, "w", "Running", events=events)
    p = read_progress(LocalBackend(root), "w", whole=True)
    return p, training_line(p)


def test_a_torn_line_mid_file_is_skipped_and_said(root):
    start = json.dumps({"ts": "2026-11-29T10:40:00.000000Z", "event": "run_start", "pid": 7,
                        "num_slices": 2, "devices": 2, "config": {}})
    p, line = _line(root, [start, _step(1), '{"ts": "2026-11-29T10:4', "\x00" * 8, _step(2)])
    assert p.last_step == 2 and p.skipped == 2 and p.unreadable is None
    assert line.startswith("training: step 2 ") and line.endswith("; 2 unreadable lines skipped")


def test_a_line_that_is_no_event_is_unreadable_not_nothing_yet(root):
    p, line = _line(root, [_step(1), '{"not": "an event"}', _step(2)])
    assert p.unreadable is not None
    assert line.startswith("training: the trainer's events cannot be read: events file ")
    assert "1 of 3 lines unreadable (first: line 2, not an object with an 'event')" in line


def test_no_events_file_is_nothing_yet(root):
    p, line = _line(root, None)
    assert p is None
    assert line == "training: nothing to read yet (no trainer events, no head log)"
