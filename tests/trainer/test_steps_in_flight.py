"""``--steps-in-flight``: the loop keeps several steps dispatched and not yet read (on an
accelerator about a second of them by default; one on CPU). On 8 CPU devices (4 slices x 2),
with more in flight asked for: the steps run with the same losses and save the same states,
a slice loss still fails the run's oldest step and recovers exactly, a stop completes what is
in flight and commits the step it stopped at; and the automatic depth follows the step time."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from test_elastic import _coming_back, assert_matches, down_once_at
from trainer_helpers import losses, make_cfg, on, run_elastic, tap

from elastix.backends.base import EVENTS_FILE, TrainerEvents
from elastix.measure.events import events_of, recoveries
from elastix_trainer.config import ConfigError
from elastix_trainer.mesh import build_mesh
from elastix_trainer.state.hostcopy import read_windowed
from elastix_trainer.step import abstract_state
from elastix_trainer.train import AHEAD_SECONDS, MAX_IN_FLIGHT, InFlight


def test_four_in_flight_save_the_same_states(reference, tmp_path):
    cfg = make_cfg(checkpoint_dir=str(tmp_path / "ck"), snapshot_period=2,
                   snapshot_copy="staged", steps_in_flight=4)
    outcome, trainer, _ = run_elastic(cfg)
    assert outcome.status == "completed", outcome
    assert_matches(losses(trainer.events), reference["losses"])
    assert [e["step"] for e in trainer.events.of("checkpoint_committed")] == [4, 8]
    assert [e["step"] for e in trainer.events.of("snapshot_taken")] == [2, 4, 6, 8]
    ref = reference["events"]
    abstract = abstract_state(trainer.model, trainer.opt, build_mesh(trainer.slices, range(4)), 0)
    from elastix_trainer.state.checkpoint import Checkpointer

    want = Checkpointer(reference["ckpt"], 0, ref)
    for step in (4, 8):
        a, _, _ = want.restore(step, abstract)
        b, _, _ = trainer.ckpt.restore(step, abstract)
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize(("copy", "period", "down_at", "down", "restored"), [
    ("staged", 2, 8, 3, 6),
    ("staged", 3, 4, 1, 3),
    ("sync", 2, 7, 0, 6),
])
def test_a_slice_loss_with_steps_in_flight_recovers_exactly(reference, tmp_path, copy, period,
                                                            down_at, down, restored):
    health, cfg = _coming_back(tmp_path, snapshot_period=period, snapshot_copy=copy,
                               steps_in_flight=4)
    outcome, trainer, _ = run_elastic(
        cfg, health,
        setup=lambda tr, rt: on(tr, before_dispatch=down_once_at(health, down_at, down)))
    assert outcome.status == "completed", outcome
    failed = trainer.events.of("elastic_detected")
    assert failed, trainer.events.records
    back = trainer.events.of("elastic_restored")[0]
    assert (back["source"], back["step"]) == ("snapshot", restored)
    assert_matches(losses(trainer.events), reference["losses"])
    # Every step accounted (issue 74): a copy newer than the last step logged says which
    # steps it skipped, steps lost are never negative, and each step is logged or skipped.
    logged_last = failed[0]["last_step"]
    skipped = [(e["first"], e["last"], e["count"]) for e in trainer.events.of("steps_skipped")]
    assert skipped == ([(logged_last + 1, restored, restored - logged_last)]
                       if restored > logged_last else [])
    events, _ = events_of(TrainerEvents(EVENTS_FILE, True, records=trainer.events.records))
    (r,) = recoveries(events)
    assert r.steps_lost == max(logged_last, restored) - restored >= 0
    logged = {e["step"] for e in trainer.events.of("step")}
    assert logged | set(range(logged_last + 1, restored + 1)) == set(range(1, 9))


def test_a_stop_completes_the_steps_in_flight_and_commits_its_step(tmp_path):
    cfg = make_cfg(checkpoint_dir=str(tmp_path / "ck"), checkpoint_period=0, steps_in_flight=4)
    unread = []

    def setup(trainer, runtime):
        def stop(s, n):
            unread.append(n - 1 - trainer.last_completed)
            if n == 6:
                trainer.stop_requested = "SIGTERM"
        on(trainer, before_dispatch=stop)

    outcome, trainer, _ = run_elastic(cfg, setup=setup)
    assert outcome.exit_code == 143 and "checkpoint of step 6 committed" in outcome.reason, \
        outcome
    assert unread == [0, 1, 2, 3, 4, 4]  # one in flight would be [0, 1, 1, 1, 1, 1]
    assert trainer.last_completed == 6
    assert sorted(losses(trainer.events)) == [1, 2, 3, 4, 5, 6]
    assert trainer.ckpt.committed_steps() == [6]


def test_the_automatic_depth_is_about_a_second_of_steps_and_one_on_cpu():
    cpu = InFlight(0, "cpu")
    for t in range(10):
        cpu.completed(t * 0.1)
    assert cpu.depth == 1
    asked = InFlight(3, "tpu")
    for t in range(10):
        asked.completed(t * 0.001)
    assert asked.depth == 3
    chip = InFlight(0, "tpu")
    assert chip.depth == 1  # until steps have been timed
    for t in range(4):
        chip.completed(t * 0.095)
    assert chip.depth == int(np.ceil(AHEAD_SECONDS / 0.095))
    chip.completed(3 * 0.095 + 5.0)  # one stall does not move the median
    assert chip.depth == int(np.ceil(AHEAD_SECONDS / 0.095))
    fast = InFlight(0, "tpu")
    for t in range(5):
        fast.completed(t * 0.001)
    assert fast.depth == MAX_IN_FLIGHT
    slow = InFlight(0, "tpu")
    for t in range(5):
        slow.completed(t * 2.0)
    assert slow.depth == 1


@pytest.mark.parametrize("value", [-1, 65])
def test_steps_in_flight_out_of_range_is_refused(value):
    with pytest.raises(ConfigError, match="steps_in_flight"):
        make_cfg(steps_in_flight=value)


@pytest.mark.parametrize("window", [None, 1, 40, 1 << 30])
def test_a_windowed_read_returns_the_same_arrays(window):
    tree = {"a": jax.numpy.arange(12.0).reshape(3, 4), "b": [jax.numpy.ones((5,), "int32"),
                                                            jax.numpy.zeros((2, 2))]}
    got = read_windowed(tree, window)
    assert jax.tree.structure(got) == jax.tree.structure(tree)
    for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(tree), strict=True):
        assert isinstance(x, np.ndarray)
        np.testing.assert_array_equal(x, np.asarray(y))


def test_memory_in_use_says_what_the_devices_hold_or_nothing_on_cpu():
    """Logged before a restore on a chip; CPU devices report no memory, so nothing is said."""
    from elastix_trainer.train import memory_in_use

    assert memory_in_use(jax.devices()) is None

    class Chip:
        def __init__(self, used):
            self.used = used

        def memory_stats(self):
            return {"bytes_in_use": self.used, "bytes_limit": 16 * 2**30}

    assert memory_in_use([Chip(7 * 2**29)]) == "3.50 of 16.00 GiB in use on 1 device"
    assert memory_in_use([Chip(2**30), Chip(2**30)]) == "2.00 of 32.00 GiB in use on 2 devices"
    assert memory_in_use([]) is None


def test_a_copy_past_the_last_logged_step_says_the_steps_it_skipped(reference, tmp_path):
    """The fault hunt's case (issue 74): staged copies, 4 steps in flight, and a host lost only
    after the newest staged copy's read ended whole (the local stand-in learns of a kill about a
    second late). The steps in flight fail, the copy is kept and restored: the steps between
    the last one logged and it were computed, never logged. The trainer says so, steps lost are
    0, not negative, and the losses still match the uninterrupted run's."""
    health, cfg = _coming_back(tmp_path, snapshot_period=3, snapshot_copy="staged",
                               steps_in_flight=4)
    lost = []

    def after_the_copy(trainer, session, n, done_at):
        # as the stand-in says a step whose hosts did not all answer after its result
        staged = trainer._staged
        if not lost and staged is not None and staged.step > n:
            assert staged.done.wait(120)  # its read ended, its hosts answered
            lost.append((n - 1, staged.step))
            health.set_down(1)
            raise jax.errors.JaxRuntimeError(f"DATA_LOSS: slice(s) [1] of the mesh lost a "
                                             f"host before step {n} completed (test)")

    outcome, trainer, _ = run_elastic(cfg, health, setup=lambda tr, rt: tap(
        tr, first={"verify_complete": lambda *a: after_the_copy(tr, *a)}))
    assert outcome.status == "completed", outcome
    assert lost, "no copy was past the step being read: nothing was tested"
    logged, copied = lost[0]
    detected = trainer.events.of("elastic_detected")[0]
    back = trainer.events.of("elastic_restored")[0]
    assert (detected["last_step"], back["step"]) == (logged, copied)
    (skipped,) = trainer.events.of("steps_skipped")
    assert (skipped["first"], skipped["last"], skipped["count"]) == (
        logged + 1, copied, copied - logged)
    events, _ = events_of(TrainerEvents(EVENTS_FILE, True, records=trainer.events.records))
    (r,) = recoveries(events)
    assert r.steps_lost == 0 and r.steps_skipped == (logged + 1, copied, True)
    assert_matches(losses(trainer.events), reference["losses"],
                   steps=[s for s in range(1, 9) if not logged < s <= copied])
