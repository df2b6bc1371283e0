"""A slice lost while an async checkpoint write is in flight *and that write fails for real*.

The checkpoint directory is a 2 MiB tmpfs: the first checkpoint (step 4, ~1.2 MB) fits, the
second (step 8) runs out of space part-way through its background write (ENOSPC from the
kernel, not a mock). The slice goes down right after that save starts. Recovery must wait for
the write inside its guard, count it as not committed, remove the half-written directory and
restore step 4: maxtext#5260's case, where MaxText restores the incomplete step and dies.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from tmpfs import small_tmpfs
from trainer_helpers import REPO, cli_env, losses, make_cfg, on, run_elastic

from elastix_trainer.elastic.health import ManualHealth
from elastix_trainer.obs.events import EventLog
from elastix_trainer.state.checkpoint import Checkpointer


@pytest.fixture
def small_disk(tmp_path):
    with small_tmpfs(tmp_path / "small", "size=2m", "a 2 MiB tmpfs") as d:
        yield d


def _grow(disk) -> None:
    subprocess.run(["mount", "-o", "remount,size=16m", str(disk)], check=True)


def test_slice_lost_while_a_failing_write_is_in_flight(reference, small_disk):
    health = ManualHealth(4)

    def on_wait(h, required):
        if len(h.waits) > 1:  # not the start-up wait: the operator frees space meanwhile
            _grow(small_disk)
        h.set_up(*range(h.num_slices))

    health.on_wait = on_wait
    cfg = make_cfg(checkpoint_dir=str(small_disk / "ck"))

    def setup(trainer, runtime):
        def lose_during_save(session, step):
            if step == 8 and not trainer.events.of("elastic_detected"):
                health.set_down(2)
        on(trainer, after_save=lose_during_save)
        # One more step than the reference's 8, so the loss right after the step-8 save is seen
        # by a step (the last step's save would otherwise end the run first).
        trainer.cfg.steps = 9

    outcome, trainer, _ = run_elastic(cfg, health, setup=setup)
    assert outcome.status == "completed", outcome
    ev = trainer.events
    order = [r["event"] for r in ev.records]
    failed = [i for i, r in enumerate(ev.records)
              if r["event"] == "checkpoint_save_failed" and r["step"] == 8]
    assert failed, "the step-8 write should have run out of space"
    detected = order.index("elastic_detected")
    # The write was still in flight when the loss was detected and settled (failed) inside the
    # cleanup guard, before the restore.
    assert order.index("checkpoint_save_started") < detected < failed[0] < order.index(
        "elastic_cleanup_done") < order.index("elastic_restored")
    restored = ev.of("elastic_restored")[0]
    assert (restored["source"], restored["step"]) == ("checkpoint", 4)
    got = losses(ev)
    assert {s: got[s] for s in range(1, 9)} == reference["losses"]
    # Nothing half-written is left, and storage still holds only what committed.
    ck = Checkpointer(str(small_disk / "ck"), 4, EventLog(None))
    assert ck.committed_steps() == [4, 8, 9]  # 8 and 9 saved again once there was room
    assert not [n for n in os.listdir(small_disk / "ck") if "tmp" in n]


def test_failed_writes_do_not_stop_training_but_an_uncommitted_end_is_a_failure(reference,
                                                                                small_disk):
    """With no room at all for a second checkpoint, every later save fails in the background;
    each is reported as not committed, none poisons the next save, and training goes on. But
    the final step is not on storage, so the run has not completed: it is saved once more and,
    when that fails too, the run fails naming the final step and the newest committed one (it
    used to print "completed", exit 0, and a re-run resumed from step 2)."""
    cfg = make_cfg(checkpoint_dir=str(small_disk / "ck"), checkpoint_period=2)
    outcome, trainer, _ = run_elastic(cfg)
    assert outcome.status == "failed", outcome
    assert "final checkpoint (step 8) did not commit" in outcome.reason
    assert "newest committed checkpoint is step 2" in outcome.reason
    ev = trainer.events
    assert [r["step"] for r in ev.of("checkpoint_committed")] == [2]
    assert [r["step"] for r in ev.of("checkpoint_save_failed")] == [4, 6, 8, 8]  # 8: retried
    assert all("No space left on device" in r["error"] or "RESOURCE_EXHAUSTED" in r["error"]
               for r in ev.of("checkpoint_save_failed"))
    assert losses(ev) == reference["losses"]
    ck = Checkpointer(str(small_disk / "ck"), 2, EventLog(None))
    assert ck.committed_steps() == [2]


def test_final_save_retried_once_room_is_made(reference, small_disk):
    """The final write runs out of space; the operator frees some as soon as that failure is
    reported; the one retry from the state still in memory commits, and the run completes."""
    cfg = make_cfg(checkpoint_dir=str(small_disk / "ck"), checkpoint_period=4)

    def setup(trainer, runtime):
        emit = trainer.events.emit

        def grow_when_the_final_save_fails(event, **kw):
            emit(event, **kw)
            if event == "checkpoint_save_failed" and kw.get("step") == 8:
                _grow(small_disk)
        trainer.events.emit = grow_when_the_final_save_fails

    outcome, trainer, _ = run_elastic(cfg, setup=setup)
    assert outcome.status == "completed", outcome
    seq = [(r["event"], r["step"]) for r in trainer.events.records
           if r["event"].startswith("checkpoint_") and r["step"] == 8]
    assert seq == [("checkpoint_save_started", 8), ("checkpoint_save_failed", 8),
                   ("checkpoint_save_started", 8), ("checkpoint_committed", 8)]
    ck = Checkpointer(str(small_disk / "ck"), 4, EventLog(None))
    assert ck.committed_steps()[-1] == 8
    assert losses(trainer.events) == reference["losses"]


def test_a_full_disk_run_says_so_in_one_line(small_disk):
    """The CLI on a full disk: the log keeps elastix's lines, stderr one error and one hint
    (Orbax's tracebacks and TensorStore's "Event loop is closed" once ran to ~10,000 lines)."""
    args = ["--preset", "tiny", "--steps", "12", "--batch-per-device", "1", "--seq-len", "32",
            "--num-slices", "4", "--checkpoint-dir", str(small_disk / "ck"),
            "--checkpoint-period", "4"]
    proc = subprocess.run([sys.executable, "-m", "elastix_trainer", *args], env=cli_env(),
                          cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 1
    err = proc.stderr.splitlines()
    assert len(err) == 2 and err[0].startswith("error: the final checkpoint (step 12) did not "
                                               "commit: ")
    assert err[1].startswith("hint: make the storage writable again")
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "checkpoint save failed: step 8" in proc.stdout


def test_a_failed_final_save_whose_files_cannot_be_cleared_says_so(reference, small_disk,
                                                                     monkeypatch):
    """The final write runs out of space and its half-written directory cannot be removed
    before the retry (here a mount inside it: EBUSY; on a loaded machine, TensorStore writes of
    the failed save still landing, "Directory not empty"). The run fails saying the final
    checkpoint did not commit, not with a bare OSError classified as "not a slice loss"."""
    from elastix_trainer.state import store

    monkeypatch.setattr(store, "REMOVE_PATIENCE", 0.2)  # it can never succeed here
    cfg = make_cfg(checkpoint_dir=str(small_disk / "ck"), checkpoint_period=4)
    held = []

    def setup(trainer, runtime):
        emit = trainer.events.emit

        def pin_the_final_tmp_dir(event, **kw):
            emit(event, **kw)
            tmp = small_disk / "ck" / "8.orbax-checkpoint-tmp"
            if event == "checkpoint_save_failed" and kw.get("step") == 8 and not held:
                (tmp / "pinned").mkdir(parents=True, exist_ok=True)
                subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs",
                                str(tmp / "pinned")], check=True)
                held.append(tmp / "pinned")
        trainer.events.emit = pin_the_final_tmp_dir

    try:
        outcome, trainer, _ = run_elastic(cfg, setup=setup)
    finally:
        for d in held:
            subprocess.run(["umount", str(d)], check=False)
    assert held, "the final write should have run out of space"
    assert outcome.status == "failed", outcome
    assert outcome.reason.startswith("the final checkpoint (step 8) did not commit: "), outcome
    assert "Device or resource busy" in outcome.reason
    assert not [e for e in trainer.events.of("elastic_detected")]
