"""What the state-size preflight reads from a rendered manifest (issue 37): the checkpoint
directory and the model each trainer's command line names, the head's memory limits, and
persistence. The listing and the refusal over HTTP: ``test_preflight_state.py``."""

from __future__ import annotations

import pytest

from elastix.backends.gke import statesize
from elastix.workload.render import render
from elastix.workload.spec import build_spec


def _restore(command: str, **flags) -> statesize.Restore:
    spec = build_spec(None, {"name": "w", "tpu_type": "v5litepod-16", "docker_image": "img:1",
                             "command": command, **flags})
    r = statesize.restore_path(render(spec))
    assert r is not None
    return r


@pytest.mark.parametrize("command, where", [
    ("elastix-train --checkpoint-dir gs://b/run1", "gs://b/run1"),
    ("elastix-train --checkpoint-dir=gs://b/run1 --steps 9", "gs://b/run1"),
    ("elastix-train --checkpoint-dir \"$CK\"", "gs://b/from-env"),
    ("python3 -m MaxText.train MaxText/configs/base.yml run_name=r base_output_directory=gs://b/o",
     "gs://b/o/r/checkpoints"),
    ("python3 -m maxtext.train cfg.yml base_output_directory=gs://b/o/ run_name=r "
     "checkpoint_dir=gs://b/elsewhere", "gs://b/elsewhere"),
    ("python3 train.py", None),
])
def test_the_checkpoint_directory_each_trainer_names(command, where):
    assert statesize.checkpoint_dir(_restore(command, env={"CK": "gs://b/from-env"})) == where


def test_limits_slices_and_persistence_come_from_the_manifest():
    r = _restore("elastix-train", num_slices=3, proxy_memory="100Gi", head_memory="64G")
    assert (r.slices, r.proxy_memory, r.head_memory, r.persistence) == (3, 100 * 2**30, 64e9,
                                                                        False)
    assert _restore("elastix-train", pathways_persistence=True).persistence
    assert _restore("elastix-train", env={"ENABLE_PATHWAYS_PERSISTENCE": "1"}).persistence


def test_a_first_run_is_sized_from_its_preset_or_model():
    size, how = statesize.first_run_bytes(_restore("elastix-train --preset qwen3-0.6b"))
    assert size == 7_152_599_040 and "--preset qwen3-0.6b" in how
    size, how = statesize.first_run_bytes(_restore("python -m MaxText.train b.yml "
                                                   "model_name=qwen3-4b"))
    assert size == 48_000_000_000 and "4.00 B parameters" in how
    assert statesize.first_run_bytes(_restore("python -m MaxText.train b.yml model_name=x")) is None
    assert statesize.first_run_bytes(_restore("python3 train.py")) is None


def test_persistence_or_a_small_state_passes_without_a_listing():
    calls = []
    v = statesize.check(render(build_spec(None, {
        "name": "w", "tpu_type": "v5litepod-16", "docker_image": "img:1", "num_slices": 3,
        "command": "python -m MaxText.train b.yml model_name=qwen3-4b", "pathways_persistence": True})),
        storage=lambda: calls.append(1))
    assert (v.problems, v.notices, calls) == ([], [], [])
    v = statesize.check(render(build_spec(None, {
        "name": "w", "tpu_type": "v5litepod-16", "docker_image": "img:1", "num_slices": 3,
        "command": "python -m MaxText.train b.yml model_name=qwen3-4b"})))
    assert v.problems and v.problems[0][0] == "state size"


def _check(command: str, **flags) -> statesize.Verdict:
    return statesize.check(render(build_spec(None, {
        "name": "w", "tpu_type": "v5litepod-16", "docker_image": "img:1", "command": command,
        **flags})))


def test_only_a_state_over_the_limit_is_refused_nearer_is_a_warning():
    # Qwen3-4B: 48 GB a replica. Two slices move 96 GB through the proxy: over its 90 Gi,
    # refused (the seed's OOM); under 100 Gi, 89.4 % of it: the run may fit, so a notice.
    mt = "python -m MaxText.train b.yml model_name=qwen3-4b"
    over = _check(mt, num_slices=2, proxy_memory="80Gi")
    assert [p[0] for p in over.problems] == ["state size"]
    near = _check(mt, num_slices=2, proxy_memory="100Gi")
    assert near.problems == []
    assert len(near.notices) == 1 and "near the limit" in near.notices[0]


def test_the_persistence_fix_names_maxtexts_pathways_checkpoint_format():
    # MaxText docs/guides/checkpointing_solutions/gcs_checkpointing.md: "Set to 0 for Pathways".
    (_, _, fix), = _check("python -m MaxText.train b.yml model_name=qwen3-4b",
                          num_slices=3).problems
    assert "--pathways-persistence" in fix
    assert "checkpoint_storage_use_ocdbt=false checkpoint_storage_use_zarr3=false" in fix
    (_, _, fix), = _check("elastix-train --preset qwen3-0.6b", num_slices=3,
                          proxy_memory="16Gi").problems
    assert "checkpoint_storage" not in fix
