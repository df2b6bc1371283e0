"""A slice loss dated after the fact (the local backend's) never costs a committed checkpoint or
a good snapshot. What decides is when a step *completed*: its state is the same bytes whenever
it is copied, so a loss 3 ms after step N leaves N's snapshot and checkpoint good. A step that
completed after the loss is never restored; its save is un-committed if it is still in flight,
and kept on storage (skipped) if it was already reported committed. Two snapshot slots: the
previous snapshot stays until a newer one exists.

Real Orbax checkpoints on a real filesystem; the loss is dated by a health source the way the
local heartbeat receiver dates one (``losses``), and it fails the next step inside XLA."""

from __future__ import annotations

import functools
import os
import threading
import time

import jax.numpy as jnp
import pytest
from fake_gcs import emulator_env
from trainer_helpers import losses, make_cfg, on, run_elastic

from elastix_trainer.elastic.health import ManualHealth
from elastix_trainer.obs.events import EventLog
from elastix_trainer.state.checkpoint import Checkpointer


class DatedHealth(ManualHealth):
    """ManualHealth that also dates its losses, as ``LocalHeartbeatHealth`` does: ``exact`` ones
    (a host's exit) and stale ones (a host that hangs: only known from its last heartbeat)."""

    def __init__(self, num_slices: int) -> None:
        super().__init__(num_slices)
        self.dated: dict[int, tuple[float, bool]] = {}  # slice -> (since, exact)

    def lose(self, s: int, since: float, exact: bool = True) -> None:
        self.dated[s] = (since, exact)

    def losses(self, slices, *, exact: bool = False) -> dict[int, float]:
        return {s: t for s, (t, ex) in self.dated.items() if s in slices and (ex or not exact)}

    def vouched(self, slices) -> float:
        # As the heartbeat receiver: a host is vouched for up to its last heartbeat, which for
        # a lost one is the date of its loss; the others have just been heard.
        return min([t for s, (t, _) in self.dated.items() if s in slices], default=time.monotonic())

    def wait_for(self, required: int, timeout: float, stop=None):
        self.dated.clear()  # as the heartbeat receiver: the loss is being handled
        self.set_up(*range(self.num_slices))
        return super().wait_for(required, timeout, stop)


def _kill_right_after(health: DatedHealth, step: int, *, exact: bool = True, down_at=None):
    """An after_complete hook: the loss is dated just after ``step`` completed (before its
    snapshot's and checkpoint's copies), once; the slice is down from step ``down_at``. Both
    hooks take ``events``, the run's log, once it exists."""
    def after(events, session, n, done_at, seconds):
        if n == step and not events.of("elastic_detected"):
            health.lose(1, time.monotonic(), exact)
            if down_at is None:
                health.set_down(1)

    def before(events, session, n):
        if down_at is not None and n == down_at and not events.of("elastic_detected"):
            health.set_down(1)
    return after, before


def _run(cfg, health, after, before):
    def setup(trainer, runtime):
        on(trainer, after_complete=functools.partial(after, trainer.events),
           before_dispatch=functools.partial(before, trainer.events))
    return run_elastic(cfg, health, setup=setup)


def _committed_dirs_exist(ck_dir, events) -> None:
    """Every step reported committed is still on storage, as itself or moved aside."""
    names = os.listdir(ck_dir)
    for r in events.of("checkpoint_committed"):
        assert any(n == str(r["step"]) or n.startswith(f"{r['step']}.") for n in names), r


def test_a_loss_just_after_a_checkpointed_step_keeps_it(reference, tmp_path):
    health = DatedHealth(4)
    ck_dir = tmp_path / "ck"
    cfg = make_cfg(checkpoint_dir=str(ck_dir), snapshot_period=2)
    outcome, trainer, _ = _run(cfg, health, *_kill_right_after(health, 4))
    assert outcome.status == "completed", outcome
    ev = trainer.events
    assert ev.of("elastic_detected")[0]["last_step"] == 4
    restored = ev.of("elastic_restored")[0]
    assert restored["step"] == 4  # the snapshot of 4 (a tie with checkpoint 4 goes to it)
    assert 4 in [r["step"] for r in ev.of("checkpoint_committed")]
    assert 4 in Checkpointer(str(ck_dir), 4, EventLog(None)).committed_steps()
    _committed_dirs_exist(ck_dir, ev)
    assert losses(ev) == reference["losses"]


