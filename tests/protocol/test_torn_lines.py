"""Torn lines of an events file (issue 48): skipped wherever they are and counted, never a
refusal; a line that is JSON but no event is still damage, said once."""

from __future__ import annotations

import json

from elastix.protocol.eventspec import split_jsonl

STEP = json.dumps({"ts": "2026-11-29T09:50:01.000000Z", "event": "step", "pid": 1, "step": 1,
                   "seconds": 0.5})
HALF = STEP[:17]  # a head killed mid-write on a full disk
NULS = "\x00" * 40  # what a crash can leave where a line was


def test_a_torn_line_mid_file_is_skipped_and_counted():
    split = split_jsonl("\n".join([STEP, HALF, NULS, STEP, STEP]) + "\n")
    assert len(split.records) == 3 and split.bad == []
    assert split.skipped == [(2, "not JSON"), (3, "not JSON")] and split.total == 5
    assert split.skipped_note() == "line 2, not JSON"


def test_a_torn_last_line_is_a_file_being_written_not_counted():
    split = split_jsonl("\n".join([STEP, STEP, HALF]))
    assert len(split.records) == 2 and split.skipped == [] and split.bad == []
    assert split.skipped_note() is None


def test_json_that_is_no_event_is_still_damage():
    split = split_jsonl("\n".join([STEP, "[1, 2]", HALF, STEP]) + "\n")
    assert split.bad == [(2, "not an object with an 'event'")]
    assert split.skipped == [(3, "not JSON")]


def test_a_file_with_no_event_at_all_is_not_an_events_file():
    split = split_jsonl("nope\n{}\n" + HALF)
    assert split.records == [] and split.skipped == []
    assert split.bad == [(1, "not JSON"), (2, "not an object with an 'event'"), (3, "not JSON")]
