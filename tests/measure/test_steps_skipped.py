"""Every step accounted (issue 74): a recovery that restores a copy newer than the last step
logged (staged copies, steps in flight) reports steps lost from the newest completed step, never
negative, and names the steps it skipped; an events file from before ``steps_skipped`` still
reads, its gap inferred and said so."""

from __future__ import annotations

from elastix.backends.base import EVENTS_FILE, HEAD_LOG, TrainerEvents
from elastix.measure.events import events_of, recoveries
from elastix.protocol import eventspec


def _records(skipped: bool) -> list[dict]:
    t = lambda s: f"2026-12-08T01:00:{s:02d}.000000Z"  # noqa: E731
    recs = [{"ts": t(0), "event": "run_start", "pid": 7, "num_slices": 2, "devices": 4,
             "config": {}}]
    recs += [{"ts": t(n), "event": "step", "pid": 7, "step": n, "seconds": 0.5, "loss": 2.0,
              "live_slices": 2, "tflops_per_device": 1.0, "global_batch": 8}
             for n in range(1, 26)]
    recs.append({"ts": t(30), "event": "elastic_detected", "pid": 7, "recovery": 1,
                 "kind": "slice_lost", "error": "lost a host before step 26 completed",
                 "last_step": 25, "live_slices": 1, "lost_slices": [1]})
    if skipped:
        recs.append({"ts": t(33), "event": "steps_skipped", "pid": 7, "first": 26, "last": 27,
                     "count": 2})
    recs += [{"ts": t(33), "event": "elastic_restored", "pid": 7, "recovery": 1,
              "source": "snapshot", "step": 27, "bytes": 10, "seconds": 0.1},
             {"ts": t(35), "event": "step", "pid": 7, "step": 28, "seconds": 2.0, "loss": 2.0,
              "live_slices": 2, "tflops_per_device": 1.0, "global_batch": 8},
             {"ts": t(35), "event": "elastic_first_step", "pid": 7, "recovery": 1, "step": 28,
              "seconds": 2.0}]
    return recs


def _recovery(skipped: bool):
    events, _ = events_of(TrainerEvents(EVENTS_FILE, True, records=_records(skipped)))
    (r,) = recoveries(events)
    return r


def test_the_fault_hunts_case_loses_no_steps_and_names_the_skipped_ones():
    r = _recovery(skipped=True)
    assert (r.last_step, r.restored_step) == (25, 27)
    assert r.steps_lost == 0  # was -2: steps 26 and 27 completed, the copy of 27 proves it
    assert r.steps_skipped == (26, 27, True)
    assert r.to_json()["steps_skipped"] == {"first": 26, "last": 27, "said": True}


def test_an_events_file_from_before_reads_with_its_gap_inferred():
    r = _recovery(skipped=False)
    assert r.steps_lost == 0 and r.steps_skipped == (26, 27, False)


def test_the_skipped_steps_line_reads_back_from_a_log():
    _, line = eventspec.build(eventspec.STEPS_SKIPPED, first=26, last=27, count=2)
    m = eventspec.pattern(eventspec.STEPS_SKIPPED).search(line)
    assert m is not None and m.groups() == ("26", "27", "2")
    assert line == ("elastix: steps 26-27 were computed but never logged (2 skipped, their "
                    "losses not read): the copy restored is newer than the last step logged")
    got, _ = events_of(TrainerEvents(HEAD_LOG, True,
                                     lines=[f"2026-12-08T01:00:00.000Z {line}"]))
    assert [(e.name, e.data) for e in got] == [
        ("steps_skipped", {"first": 26, "last": 27, "count": 2})]
