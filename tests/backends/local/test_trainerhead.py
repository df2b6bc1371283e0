"""What ``create`` reads of an ``elastix-train`` head before it starts (issue 49): which commands
are the trainer's, and a kept checkpoint already at the job's last step."""

from __future__ import annotations

from elastix.backends.local import trainerhead
from elastix.backends.local.backend import LocalBackend
from elastix.measure.events import events_from_records
from elastix.measure.progress import progress
from elastix.views.status import training_line

DEFAULT = LocalBackend.defaults()["command"]


def test_only_an_elastix_train_command_is_the_trainers():
    assert trainerhead.trainer_words(["bash", "-c", DEFAULT])[0] == "elastix-train"
    assert trainerhead.trainer_words(["bash", "-c", "A=1 elastix-train --steps 3"]) == \
        ["elastix-train", "--steps", "3"]
    for own in ("python train.py", "cd x && elastix-train", "echo elastix-train"):
        assert trainerhead.trainer_words(["bash", "-c", own]) is None


def test_a_kept_checkpoint_at_or_past_the_last_step_is_found(tmp_path):
    workload, data = tmp_path / "state" / "demo", tmp_path / "state" / ".data" / "demo"
    cmd = ["bash", "-c", DEFAULT]  # --steps 3000, checkpoints in $ELASTIX_LOCAL_DATA_DIR
    assert trainerhead.finished_checkpoint(cmd, workload, data, str(tmp_path)) is None
    (data / "checkpoints" / "2980").mkdir(parents=True)
    (data / "checkpoints" / "3000.orbax-checkpoint-tmp-1").mkdir()  # never committed
    assert trainerhead.finished_checkpoint(cmd, workload, data, str(tmp_path)) is None
    (data / "checkpoints" / "3000").mkdir()
    assert trainerhead.finished_checkpoint(cmd, workload, data, str(tmp_path)) == (3000, 3000)
    more = ["bash", "-c", DEFAULT.replace("--steps 3000", "--steps=4000")]
    assert trainerhead.finished_checkpoint(more, workload, data, str(tmp_path)) is None
    own = ["bash", "-c", "python train.py --steps 10 --checkpoint-dir "
                         "$ELASTIX_LOCAL_DATA_DIR/checkpoints"]
    assert trainerhead.finished_checkpoint(own, workload, data, str(tmp_path)) is None


# A real run's events (the quickstart's job at --steps 10, re-created over its kept data).
RESUMED = [
    {"ts": "2026-12-04T21:04:41.449059Z", "event": "run_start", "pid": 1, "num_slices": 1,
     "devices": 2, "config": {"steps": 10}},
    {"ts": "2026-12-04T21:04:41.598488Z", "event": "restore", "pid": 1, "source": "checkpoint",
     "step": 10, "bytes": 1304364, "seconds": 0.109063, "path": "/d/checkpoints/10",
     "verified": True},
    {"ts": "2026-12-04T21:04:41.599536Z", "event": "run_end", "pid": 1, "status": "completed",
     "reason": "all steps done", "step": 10},
]


def test_status_names_the_kept_checkpoint_a_run_completed_on():
    p = progress(events_from_records(RESUMED))
    assert p.resumed_complete == 10 and p.to_json()["resumed_complete"] == 10
    line = training_line(p)
    assert "resumed the kept checkpoint of step 10" in line and "--fresh" in line, line
    # a run that trained is not one
    stepped = [*RESUMED[:2], {"ts": "2026-12-04T21:04:42Z", "event": "step", "pid": 1,
                              "step": 11, "seconds": 0.1, "loss": 5.0, "live_slices": 1,
                              "tflops_per_device": 0.0, "global_batch": 4}, RESUMED[2]]
    assert progress(events_from_records(stepped)).resumed_complete is None
