"""The local backend must not flatter: no work survives the slice it ran on.

The controller's CPU devices stand in for every slice's chips, so they would go on computing
after a slice host was SIGKILLed, until the loss is detected (a heartbeat timeout later). On
TPU no step that needs a dead slice completes. These tests kill (or freeze) a real host process
and read the trainer's events: nothing completes, is snapshotted or is checkpointed after the
loss, the recovery restores the newest state saved of a step completed before it (nothing
older while that one exists), and steps lost count from the last step completed before it.
"""

from __future__ import annotations

import json
import os
import signal
import time

from local_helpers import tiny_trainer, wait_until

from elastix.measure.events import events_from_records, recoveries
from elastix.protocol import timefmt

# Checkpoints and snapshots every few steps, fast steps: ~20 steps, 5 checkpoints and 10
# snapshots would fit in the detection window if work after the loss were kept.
TRAIN = tiny_trainer("--snapshot-period 2 --elastic-mode pause-resume --max-slice-losses 10 "
                     "--slice-wait-timeout 120")
WORK = ("step", "snapshot_taken", "checkpoint_save_started")
SAVED = ("snapshot_taken", "checkpoint_committed")
SLACK = 0.05
"""Seconds: a step may complete between the signal and the exit being visible, or just before
the loss's date with its ``step`` event written just after."""


def _t(record: dict) -> float:
    return timefmt.parse(record["ts"]).timestamp()


def _create(cli, name: str) -> None:
    cli("workload", "create", name, "--tpu-type", "v5litepod-4", "--num-slices", "2",
        "--elastic-slices", "2", "--max-slice-restarts", "5", "--max-restarts", "0",
        "--command", TRAIN)


def _recovered(backend, name: str):
    recs = recoveries(events_from_records(backend.read_events(name) or []))
    return recs[0] if recs and recs[0].complete else None


def _committed_after_a_while(backend, name: str) -> None:
    wait_until(lambda: sum(e["event"] == "checkpoint_committed"
                           for e in backend.read_events(name) or []) >= 2, 240,
               "two committed checkpoints")


def _check_nothing_kept_after(events: list[dict], t_loss: float) -> dict:
    detected = next(e for e in events if e["event"] == "elastic_detected")
    t_detected = _t(detected)
    after = [(e["event"], e.get("step")) for e in events
             if e["event"] in WORK and t_loss + SLACK < _t(e) < t_detected]
    assert after == [], f"work completed on a lost slice before detection: {after}"
    restored = _check_restored_the_newest_good_state(events, detected, t_loss)
    saved_after = {e["step"] for e in events if e["event"] == "checkpoint_save_started"
                   and t_loss < _t(e) < t_detected}
    assert restored["step"] not in saved_after
    return detected


def _check_restored_the_newest_good_state(events: list[dict], detected: dict,
                                          t_loss: float) -> dict:
    """The recovery restores exactly the newest state saved (a snapshot taken, a checkpoint
    committed, before the restore) of a step completed before the loss: nothing older while
    that one exists (checkpoints and snapshots of steps completed on the stand-in devices after
    the loss must not retire it), nothing newer. Returns the ``elastic_restored`` event.

    Which steps completed before the loss is the trainer's own verdict, ``last_step``: the
    step it held at the loss's date, both read from the same monotonic clock. The events' wall
    times only bound it, which is all a test can do without racing: a step whose event was
    written ``SLACK`` before the loss completed before it, and at most one more completed just
    before the loss with its event written just after (``t_loss`` is the loss's date as the
    event gives it, late by the moment between reading the clock and writing the event)."""
    last = detected["last_step"]
    surely = [e["step"] for e in events if e["event"] == "step" and _t(e) <= t_loss - SLACK]
    maybe = [e["step"] for e in events if e["event"] == "step" and _t(e) <= t_loss]
    assert max(surely, default=0) <= last <= max(maybe, default=0) + 1
    i = next(i for i, e in enumerate(events) if e["event"] == "elastic_restored")
    saved = sorted({(e["step"], e["event"]) for e in events[:i]
                    if e["event"] in SAVED and e["step"] <= last})
    newest = max((s for s, _ in saved), default=0)
    restored = events[i]
    assert restored["step"] == newest, (
        f"restored {restored['source']} {restored['step']}, but {newest} is the newest state "
        f"saved of a step completed before the loss (step {last}): {saved}")
    return restored


def test_a_killed_host_takes_its_work_with_it(cli, backend):
    name = "fid-kill"
    _create(cli, name)
    try:
        _committed_after_a_while(backend, name)
        backend.kill_worker(name, slice=0)
        t_kill = time.time()  # just after the SIGKILL was sent
        rec = wait_until(lambda: _recovered(backend, name), 120, "the recovery")
        events = backend.read_events(name)
        detected = _check_nothing_kept_after(events, t_kill)
        # Dated by the host's exit (a pidfd on Linux), else by its last heartbeat.
        assert abs((_t(detected) - detected["since_loss"]) - t_kill) < 0.5
        assert rec.steps_lost == detected["last_step"] - rec.restored_step
    finally:
        cli("workload", "delete", name)


def test_a_frozen_host_counts_from_its_last_heartbeat(cli, backend):
    """A stopped host (SIGSTOP: alive, silent) answers nothing from the moment it stops: the
    step in flight is held until its heartbeats are a timeout old, then fails, and nothing
    completes meanwhile. The loss is dated at the last time the host was heard (a heartbeat or
    an answer), just before the stop; the recovery restores the newest state saved before it.
    (Before the stand-in failed in time, the devices went on for a heartbeat timeout and the
    work was undone afterwards; retiring the last good checkpoints behind that work once sent
    this run back to step 0.)"""
    name = "fid-stop"
    _create(cli, name)
    try:
        _committed_after_a_while(backend, name)
        st = json.loads(cli("workload", "status", name, "-o", "json").stdout)
        pid = st["slices"][1]["pods"][0]["pid"]
        os.kill(pid, signal.SIGSTOP)
        t_stop = time.time()
        try:
            wait_until(lambda: any(e["event"] == "elastic_detected"
                                   for e in backend.read_events(name) or []), 60, "detection")
        finally:
            os.kill(pid, signal.SIGCONT)
        rec = wait_until(lambda: _recovered(backend, name), 120, "the recovery")
        events = backend.read_events(name)
        detected = next(e for e in events if e["event"] == "elastic_detected")
        # The last heartbeat came at most one interval (0.2 s) before the stop.
        t_loss = _t(detected) - detected["since_loss"]
        assert t_stop - 0.5 < t_loss <= t_stop + SLACK
        # Work done after the last heartbeat, before detection, was not kept; the state of the
        # last step before it was.
        restored = _check_restored_the_newest_good_state(events, detected, t_loss)
        assert rec.restored_step == restored["step"]
        assert rec.pid_before == rec.pid_after
    finally:
        cli("workload", "delete", name)
