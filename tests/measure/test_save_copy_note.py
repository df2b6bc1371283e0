"""``--during save`` on a state whose checkpoint copy is over before a fault can follow the
save's start: said before anything is killed, and where the fault will land instead (issue
60: on the quickstart's tiny state every such fault landed in the write, unannounced)."""

from __future__ import annotations

from measure_helpers import ts

from elastix.backends.base import TrainerEvents
from elastix.commands.chaos import _say_copy
from elastix.measure.aim import save_copy_note
from elastix.measure.events import events_from_records
from elastix.measure.plan import Flags, build_plan


def _records(*copies: float) -> list[dict]:
    recs = [{"ts": ts(0), "event": "run_start", "pid": 1, "num_slices": 2, "devices": 8,
             "config": {"checkpoint_dir": "/c", "checkpoint_period": 20}}]
    for i, c in enumerate(copies, 1):
        recs += [{"ts": ts(i), "event": "checkpoint_save_started", "pid": 1, "step": 20 * i},
                 {"ts": ts(i + 0.5), "event": "checkpoint_committed", "pid": 1, "step": 20 * i,
                  "seconds": 0.4, "bytes": 1000, "blocking_seconds": c, "copy_seconds": c}]
    return recs


def test_copies_shorter_than_the_reach_are_said_with_where_the_fault_lands():
    note = save_copy_note(events_from_records(_records(0.0004, 0.0006)), following=True)
    assert note.startswith("--during save: this run's checkpoint copies last at most 0.6 ms "
                           "(its last 2), shorter than a fault can follow a save's start here "
                           "(about 1 ms")
    assert "it will land in the save's write, after the copy, where the save still commits" \
        in note
    # a copy that can be hit, or none known yet: nothing to say
    assert save_copy_note(events_from_records(_records(0.0004, 0.02)), following=True) is None
    assert save_copy_note(events_from_records(_records()), following=True) is None
    # read once a second (GKE): a 200 ms copy is out of reach too
    assert "about 1000 ms" in save_copy_note(events_from_records(_records(0.2)), following=False)


class _Stand:
    def __init__(self, records: list[dict]) -> None:
        self.records = records

    def events_path(self, name: str) -> None:
        return None

    def trainer_events(self, name: str) -> TrainerEvents:
        return TrainerEvents(source="events", from_start=True, records=self.records)


def _plan(**flags):
    from elastix.commands.faults import duration

    return build_plan(Flags(**flags), duration=duration, read_schedule=lambda p: [])


def test_the_note_comes_before_the_run_and_only_for_a_save(capsys):
    _say_copy(_Stand(_records(0.001, 0.002)), "demo", _plan(kills=1, during="save"))
    err = capsys.readouterr().err
    assert err.startswith("note: --during save: this run's checkpoint copies last at most "
                          "2.0 ms"), err
    _say_copy(_Stand(_records(0.001)), "demo", _plan(kills=1, during="snapshot"))
    assert capsys.readouterr().err == ""
