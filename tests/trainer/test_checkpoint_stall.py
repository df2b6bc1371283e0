"""What a save holds the loop for: a host copy, then the write goes on elsewhere.

``blocking_seconds`` feeds goodput's "checkpoint stall", so it must be the time ``save()`` held
the caller, waiting for the previous save included; the device arrays may be donated to the
next step as soon as ``save()`` returns; a snapshot's host copy of the same step is written as
it is, not copied again.
"""

from __future__ import annotations

import threading
import time
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from trainer_helpers import assert_restores, make_cfg, make_trainer

from elastix_trainer.obs.events import EventLog
from elastix_trainer.state import writer
from elastix_trainer.state.checkpoint import Checkpointer
from elastix_trainer.state.snapshot import SnapshotStore
from elastix_trainer.train import Trainer


class _HeldEvents(EventLog):
    """Holds the first commit in flight (its report waits) until ``gate`` opens."""

    def __init__(self) -> None:
        super().__init__(None)
        self.gate = threading.Event()

    def emit(self, event, **kw):
        if event == "checkpoint_committed" and kw.get("step") == 1:
            self.gate.wait(60)
        return super().emit(event, **kw)


class _Timed(Checkpointer):
    """Records when ``settle`` is called (``save`` calls it first thing)."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.settle_calls: list[float] = []

    def settle(self, timeout=None):
        self.settle_calls.append(time.monotonic())
        return super().settle(timeout)


def _committed(events: EventLog, step: int) -> dict:
    return next(r for r in events.of("checkpoint_committed") if r["step"] == step)


def test_blocking_seconds_include_waiting_for_the_previous_save(tmp_path):
    events = _HeldEvents()
    ck = _Timed(str(tmp_path / "ck"), 1, events)
    opened = []

    def release():
        opened.append(time.monotonic())
        events.gate.set()

    try:
        ck.save(1, {"w": jnp.arange(8.0)}, {"i": 1})
        threading.Timer(0.3, release).start()
        ck.save(2, {"w": jnp.arange(8.0) + 1}, {"i": 2})  # waits for save 1 to settle
        assert ck.settle(timeout=60) is True
    finally:
        events.gate.set()
        ck.close()
    # save(2) was entered before it called settle() and could not return before the gate
    # opened: the loop was held at least that long (it used to report only its own copy).
    entered_by = ck.settle_calls[1]
    second = _committed(events, 2)
    assert second["blocking_seconds"] >= opened[0] - entered_by
    # its own copy began once the wait was over: a part of the loop's hold, never all of it
    assert 0 < second["copy_seconds"] <= second["blocking_seconds"]


def test_the_copy_ends_when_its_result_exists_not_when_the_hosts_answered(tmp_path):
    """``copy_seconds`` is where a fault stops failing the save, as the aim reads it: a host
    that answers for the copy was alive after the copy's end. Timed after the answers, it
    lagged them by the loop's wait for a core; a fault sent after the answers read as inside
    the copy of a save that (rightly) committed (CI, a busy machine)."""
    events = EventLog(None)
    ck = Checkpointer(str(tmp_path / "ck"), 1, events)
    asked: list[float] = []

    def check(what: str) -> None:  # the hosts answer, then the loop waits for a core
        asked.append(time.monotonic())
        time.sleep(0.5)

    try:
        entered = time.monotonic()
        ck.save(1, {"w": jnp.arange(8.0)}, {"i": 1}, check=check)
        assert ck.settle(timeout=60) is True
    finally:
        ck.close()
    rec = _committed(events, 1)
    assert rec["copy_seconds"] <= asked[0] - entered  # ended before the hosts were asked
    assert rec["blocking_seconds"] >= 0.5  # the loop still waited for the answers


def test_a_blocking_save_reports_the_whole_write_as_blocking(tmp_path):
    events = EventLog(None)
    ck = Checkpointer(str(tmp_path / "ck"), 1, events, async_save=False)
    ck.save(1, {"w": jnp.arange(8.0)}, {"i": 1})
    ck.close()
    rec = _committed(events, 1)
    assert rec["blocking_seconds"] >= rec["seconds"]  # held from the call to the commit


def test_the_device_arrays_may_be_donated_once_save_returns(tmp_path):
    state = {"w": jnp.arange(16.0), "b": jnp.ones((4, 4))}
    want = jax.tree.map(np.asarray, state)
    ck = Checkpointer(str(tmp_path / "ck"), 1, EventLog(None))
    ck.save(1, state, {"i": 1})
    for x in jax.tree.leaves(state):
        x.delete()  # what donating them to the next step does
    assert ck.settle(timeout=60) is True
    assert_restores(ck, 1, want, {"i": 1})


def test_a_save_writes_the_snapshot_it_was_given_without_reading_the_devices(tmp_path):
    state = {"w": jnp.arange(16.0)}
    snap = SnapshotStore(EventLog(None)).take(1, state, {"i": 1})
    state["w"].delete()  # nothing left on the devices to copy
    events = EventLog(None)
    ck = Checkpointer(str(tmp_path / "ck"), 1, events)
    ck.save(1, state, {"i": 1}, host_state=snap.host_state)
    assert ck.settle(timeout=60) is True
    got, _, _ = ck.restore(1, {"w": jax.ShapeDtypeStruct((16,), jnp.float32)})
    ck.close()
    np.testing.assert_array_equal(np.asarray(got["w"]), np.arange(16.0))
    assert _committed(events, 1)["copy_seconds"] == 0.0  # no copy of its own was made


class _Recording(Checkpointer):
    """Records, per save, whether it was handed the host snapshot of its step."""

    def __init__(self, trainer: Trainer, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.trainer, self.handed = trainer, {}

    def save(self, step, state, data_state, *, host_state=None, **kw):
        snap = self.trainer.snapshots.latest
        self.handed[step] = host_state is not None and snap is not None and \
            snap.step == step and host_state is snap.host_state
        super().save(step, state, data_state, host_state=host_state, **kw)


def test_the_loop_hands_a_same_step_snapshot_to_the_checkpoint(tmp_path):
    cfg = make_cfg(checkpoint_dir=str(tmp_path / "ck"), snapshot_period=4, steps=6)
    trainer = make_trainer(cfg, EventLog(None))
    trainer.ckpt = _Recording(trainer, cfg.checkpoint_dir, cfg.checkpoint_period, trainer.events,
                              max_to_keep=cfg.max_to_keep)
    trainer.train(trainer.start(frozenset(trainer.slices)))
    trainer.finish()
    # step 4: snapshot and checkpoint, one copy; step 6 (the final save): no snapshot
    assert trainer.ckpt.handed == {4: True, 6: False}
    assert trainer.ckpt.committed_steps() == [4, 6]


@pytest.fixture
def writes(monkeypatch):
    """Records which thread wrote each save, and can hang the write of one step."""
    rec = types.SimpleNamespace(threads={}, hang=None, release=threading.Event())
    run = writer.Write.__call__

    def recorded(job):
        rec.threads[job.pending.step] = threading.get_ident()
        if job.pending.step == rec.hang:
            rec.release.wait(60)
        return run(job)

    monkeypatch.setattr(writer.Write, "__call__", recorded)
    yield rec
    rec.release.set()


def test_every_save_is_written_by_the_one_thread_made_at_start_up(tmp_path, writes):
    ck = Checkpointer(str(tmp_path / "ck"), 1, EventLog(None))
    try:
        for step in (1, 2, 3):
            ck.save(step, {"w": jnp.arange(8.0) + step}, {"i": step})
        assert ck.settle(timeout=60) is True
    finally:
        ck.close()
    # A thread per save made save() wait for the new thread to be scheduled.
    assert set(writes.threads.values()) == {ck._writer.thread.ident}


def test_a_save_after_an_abandoned_write_does_not_queue_behind_it(tmp_path, writes):
    writes.hang = 1
    ck = Checkpointer(str(tmp_path / "ck"), 1, EventLog(None), settle_timeout=0.5)
    first = ck._writer.thread
    try:
        ck.save(1, {"w": jnp.arange(8.0)}, {"i": 1})
        ck.reset()  # step 1's write hangs past the timeout: abandoned, not committed
        ck.save(2, {"w": jnp.arange(8.0) + 2}, {"i": 2})
        assert ck.settle(timeout=30) is True  # written by a new thread, not behind step 1
        assert writes.threads[2] != writes.threads[1]
        assert 1 not in ck.committed_steps()
    finally:
        writes.release.set()
        ck.close()
        # The released write ends here, not after the test: a thread logging past its test
        # printed a traceback (CPython 3.11 parses source lines for it) while another test's
        # ast.parse ran, and CPython 3.11's AST state is shared by threads (gh-106905).
        first.join(60)


def test_the_writer_thread_ends_with_its_checkpointer(tmp_path, monkeypatch):
    import gc

    monkeypatch.setattr(writer.Writer, "POLL", 0.05)
    ck = Checkpointer(str(tmp_path / "ck"), 1, EventLog(None))
    ck.save(1, {"w": jnp.arange(8.0)}, {"i": 1})
    assert ck.settle(timeout=60) is True
    ck.close()
    thread = ck._writer.thread
    del ck
    gc.collect()
    thread.join(30)
    assert not thread.is_alive()
