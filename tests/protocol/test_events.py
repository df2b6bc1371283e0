"""The event-line contract: what the trainer writes is what measurement reads.

Every event the trainer can emit is formatted with its template, prefixed with its time, and
parsed back by measurement; the values must equal those measurement takes from the JSONL record
of the same event. A reworded template changes the parser with it; a template whose values no
longer parse back (or parse as another event) fails here, not silently in a measurement.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from elastix.measure.events import events_from_log, events_from_records
from elastix.protocol import eventspec, timefmt

ROOT = Path(__file__).resolve().parents[2]
TS = "2026-11-29T09:50:01.123456Z"

# Values of each event, as the trainer passes them: raw seconds, extra digits and all.
SAMPLES: dict[str, list[dict]] = {
    eventspec.RUN_START: [{"pid": 4242, "num_slices": 4, "devices": 8, "config": {"d": 64}}],
    eventspec.STEP: [{"step": 12, "seconds": 0.41249, "loss": 5.43214, "live_slices": 4,
              "tflops_per_device": 0.0104, "global_batch": 8}],
    eventspec.CHECKPOINT_SAVE_STARTED: [{"step": 12}],
    eventspec.CHECKPOINT_COMMITTED: [{"step": 12, "seconds": 0.7704, "bytes": 1234567,
                              "blocking_seconds": 0.0101}],
    eventspec.CHECKPOINT_DAMAGED: [{"step": 40, "error": "FileNotFoundError: no _METADATA in "
                                                       "gs://b/run/40/state"}],
    eventspec.CHECKPOINT_SAVE_FAILED: [{"step": 12, "error": "OSError: disk full (28)"},
                               {"step": 12, "error": ""}],
    eventspec.SNAPSHOT_TAKEN: [{"step": 12, "seconds": 0.0302, "bytes": 1234567}],
    eventspec.RESTORE: [{"source": "checkpoint", "step": 10, "bytes": 1234567, "seconds": 0.2,
                 "path": "/c/10"},
                {"source": "snapshot", "step": 14, "bytes": 99, "seconds": 0.0301,
                 "path": "host-memory"}],
    eventspec.ELASTIC_DETECTED: [{"recovery": 1, "kind": "slice_lost", "error": "DATA_LOSS: worker gone",
                          "last_step": 14, "live_slices": 3, "lost_slices": [2],
                          "since_loss": 2.1034},
                         {"recovery": 2, "kind": "slice_lost", "error": "", "last_step": 0,
                          "live_slices": 1, "lost_slices": [0, 2, 3]},
                         {"recovery": 3, "kind": "slice_lost", "error": "x (y): z",
                          "last_step": 5, "live_slices": 4, "lost_slices": []}],
    eventspec.ELASTIC_CLEANUP_DONE: [{"recovery": 1, "seconds": 0.0490004}],
    eventspec.ELASTIC_SLICES_READY: [{"recovery": 1, "live_slices": 4, "required_slices": 3,
                              "seconds": 2.2512}],
    eventspec.ELASTIC_RESTORED: [{"recovery": 1, "source": "init", "step": 0, "bytes": 0,
                          "seconds": 0.0},
                         {"recovery": 1, "source": "checkpoint", "step": 10, "bytes": 5,
                          "seconds": 0.19996}],
    eventspec.ELASTIC_FIRST_STEP: [{"recovery": 1, "step": 11, "seconds": 1.6004}],
    eventspec.ELASTIC_LOST_AGAIN: [{"recovery": 1, "lost_slices": [0], "live_slices": 2},
                                   {"recovery": 3, "lost_slices": [0, 3], "live_slices": 1}],
    eventspec.ELASTIC_RESIZE: [{"recovery": 1, "from_slices": 4, "to_slices": 3}],
    eventspec.STEPS_SKIPPED: [{"first": 26, "last": 27, "count": 2},
                              {"first": 9, "last": 9, "count": 1}],
    eventspec.RUN_END: [{"status": "completed", "reason": "all steps done", "step": 100},
                {"status": "failed", "reason": "slice-loss budget (2 > 1)", "step": 7}],
}
# Values the line shows that the record does not carry.
LINE_ONLY = {eventspec.ELASTIC_RESIZE: {"slices": [0, 1, 3], "why": "resize"}}


def _cases():
    for name, samples in SAMPLES.items():
        for i, values in enumerate(samples):
            yield pytest.param(name, values, id=f"{name}-{i}")


def test_every_event_has_samples_and_sane_keys():
    assert set(SAMPLES) == set(eventspec.EVENTS)
    for name, ev in eventspec.EVENTS.items():
        assert set(ev.measured) <= set(ev.keys) | {"pid"}, name
        assert set(ev.optional) <= set(ev.measured), name
        assert set(ev.sometimes) <= set(ev.keys), name
        for values in SAMPLES[name]:
            assert set(ev.keys) - set(ev.sometimes) <= set(values) - {"pid"} <= set(ev.keys), name


@pytest.mark.parametrize(("name", "values"), _cases())
def test_line_parses_back_to_the_records_values(name, values):
    record = {"ts": TS, "event": name, "pid": 4242, **values}
    text = eventspec.line(name, **{"pid": 4242, **values, **LINE_ONLY.get(name, {})})
    (from_log,) = events_from_log([f"{timefmt.iso_ms(timefmt.parse(TS))} {text}"])
    (from_record,) = events_from_records([record])
    # Outside a recovery, a recovery's restore line reads as a start-up restore (by design).
    assert from_log.name == (eventspec.RESTORE if name == eventspec.ELASTIC_RESTORED else name)
    # A line carries the measured values; a record may add its record-only (sometimes) keys.
    sometimes = set(eventspec.EVENTS[name].sometimes)
    assert from_log.t == from_record.t
    assert from_log.data == {k: v for k, v in from_record.data.items() if k not in sometimes}
    assert set(from_log.data) == set(eventspec.EVENTS[name].measured)
    assert {k: from_record.data[k] for k in sometimes & set(from_record.data)} == \
        {k: values[k] for k in sometimes & set(values)}


def test_optional_values_may_be_missing():
    (ev,) = events_from_log(["2026-11-29T09:50:01.123Z completed step: 3, seconds: 0.500"])
    assert (ev.name, ev.data) == ("step", {"step": 3, "seconds": 0.5, "live_slices": None})
    (ev,) = events_from_log(["2026-11-29T09:50:01.123Z elastix: run end: failed at step -1"])
    assert ev.data == {"status": "failed", "step": -1, "reason": None}


def test_the_documented_lines_parse_and_cover_every_template():
    doc = (ROOT / "docs" / "events.md").read_text()
    block = re.search(r"## Log lines.*?```\n(.*?)```", doc, re.S).group(1)
    lines = [ln for ln in block.splitlines() if ln.strip()]
    parsed = events_from_log(lines)
    assert len(parsed) == len(lines)
    templates = {eventspec.EVENTS[e.name].template for e in parsed}
    assert templates == {ev.template for ev in eventspec.EVENTS.values()}