def test_a_loss_just_after_a_sessions_first_step_keeps_its_snapshot(reference, tmp_path):
    health = DatedHealth(4)
    cfg = make_cfg(checkpoint_dir=str(tmp_path / "ck"), snapshot_period=1)
    outcome, trainer, _ = _run(cfg, health, *_kill_right_after(health, 1))
    assert outcome.status == "completed", outcome
    restored = trainer.events.of("elastic_restored")[0]
    assert (restored["source"], restored["step"]) == ("snapshot", 1)  # not from init
    assert losses(trainer.events) == reference["losses"]


def test_a_hang_found_late_falls_back_to_the_previous_snapshot(reference, tmp_path):
    """The loss is dated after step 3 but only known later (a hung host, no exit to see), so
    step 4 completes, is snapshotted and checkpointed on stand-in devices; none of that is
    restored, the previous snapshot (step 2) is, and the checkpoint of 4 that was reported
    committed stays on storage."""
    health = DatedHealth(4)
    ck_dir = tmp_path / "ck"
    cfg = make_cfg(checkpoint_dir=str(ck_dir), snapshot_period=2, async_checkpoint=False)
    outcome, trainer, _ = _run(cfg, health, *_kill_right_after(health, 3, exact=False, down_at=5))
    assert outcome.status == "completed", outcome
    ev = trainer.events
    restored = ev.of("elastic_restored")[0]
    assert (restored["source"], restored["step"]) == ("snapshot", 2)
    assert [r["step"] for r in ev.of("checkpoint_committed")] == [4, 4, 8]
    assert [n for n in os.listdir(ck_dir) if n.startswith("4.void-")]  # kept, moved aside
    _committed_dirs_exist(ck_dir, ev)
    assert losses(ev) == reference["losses"]


@pytest.mark.parametrize("source", ["snapshot", "checkpoint"])
def test_a_hang_found_many_saves_late_keeps_the_state_from_before_it(source, reference,
                                                                     tmp_path):
    """The loss is dated after step 2 and found only at step 7: steps 3-6 complete on stand-in
    devices, with checkpoints 4 and 6 (more than ``--max-to-keep 1``) and, with snapshots, one
    each (more than the two slots). Retiring the snapshot or the checkpoint of step 2 behind
    those newer ones, which the loss then voids, sent the run back to step 0; the state of
    step 2 is restored."""
    health = DatedHealth(4)
    ck_dir = tmp_path / "ck"
    cfg = make_cfg(checkpoint_dir=str(ck_dir), checkpoint_period=2, max_to_keep=1,
                   snapshot_period=1 if source == "snapshot" else 0, async_checkpoint=False)
    outcome, trainer, _ = _run(cfg, health, *_kill_right_after(health, 2, exact=False, down_at=7))
    assert outcome.status == "completed", outcome
    ev = trainer.events
    assert [r["step"] for r in ev.of("checkpoint_committed")][:3] == [2, 4, 6]  # 4, 6: void
    assert ev.of("elastic_detected")[0]["last_step"] == 2
    restored = ev.of("elastic_restored")[0]
    assert (restored["source"], restored["step"]) == (source, 2)  # not init
    assert losses(ev) == reference["losses"]


def checkpoint_dir(where: str, name: str, tmp_path, request, monkeypatch) -> str:
    """A checkpoint directory on a local disk, or on fake-gcs-server (``where`` "gcs", the
    client pointed at it through the environment)."""
    if where != "gcs":
        return str(tmp_path / "ck")
    for k, v in emulator_env(request.getfixturevalue("gcs")).items():
        monkeypatch.setenv(k, v)
    return f"gs://ckpts/{name}"


@pytest.mark.parametrize("where", ["disk", "gcs"])
def test_a_save_in_flight_of_a_discarded_step_never_commits(where, tmp_path, request,
                                                            monkeypatch):
    directory = checkpoint_dir(where, "raced", tmp_path, request, monkeypatch)
    events = EventLog(None)
    ck = Checkpointer(directory, 4, events)
    held = threading.Event()
    ck._writer.put(held.wait)  # a writer job that waits: the save of step 4 stays in flight
    state = {"w": jnp.arange(1024.0)}
    ck.save(4, state, {"next_index": 4})
    assert ck.void_newer(3, since=0.0) == [4]  # the loss handling decides first
    held.set()
    assert ck.settle() is False
    assert not events.of("checkpoint_committed")
    (failed,) = events.of("checkpoint_save_failed")
    assert "completed after a slice was gone" in failed["error"]
    assert ck.committed_steps() == [] and ck.uncommitted()
    ck.cleanup_uncommitted()
    assert ck.committed_steps() == [] and ck.uncommitted() == []
    ck.close()
