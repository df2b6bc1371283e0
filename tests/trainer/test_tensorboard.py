"""TensorBoard scalars (``--tensorboard-dir``), read back from the event files themselves."""

from __future__ import annotations

import struct
from collections import defaultdict
from pathlib import Path

from trainer_helpers import make_cfg, run_cli, run_elastic

from elastix_trainer.health import ManualHealth
from elastix_trainer.tboard import TensorBoardSink


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


def test_loss_perf_and_every_recovery_phase_at_their_steps(tmp_path):
    health = ManualHealth(4)
    health.on_wait = lambda h, required: h.set_up(*range(h.num_slices))
    cfg = make_cfg(checkpoint_dir=str(tmp_path / "ck"))
    board_dir = tmp_path / "tb"

    def setup(trainer, runtime):
        setup.board = TensorBoardSink(str(board_dir)).attach(trainer.events)

        def down_at_6(tr, n, fired=[]):  # noqa: B006 - once per test
            if n == 6 and not fired:
                fired.append(n)
                health.set_down(2)
        trainer.before_step.append(down_at_6)

    outcome, trainer, _ = run_elastic(cfg, health, setup=setup)
    setup.board.close()
    assert outcome.status == "completed"
    got = read_scalars(board_dir)
    steps = trainer.events.of("step")
    last = {r["step"]: r for r in steps}  # a re-run step keeps its last value, as TensorBoard
    assert set(got["learning/loss"]) == set(last)  # float32 in the file:
    assert all(abs(got["learning/loss"][s] - r["loss"]) <= 1e-5 * abs(r["loss"])
               for s, r in last.items())
    assert set(got["perf/step_seconds"]) == set(last)
    assert set(got["elastic/live_slices"].values()) == {4.0}
    committed = {r["step"] for r in trainer.events.of("checkpoint_committed")}
    assert set(got["checkpoint/blocking_seconds"]) == committed
    (det,) = trainer.events.of("elastic_detected")
    at = det["last_step"]
    (restored,) = trainer.events.of("elastic_restored")
    for tag in ("cleanup_seconds", "waiting_for_slices_seconds", "restore_seconds",
                "first_step_seconds"):
        assert set(got[f"recovery/{tag}"]) == {at}, tag
    assert got["recovery/steps_lost"] == {at: float(det["last_step"] - restored["step"])}
    # ManualHealth does not date the loss (no since_loss): no made-up detection time.
    assert "recovery/detection_seconds" not in got


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
