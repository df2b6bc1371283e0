"""TensorBoard scalars (``--tensorboard-dir``), read back from the event files themselves."""

from __future__ import annotations

import struct
from collections import defaultdict
from pathlib import Path

import pytest
from trainer_helpers import make_cfg, on, run_cli, run_elastic

from elastix.measure.events import events_from_records, recoveries
from elastix_trainer.elastic.health import ManualHealth
from elastix_trainer.obs.tboard import TensorBoardSink


def read_scalars(directory: Path) -> dict[str, dict[int, float]]:
    """tag -> {step: value} from every TFRecord event file in ``directory`` (the format
    TensorBoard reads: length, crc, an Event proto, crc)."""
    from tensorboardX.proto import event_pb2

    out: dict[str, dict[int, float]] = defaultdict(dict)
    files = sorted(directory.glob("events.out.tfevents.*"))
    assert files, f"no event file in {directory}"
    for path in files:
        data = path.read_bytes()
        i = 0
        while i + 12 <= len(data):
            (n,) = struct.unpack("<Q", data[i:i + 8])
            ev = event_pb2.Event.FromString(data[i + 12:i + 12 + n])
            i += 12 + n + 4
            for v in ev.summary.value:
                out[v.tag][ev.step] = v.simple_value
    return dict(out)


def run_with_a_slice_lost(tmp_path: Path, cfg, at_step: int, slice_id: int):
    """An elastic run writing TensorBoard scalars whose slice ``slice_id`` goes down before step
    ``at_step`` and comes back when waited for: both tests read a recovery's scalars."""
    health = ManualHealth(cfg.num_slices)
    health.on_wait = lambda h, required: h.set_up(*range(h.num_slices))
    board_dir = tmp_path / "tb"

    def setup(trainer, runtime):
        setup.board = TensorBoardSink(str(board_dir)).attach(trainer.events)

        def down_once(session, n, fired=[]):  # noqa: B006 - once per run
            if n == at_step and not fired:
                fired.append(n)
                health.set_down(slice_id)
        on(trainer, before_dispatch=down_once)

    outcome, trainer, _ = run_elastic(cfg, health, setup=setup)
    setup.board.close()
    assert outcome.status == "completed"
    return trainer, board_dir


def test_loss_perf_and_every_recovery_phase_at_their_steps(tmp_path):
    cfg = make_cfg(checkpoint_dir=str(tmp_path / "ck"))
    trainer, board_dir = run_with_a_slice_lost(tmp_path, cfg, at_step=6, slice_id=2)
    got = read_scalars(board_dir)
    steps = trainer.events.of("step")
    last = {r["step"]: r for r in steps}  # a re-run step keeps its last value, as TensorBoard
    assert set(got["learning/loss"]) == set(last)  # float32 in the file:
    assert all(abs(got["learning/loss"][s] - r["loss"]) <= 1e-5 * abs(r["loss"])
               for s, r in last.items())
    assert set(got["perf/step_time_seconds"]) == set(last)
    for tag in ("learning/grad_norm", "learning/current_learning_rate",
                "perf/per_device_tflops_per_sec", "perf/per_device_tokens_per_sec"):
        assert set(got[tag]) == set(last), tag
    assert all(got["learning/grad_norm"][s] == pytest.approx(r["grad_norm"], rel=1e-5)
               for s, r in last.items())
    assert set(got["elastic/live_slices"].values()) == {4.0}
    committed = {r["step"] for r in trainer.events.of("checkpoint_committed")}
    assert set(got["checkpoint/blocking_seconds"]) == committed
    (det,) = trainer.events.of("elastic_detected")
    at = det["last_step"]
    (restored,) = trainer.events.of("elastic_restored")
    for tag in ("cleanup_seconds", "waiting_for_slices_seconds", "restore_seconds",
                "first_step_seconds", "downtime_seconds", "total_downtime_seconds"):
        assert set(got[f"recovery/{tag}"]) == {at}, tag
    assert got["recovery/steps_lost"] == {at: float(det["last_step"] - restored["step"])}
    # ManualHealth does not date the loss (no since_loss): no made-up detection time.
    assert "recovery/detection_seconds" not in got
    # the launcher's numbers for the same events (issue 39: restore was the checkpoint's read
    # here, the phase there); the checkpoint's own read is named apart
    (rec,) = recoveries(events_from_records(trainer.events.records))
    ph = rec.phase_seconds()
    for name in ("cleanup", "waiting for slices", "restore", "first step"):
        tag = f"recovery/{name.replace(' ', '_')}_seconds"
        assert got[tag][at] == pytest.approx(ph[name], abs=1e-6), tag
    assert got["recovery/downtime_seconds"][at] == pytest.approx(rec.downtime, abs=1e-6)
    assert got["recovery/restore_load_seconds"][at] == pytest.approx(restored["seconds"],
                                                                     rel=1e-6)


def test_the_flag_writes_scalars_and_a_bad_dir_is_one_line(tmp_path):
    board = tmp_path / "tb"
    p = run_cli(["--preset", "tiny", "--steps", "3", "--batch-per-device", "1", "--seq-len", "16",
                 "--num-slices", "2", "--tensorboard-dir", str(board)])
    assert p.returncode == 0, p.stderr
    assert set(read_scalars(board)["learning/loss"]) == {1, 2, 3}
    afile = tmp_path / "file"
    afile.write_text("x")
    p = run_cli(["--preset", "tiny", "--steps", "1", "--num-slices", "2",
                 "--tensorboard-dir", str(afile / "tb")])
    assert p.returncode == 2 and "--tensorboard-dir" in p.stderr
    assert "Traceback" not in p.stderr


def _accumulated(directory: Path):
    """The scalars as TensorBoard itself shows them: its own reader, purges applied."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(directory), size_guidance={"scalars": 0})
    acc.Reload()
    return acc


def test_tensorboard_shows_each_step_once_after_a_rollback_with_maxtext_tags(tmp_path):
    """A recovery rolls back and trains steps again: TensorBoard's reader must show each step
    once, with the value of the run that went on (not the re-done step's first try), and the
    recovery's scalars must survive the purge that drops the abandoned steps."""
    cfg = make_cfg(checkpoint_dir=str(tmp_path / "ck"), num_slices=2, steps=14, snapshot_period=0)
    trainer, board_dir = run_with_a_slice_lost(tmp_path, cfg, at_step=11, slice_id=1)
    steps = trainer.events.of("step")
    (restored,) = trainer.events.of("elastic_restored")
    (det,) = trainer.events.of("elastic_detected")
    assert det["last_step"] > restored["step"], "the fault must make steps be trained again"
    assert len(steps) > len({r["step"] for r in steps})  # the raw log has re-done steps
    acc = _accumulated(board_dir)
    loss = acc.Scalars("learning/loss")
    shown = [e.step for e in loss]
    assert sorted(shown) == sorted({r["step"] for r in steps})  # each step once
    last = {r["step"]: r["loss"] for r in steps}
    assert all(e.value == pytest.approx(last[e.step], rel=1e-5) for e in loss)
    tags = set(acc.Tags()["scalars"])
    assert {"perf/step_time_seconds", "perf/per_device_tflops_per_sec",
            "perf/per_device_tokens_per_sec", "learning/grad_norm",
            "learning/current_learning_rate"} <= tags
    (down,) = acc.Scalars("recovery/downtime_seconds")
    assert down.step == det["last_step"] and down.value > 0
    (total,) = acc.Scalars("recovery/total_downtime_seconds")
    assert total.value == pytest.approx(down.value)
