"""A copy of a local workload (``chaos run --verify``'s reference): the same rendered manifest
under a name that fits, and refused when it would share the workload's checkpoints (pure, no
processes)."""

from __future__ import annotations

import dataclasses

import pytest

from elastix.backends.local.backend import LocalBackend
from elastix.backends.local.clone import copy_of, shared_storage
from elastix.backends.local.plan import Plan, data_dir, make_plan
from elastix.errors import UsageError
from elastix.workload.manifest import pod_spec, renamed, replicated_job
from elastix.workload.names import companion_name, problems
from elastix.workload.render import render
from elastix.workload.spec import build_spec

DEFAULT = LocalBackend.defaults()["command"]


def _manifest(name: str, command: str = DEFAULT, **extra) -> dict:
    return render(build_spec(None, {"name": name, "tpu_type": "v5litepod-4", "num_slices": 2,
                                    "elastic_slices": 2, "docker_image": "img:1",
                                    "command": command, **extra}))


def _plan(tmp_path, manifest: dict) -> Plan:
    name = manifest["metadata"]["name"]
    return make_plan(manifest, tmp_path / name, {"ELASTIX_LOCAL_DEVICES_PER_SLICE": "1"},
                     "/where/it/was/made")


def _head_env(manifest: dict) -> dict:
    (main,) = pod_spec(replicated_job(manifest, "pathways-head"))["containers"]
    return {e["name"]: e.get("value") for e in main["env"]}


def test_the_copy_is_the_same_manifest_under_its_own_name(tmp_path):
    m = _manifest("soak", command=f"{DEFAULT} --run-name soak")
    new, copy, plan = copy_of("soak", tmp_path / "soak", m, _plan(tmp_path, m), {}, "reference")
    assert new == "soak-reference" and copy["metadata"]["name"] == new
    assert copy["metadata"]["labels"]["elastix.dev/workload"] == new
    assert _head_env(copy)["ELASTIX_WORKLOAD"] == new
    head = pod_spec(replicated_job(copy, "pathways-head"))
    assert head["serviceAccountName"] == "soak-reference-head"
    assert head["containers"][0]["command"][-1].endswith("--run-name soak")  # as written
    assert "soak" not in str(copy).replace("soak-reference", "").replace("--run-name soak", "")
    # The job is the original's: where it was made, its devices (not this environment's).
    assert plan.cwd == "/where/it/was/made" and plan.devices_per_slice == 1
    assert plan.name == new and plan.events_file == str(tmp_path / new / "events.jsonl")
    assert plan.head_command == _plan(tmp_path, m).head_command


def test_a_long_name_gets_a_shorter_copy_name_that_fits():
    def within(n):
        return lambda name: len(name) <= n

    assert companion_name("a" * 12, "reference", within(22)) == "a" * 12 + "-reference"
    assert companion_name("a" * 18, "reference", within(22)) == "a" * 18 + "-ref"
    one = companion_name("training-run-a-22chars", "reference", within(22))
    two = companion_name("training-run-b-22chars", "reference", within(22))
    assert max(len(one), len(two)) <= 22 and one != two and one.endswith("-ref")
    assert companion_name("x", "reference", lambda name: False) is None
    # The real rule: every name JobSet derives from the copy's manifest keeps its rules.
    m = _manifest("b" * 22)
    name = companion_name("b" * 22, "reference", lambda n: not problems(renamed(m, n)))
    assert name is not None and name.startswith("b") and name == _manifest(name)["metadata"][
        "name"]  # render() itself takes it


@pytest.mark.parametrize(("command", "shared"), [
    (DEFAULT, None),
    ("elastix-train --checkpoint-dir $ELASTIX_WORKLOAD_DIR/ckpt", None),
    ("elastix-train --checkpoint-dir=${ELASTIX_LOCAL_DATA_DIR}/c --steps 9", None),
    ("elastix-train --checkpoint-dir /tmp/ck --steps 9", "/tmp/ck"),
    ("elastix-train --checkpoint-dir ckpt", "ckpt"),
    ("elastix-train --checkpoint-dir \"$HOME/ck\"", "$HOME/ck"),
    ("elastix-train --steps 9", None),  # no checkpoints at all
    ("python -m maxtext.train base_output_directory=gs://b/o run_name=x", "gs://b/o"),
])
def test_a_command_that_keeps_checkpoints_elsewhere_would_share_them(tmp_path, command,
                                                                        shared):
    plan = _plan(tmp_path, _manifest("w"))  # a MaxText command would need MaxText to plan
    assert shared_storage(dataclasses.replace(plan, head_command=["bash", "-c", command])) \
        == shared


def test_checkpoints_named_through_the_env_are_followed(tmp_path):
    m = _manifest("w", command="elastix-train --checkpoint-dir $CK", env={"CK": "/data/ck"})
    assert shared_storage(_plan(tmp_path, m)) == "/data/ck"
    with pytest.raises(UsageError, match=r"w keeps its checkpoints in /data/ck: a copy would "):
        copy_of("w", tmp_path / "w", m, _plan(tmp_path, m), {}, "reference")


def test_a_taken_name_or_kept_data_is_refused(tmp_path):
    m = _manifest("w")
    (tmp_path / "w-reference").mkdir()
    with pytest.raises(UsageError, match="workload w-reference exists") as err:
        copy_of("w", tmp_path / "w", m, _plan(tmp_path, m), {}, "reference")
    assert "--reference w-reference" in err.value.hint
    (tmp_path / "w-reference").rmdir()
    data_dir(tmp_path / "w-reference").mkdir(parents=True)
    with pytest.raises(UsageError, match="has kept data"):
        copy_of("w", tmp_path / "w", m, _plan(tmp_path, m), {}, "reference")
