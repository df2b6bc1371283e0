"""The recovery point folded from trainer events: from real runs' events files, and the JobSet
annotations that carry it."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from elastix.protocol import recovery, timefmt
from elastix.protocol.recovery import RecoveryPoint, Tracker

FIXTURES = Path(__file__).resolve().parents[1] / "measure" / "fixtures"
RUNS = sorted(FIXTURES.glob("*.events.jsonl"))


def _records(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def _by_hand(records: list[dict]) -> RecoveryPoint | None:
    """The definition, read straight off the records: the newest commit (or checkpoint restore)
    and the last step completed or restored after it."""
    moved = [i for i, r in enumerate(records) if r["event"] == "checkpoint_committed"
             or (r["event"] in ("restore", "elastic_restored") and r["source"] == "checkpoint")]
    if not moved:
        return None
    point = records[moved[-1]]
    commits = [r for r in records[:moved[-1] + 1] if r["event"] == "checkpoint_committed"
               and r["step"] == point["step"]]
    when = timefmt.parse(commits[-1]["ts"]) if commits else None
    last = next(r["step"] for r in reversed(records)
                if r["event"] in ("step", "restore", "elastic_restored"))
    return RecoveryPoint(point["step"], when, max(0, last - point["step"]))


@pytest.mark.parametrize("run", RUNS, ids=[p.name.split(".")[0] for p in RUNS])
def test_every_prefix_of_a_real_run_agrees_with_the_definition(run):
    records = _records(run)
    lines = run.read_text().splitlines()
    for end in range(1, len(records) + 1, 7):  # as status sees the file while it grows
        want = _by_hand(records[:end])
        assert recovery.of_records(records[:end]) == want, end
        assert recovery.of_jsonl(lines[:end]) == want, end


def test_steps_after_a_commit_are_at_risk_and_a_rollback_lowers_them():
    t = Tracker()
    ts = "2026-12-03T14:02:11.250000Z"
    assert t.add({"event": "step", "step": 3, "ts": ts}) is None  # nothing committed yet
    assert t.add({"event": "checkpoint_committed", "step": 3, "ts": ts}) == recovery.COMMIT
    assert t.add({"event": "step", "step": 4, "ts": ts}) == recovery.PROGRESS
    assert t.add({"event": "snapshot_taken", "step": 4, "ts": ts}) is None
    assert t.point() == RecoveryPoint(3, timefmt.parse(ts), 1)
    # A recovery from a snapshot of step 4, then from the checkpoint itself.
    assert t.add({"event": "elastic_restored", "source": "snapshot", "step": 4}) is None
    assert t.add({"event": "elastic_restored", "source": "checkpoint", "step": 3}) \
        == recovery.PROGRESS
    assert t.point() == RecoveryPoint(3, timefmt.parse(ts), 0)  # the same commit: time kept
    # A new head skipping a damaged newer step restores one no event here saw committed.
    assert t.add({"event": "restore", "source": "checkpoint", "step": 2}) == recovery.COMMIT
    assert t.point() == RecoveryPoint(2, None, 0)
    # One that was: it keeps its commit's time though another commit came after it.
    later = "2026-12-03T14:05:00.000000Z"
    t.add({"event": "checkpoint_committed", "step": 6, "ts": later})
    assert t.add({"event": "restore", "source": "checkpoint", "step": 3}) == recovery.COMMIT
    assert t.point() == RecoveryPoint(3, timefmt.parse(ts), 0)


def test_the_annotations_round_trip_and_the_status_line():
    when = dt.datetime(2026, 12, 3, 14, 2, 11, 250000, tzinfo=dt.timezone.utc)
    point = RecoveryPoint(120, when, 7)
    notes = point.annotations()
    assert notes == {"elastix.dev/last-committed-step": "120",
                     "elastix.dev/last-committed-time": "2026-12-03T14:02:11.250Z",
                     "elastix.dev/steps-at-risk": "7"}
    assert RecoveryPoint.from_annotations({**notes, "other": "x"}) == point
    assert point.line() == "recovery point: step 120 (committed 14:02:11Z, 7 steps at risk)"
    assert RecoveryPoint(5, None, 1).line() == \
        "recovery point: step 5 (commit time unknown, 1 step at risk)"
    assert RecoveryPoint.from_annotations({}) is None
    assert RecoveryPoint.from_annotations({"elastix.dev/last-committed-step": "x"}) is None
