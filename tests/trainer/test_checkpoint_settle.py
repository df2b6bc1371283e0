"""A save always settles: a failure after the write (listing, counting, reporting) can neither
hang the next save nor the recovery's cleanup, and a write that never finishes becomes an error
within a bound (issue: one failed events write once left the process alive and silent)."""

from __future__ import annotations

import threading
import time

import jax.numpy as jnp
import pytest

from elastix_trainer.obs.events import EventLog
from elastix_trainer.state.checkpoint import Checkpointer, SaveTimeout


class _FullDiskEvents(EventLog):
    """An events file on a full disk: reporting a commit fails (the write itself succeeded)."""

    def emit(self, event, **kw):
        if event == "checkpoint_committed":
            raise OSError(28, "No space left on device")
        return super().emit(event, **kw)


class _StalledEvents(EventLog):
    """An events upload that never returns (a stalled storage call) until ``gate`` opens."""

    def __init__(self) -> None:
        super().__init__(None)
        self.gate = threading.Event()

    def emit(self, event, **kw):
        if event == "checkpoint_committed":
            self.gate.wait(60)
        return super().emit(event, **kw)


STATE = {"w": jnp.arange(8.0)}


def test_a_failure_after_the_write_still_settles_the_save(tmp_path):
    ck = Checkpointer(str(tmp_path / "ck"), 1, _FullDiskEvents(None))
    ck.save(1, STATE, {"i": 1})
    # Before the fix the reporting thread died before marking the save done: this waited for
    # ever (bounded here so the test fails instead of hanging).
    assert ck.settle(timeout=60) is True  # on storage, though the event could not be written
    ck.save(2, STATE, {"i": 2})  # the next save is not stuck behind the first
    assert ck.settle(timeout=60) is True
    assert ck.committed_steps() == [1, 2]
    ck.close()


def test_a_write_that_never_settles_is_an_error_within_the_bound(tmp_path):
    events = _StalledEvents()
    ck = Checkpointer(str(tmp_path / "ck"), 1, events, settle_timeout=0.5)
    stalled = ck._writer.thread
    try:
        ck.save(1, STATE, {"i": 1})
        t0 = time.monotonic()
        with pytest.raises(SaveTimeout, match="step 1 did not finish in 0.5 s"):
            ck.settle()
        assert time.monotonic() - t0 < 30
        ck.reset()  # abandons it instead of waiting again (the recovery's cleanup path)
        assert not ck.in_flight()
    finally:
        events.gate.set()
        stalled.join(60)  # its late report ends inside this test (test_checkpoint_stall says why)


def test_a_recovery_leaves_a_write_writing_only_when_a_snapshot_covers_it(tmp_path):
    """``leave_writing``: a save in flight is left writing through a recovery only when the
    snapshot it would restore is at least as new; its manager is dropped once it settles, at
    the next save or restore, which then see it committed."""
    gate = threading.Event()
    ck = Checkpointer(str(tmp_path / "ck"), 1, EventLog(None))
    try:
        assert ck.leave_writing(5) is False  # nothing in flight
        ck._writer.put(lambda: gate.wait(60))  # a slow disk: the save of 4 waits behind this
        ck.save(4, STATE, {"i": 4})
        assert ck.in_flight()
        assert ck.leave_writing(None) is False  # no snapshot: a restore may want step 4
        assert ck.leave_writing(3) is False  # the snapshot is older than the save
        assert ck.in_flight()
        assert ck.leave_writing(4) is True  # as new: the recovery need not wait
        assert ck.in_flight()
        gate.set()
        state, data, _ = ck.restore(4, STATE)  # waits for the write, then reads it
        assert data == {"i": 4} and (state["w"] == STATE["w"]).all()
        assert ck.committed_steps() == [4] and not ck.in_flight()
        ck.save(5, STATE, {"i": 5})
        assert ck.settle(timeout=60) is True and ck.committed_steps() == [4, 5]
    finally:
        gate.set()
        ck.close()


def test_a_write_left_writing_that_hangs_still_meets_the_bound(tmp_path):
    """A save left writing through a recovery and then hung is abandoned at the next save,
    after ``settle_timeout``, as the recovery's own wait would have; the next save commits."""
    events = _StalledEvents()
    ck = Checkpointer(str(tmp_path / "ck"), 1, events, settle_timeout=0.5)
    stalled = ck._writer.thread
    try:
        ck.save(1, STATE, {"i": 1})
        assert ck.leave_writing(1) is True
        t0 = time.monotonic()
        ck.save(2, STATE, {"i": 2})  # drops the stale manager: abandons the hung write
        assert time.monotonic() - t0 < 30
        events.gate.set()
        assert ck.settle(timeout=60) is True
        assert 2 in ck.committed_steps()
    finally:
        events.gate.set()
        stalled.join(60)
        ck.close()
