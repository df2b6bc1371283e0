"""What a wait says it waits for: the phase from a workload's status and its trainer's events,
and the line that shows it (issue 39)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from elastix.backends.base import KillRecord, PodInfo, SliceStatus, WorkloadStatus
from elastix.measure.events import events_from_jsonl, ms_of
from elastix.measure.progress import Phase, wait_phase
from elastix.views.console import console
from elastix.views.waiting import STILL_EVERY, WaitLine

REAL = Path(__file__).parent / "fixtures" / "real_run2.events.jsonl"
T = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)


def _events():
    return events_from_jsonl(REAL.read_text())


def _status(phase="Running", state="Running"):
    pod = PodInfo(name="demo-slice-0-host-0", role="worker", phase=phase, slice=0, host=0)
    head = PodInfo(name="demo-head", role="head", phase="Running")
    return WorkloadStatus(name="demo", namespace="default", backend="local", state=state,
                          created=T, num_slices=1, head=head,
                          slices=[SliceStatus(index=0, hosts=1, pods=[pod])])


def _course(events, st, killed=None) -> list[str]:
    """Each distinct phase as the events arrive one by one, in order."""
    seen: list[str] = []
    for i in range(len(events) + 1):
        what = wait_phase(st, events[:i], killed=killed).what
        if not seen or seen[-1] != what:
            seen.append(what)
    return seen


def test_a_real_run_goes_from_the_trainers_start_through_its_recovery():
    assert _course(_events(), _status()) == [
        "starting the trainer", "compiling", "waiting for the first save", "stepping",
        "recovering: cleanup", "recovering: waiting for slices", "recovering: restore",
        "recovering: first step", "stepping"]


def test_phases_say_since_when_from_the_events():
    events = _events()
    start = events[0]
    assert wait_phase(_status(), events[:1]) == Phase("compiling", start.t)
    first = next(e for e in events if e.name == "step")
    assert wait_phase(_status(), events[:2]) == Phase("waiting for the first save", first.t)
    detected = next(i for i, e in enumerate(events) if e.name == "elastic_detected")
    assert wait_phase(_status(), events[:detected + 1]) == Phase("recovering: cleanup",
                                                                 events[detected].t)


def test_pods_not_all_running_are_starting_and_none_left_is_stopping():
    assert wait_phase(_status(phase="Pending"), []).what == "starting"
    assert wait_phase(_status(state="Pending"), _events()[:3]).what == "starting"
    assert wait_phase(None, []).what == "stopping pods"
    # once the trainer started, a slice left pending (replica-resize steps on without it) is
    # no start: the events say what the trainer does
    events = _events()
    saved = next(i for i, e in enumerate(events) if e.name in ("snapshot_taken",
                                                                "checkpoint_committed"))
    after = next(i for i, e in enumerate(events) if i > saved and e.name == "step")
    assert wait_phase(_status(phase="Pending"), events[:after + 1]).what == "stepping"
    # the save alone is not yet stepping, as wait --for stepping means it: a step after it is
    assert wait_phase(_status(), events[:saved + 1]).what == "waiting for the first save"


def _killed_before_detection():
    """The recorded run's events, the index of its first ``elastic_detected``, and a kill of
    slice 1's host a millisecond after the event before it."""
    events = _events()
    detected = next(i for i, e in enumerate(events) if e.name == "elastic_detected")
    at = dt.datetime.fromtimestamp((events[detected - 1].t + 1) / 1000, dt.timezone.utc)
    return events, detected, KillRecord(workload="demo", pod="demo-slice-1-host-0", slice=1,
                                        host=0, node=None, time=at)


def test_a_kill_is_named_until_the_trainer_detects_it():
    events, detected, kill = _killed_before_detection()
    after = _course(events[:detected], _status(), [kill])
    assert after[-1] == "killed demo-slice-1-host-0"
    assert wait_phase(_status(), events[:detected], killed=[kill]).since == ms_of(kill.time)
    assert wait_phase(_status(), events[:detected + 1], killed=[kill]).what \
        == "recovering: cleanup"


def test_a_hang_or_a_term_is_named_as_what_it_did():
    # Issue 49: --fault hang and --fault term printed "killed pod"; a hang kills nothing.
    import dataclasses

    from elastix.views.measurement import fault_line

    events, detected, kill = _killed_before_detection()
    hang = dataclasses.replace(kill, fault="hang")
    term = dataclasses.replace(kill, fault="term", grace=5.0)
    assert wait_phase(_status(), events[:detected], killed=[hang]).what \
        == "stopped demo-slice-1-host-0"
    assert wait_phase(_status(), events[:detected], killed=[term]).what \
        == "terminated demo-slice-1-host-0"
    assert fault_line(kill).startswith("killed pod demo-slice-1-host-0 (slice 1, host 0)")
    assert fault_line(hang).startswith("stopped (SIGSTOP) pod demo-slice-1-host-0")
    assert fault_line(term).startswith("terminated (SIGTERM, then SIGKILL after 5 s) pod ")
    assert fault_line(dataclasses.replace(hang, dry_run=True)).startswith("would stop pod ")


class _Clock:
    def __init__(self) -> None:
        self.now = T.timestamp()

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_a_line_per_phase_and_a_still_line_now_and_then():
    err = console(stderr=True, force_terminal=False, width=200)
    clock = _Clock()
    with err.capture() as cap, WaitLine(err, "waiting for demo to be stepping",
                                        clock=clock) as line:
        line(Phase("starting"))
        clock.now += 5
        line(Phase("starting"))  # no news: no line
        line(Phase("compiling", int(clock.now * 1000) - 2000))
        clock.now += STILL_EVERY
        line(Phase("compiling"))
    lines = cap.get().splitlines()
    at = dt.datetime.fromtimestamp(T.timestamp() + 3).strftime("%H:%M:%S")
    assert lines[0].startswith("waiting for demo to be stepping: starting (since ")
    assert lines[1] == f"waiting for demo to be stepping: compiling (since {at}, 2 s)"
    assert lines[2] == f"waiting for demo to be stepping: still compiling (since {at}, 32 s)"
    assert len(lines) == 3


def test_off_a_terminal_a_still_line_comes_though_the_waiter_calls_once():
    # delete --wait and create --replace say their phase once and wait in one call; a soak
    # sleeps out its interval: the still lines come from the line's own timer
    import io
    import time

    out = io.StringIO()
    err = console(stderr=True, force_terminal=False, width=200, file=out)
    clock = _Clock()
    with WaitLine(err, "deleting demo", clock=clock) as line:
        line(Phase("stopping pods"))
        clock.now += STILL_EVERY + 1
        for _ in range(300):  # the timer looks every second: 30 s of a busy machine at most
            if "still" in out.getvalue():
                break
            time.sleep(0.1)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("deleting demo: stopping pods (since "), lines
    assert len(lines) == 2 and lines[1].startswith("deleting demo: still stopping pods"), lines
    clock.now += 10 * STILL_EVERY
    assert line._timer is not None
    line._timer.join(30)  # closed: the timer ends, and says nothing more
    assert not line._timer.is_alive() and out.getvalue().splitlines() == lines


def test_on_a_terminal_one_live_line_ended_with_the_wait():
    err = console(stderr=True, force_terminal=True, width=200)
    with WaitLine(err, "waiting for demo to be stepping") as line:
        line(Phase("compiling"))
        live = line._status
        assert live is not None and "compiling (since" in line.line()
        line(Phase("waiting for the first save"))
        assert line._status is live  # the same line, its text changed
    assert line._status is None
