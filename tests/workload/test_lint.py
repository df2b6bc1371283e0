"""The elastic lint on real rendered manifests: one manifest per rule, the boundaries of the
budget rule, several mismatches reported in one run, and defaults that find nothing."""

from __future__ import annotations

import copy

import pytest

from elastix.workload import labels
from elastix.workload.lint import REPLACEMENT_WAIT_SECONDS, lint
from elastix.workload.manifest import pod_spec, replicated_job
from elastix.workload.render import render
from elastix.workload.resolve import resolve_spec

MT = "python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml run_name=r " \
     "base_output_directory=gs://b/o "
MT_OK = MT + "enable_single_controller=true elastic_enabled=true "


def manifest(command: str | None = "elastix-train --preset tiny", **flags) -> dict:
    """The manifest ``workload create`` would submit (3 x v5litepod-16, elastic 3, restarts
    10 unless given)."""
    given = {"name": "lint", "tpu_type": "v5litepod-16", "num_slices": 3, "elastic_slices": 3,
             "docker_image": "img:1", "command": command, **flags}
    if given.get("headless"):
        given.pop("command"), given.pop("docker_image")
    return render(resolve_spec(given))


def rules(found: list) -> list[str]:
    return [rule for rule, _, _ in found]


@pytest.mark.parametrize("command,flags", [
    ("elastix-train --preset tiny", {}),  # the launcher's budget, in the env: 30
    ("python3 train.py", {}),  # a trainer elastix cannot read: nothing guessed
    (MT_OK + "elastic_timeout_seconds=300 elastic_max_retries=31", {}),  # README's MaxText
    ("elastix-train --max-slice-losses 30 --slice-wait-timeout 300", {}),
    ("elastix-train --max-slice-losses 1", {"max_slice_restarts": 0}),  # no replacements asked
    ("elastix-train --config /etc/train.yaml", {}),  # its budget is in a file: unknown
    ("elastix-train --max-slice-losses inf --slice-wait-timeout nan", {}),  # it refuses those
    (MT.replace("src/maxtext/configs/base.yml", "my.yml"), {}),  # defaults: base.yml only
    (None, {"headless": True}),
])
def test_consistent_or_unknown_layers_find_nothing(command, flags):
    found = lint(manifest(command, **flags))
    assert (found.errors, found.warnings) == ([], [])


def test_the_chaos_hunts_trainer_gives_up_before_the_jobset():
    # The local hunt: --kills 20 ended the trainer at kill 11, its 10 losses against 10 x 2.
    found = lint(manifest("elastix-train --max-slice-losses 10", num_slices=2, elastic_slices=2))
    # A warning: the platform runs it; the run only ends sooner (issue 47).
    assert found.errors == []
    (rule, msg, hint), = found.warnings
    assert rule == "budget"
    assert "--max-slice-losses 10 recovers from 10 slice losses, but the JobSet replaces 20 " \
           "in-process (10 restarts x 2 slices); it gives up at loss 11; then the run fails " \
           "(--max-restarts 0)" in msg
    assert hint == "set --max-slice-losses 20, or lower --max-slice-restarts to 5"


def test_the_launchers_env_budget_is_read_and_a_flag_wins_over_it():
    low_env = manifest("elastix-train", env={"ELASTIX_MAX_SLICE_LOSSES": "5"}, max_restarts=2)
    assert rules(lint(low_env).warnings) == ["budget"]
    assert "then the whole JobSet restarts (--max-restarts 2)" in lint(low_env).warnings[0][1]
    flag_wins = manifest("elastix-train --max-slice-losses=30",
                         env={"ELASTIX_MAX_SLICE_LOSSES": "5"})
    assert lint(flag_wins).warnings == []


@pytest.mark.parametrize("retries,resize,ok", [
    (30, "", False),  # 30 attempts are 29 recoveries: pathwaysutils counts the first
    (31, "", True),
    (31, "elastic_min_slice_count=2 ", False),  # a loss and its scale-up: an attempt each
    (61, "elastic_min_slice_count=2 ", True),
])
def test_maxtext_retries_count_attempts(retries, resize, ok):
    found = lint(manifest(MT_OK + resize + f"elastic_max_retries={retries}"))
    assert found.errors == []
    assert rules(found.warnings) == ([] if ok else ["budget"])
    if not ok:
        assert f"set elastic_max_retries={61 if resize else 31}" in found.warnings[0][2]


def test_maxtext_reads_its_keys_from_the_environment_too():
    # MaxText's M_<KEY> (pyconfig.py): the default of 10 below 31, and then the env's 31.
    assert rules(lint(manifest(MT_OK)).warnings) == ["budget"]
    assert lint(manifest(MT_OK, env={"M_ELASTIC_MAX_RETRIES": "31"})).warnings == []


@pytest.mark.parametrize("command", [
    "elastix-train --slice-wait-timeout 30",
    MT_OK + "elastic_max_retries=31 elastic_timeout_seconds=20",
])
def test_a_wait_shorter_than_a_replacement_is_a_warning(command):
    # The platform runs it; a slice loss then ends the run (the wait is not retried).
    found = lint(manifest(command))
    assert found.errors == []
    (rule, msg, hint), = found.warnings
    assert rule == "wait-timeout" and f"about {REPLACEMENT_WAIT_SECONDS:g} s" in msg
    assert "300" in hint


def test_a_wait_close_to_a_replacement_is_a_warning_and_resize_waits_for_no_one():
    found = lint(manifest("elastix-train --slice-wait-timeout 60"))
    assert found.errors == [] and rules(found.warnings) == ["wait-timeout"]
    resize = lint(manifest("elastix-train --slice-wait-timeout 10 --elastic-mode replica-resize"))
    assert resize.errors == []


def test_maxtext_elastic_without_a_single_controller_is_an_error():
    found = lint(manifest(MT + "elastic_enabled=true elastic_max_retries=31"))
    (rule, msg, hint), = found.errors
    assert rule == "single-controller" and hint == "add enable_single_controller=true"


def test_profiling_an_elastic_run_is_a_warning():
    # MaxText starts and trains with it; its guide says a loss mid-profile is unsupported.
    found = lint(manifest(MT_OK + "elastic_max_retries=31 profiler=xplane"))
    assert found.errors == []
    (rule, msg, _), = found.warnings
    assert rule == "profiler" and "profiler=xplane" in msg
    # Not elastic: profile away.
    assert lint(manifest(MT + "profiler=xplane", elastic_slices=0)).warnings == []


def test_more_elastic_slices_than_slices_is_a_warning():
    # The spec refuses it; a template or a manifest written by hand can still say it.
    m = manifest("python3 train.py")
    proxy = next(c for c in pod_spec(replicated_job(m, labels.HEAD_JOB))["initContainers"]
                 if c["name"] == labels.PROXY_CONTAINER)
    proxy["args"] = [a for a in proxy["args"] if not a.startswith("--num_elastic_slices")] + \
        ["--num_elastic_slices=5"]
    found = lint(m)
    assert found.errors == []
    (rule, msg, hint), = found.warnings
    assert rule == "elastic-slices" and "--num_elastic_slices=5" in msg and "3 slices" in msg
    assert hint == "use --elastic-slices 3 (or fewer)"


def test_every_mismatch_is_reported_in_one_run():
    m = manifest(MT + "elastic_enabled=true elastic_max_retries=10 elastic_timeout_seconds=10 "
                 "profiler=nsys colocated_python_checkpointing=true")
    m = copy.deepcopy(m)
    found = lint(m)
    # Only what the platform refuses is an error: MaxText will not start elastic without a
    # single controller. The rest would run and are warnings, every one with its fix.
    assert rules(found.errors) == ["single-controller"]
    assert rules(found.warnings) == ["budget", "wait-timeout", "profiler", "colocated-python"]
    assert all(hint for _, _, hint in found.errors + found.warnings)


@pytest.mark.parametrize("command,flags,rule,said", [
    (MT_OK + "elastic_max_retries=61 elastic_min_slice_count=1", {"elastic_slices": 1},
     "min-slices", "gives up past 1"),
    (MT_OK + "elastic_max_retries=61 elastic_min_slice_count=4", {}, "min-slices",
     "more than the workload's 3 slices"),
    ("elastix-train --elastic-mode replica-resize --min-slices 1", {"elastic_slices": 1},
     "min-slices", "2 slices missing"),
    (MT_OK + "elastic_max_retries=31 colocated_python_data_input=true", {}, "colocated-python",
     "no colocated-python sidecar"),
    ("elastix-train", {"colocated_python_image": "img:colo"}, "colocated-python",
     "elastix-train has no colocated-Python path"),
    (MT_OK + "elastic_max_retries=31", {"colocated_python_image": "img:colo"},
     "colocated-python", "no MaxText colocated_python_checkpointing"),
    (MT_OK, {"elastic_slices": 0}, "elastic-slices", "not elastic"),
    ("elastix-train --elastic-mode replica-resize", {"elastic_slices": 0}, "elastic-slices",
     "not elastic"),
    (MT + "enable_single_controller=true", {}, "elastic-enabled", "elastic_enabled is off"),
])
def test_warnings(command, flags, rule, said):
    found = lint(manifest(command, **flags))
    assert found.errors == []
    assert rules(found.warnings) == [rule] and said in found.warnings[0][1]


def test_findings_as_json():
    found = lint(manifest(MT + "elastic_enabled=true elastic_max_retries=31"))
    assert [e["rule"] for e in found.to_json()["errors"]] == ["single-controller"]
    found = lint(manifest("elastix-train --max-slice-losses 1"))
    assert found.to_json()["errors"] == []
    assert found.to_json()["warnings"][0]["rule"] == "budget"


PERSIST = {"pathways_persistence": True}


@pytest.mark.parametrize("command,flags,warned", [
    # MaxText's defaults (OCDBT and zarr3 on) under persistence: its GCS checkpointing guide
    # says to set both to 0 for Pathways; Orbax's Pathways handler refuses OCDBT.
    (MT_OK + "elastic_max_retries=31", PERSIST, True),
    (MT_OK + "elastic_max_retries=31", {"env": {"ENABLE_PATHWAYS_PERSISTENCE": "1"}}, True),
    (MT_OK + "elastic_max_retries=31 checkpoint_storage_use_ocdbt=false", PERSIST, True),
    (MT_OK + "elastic_max_retries=31 checkpoint_storage_use_ocdbt=false "
     "checkpoint_storage_use_zarr3=false", PERSIST, False),
    (MT_OK + "elastic_max_retries=31", {}, False),  # no persistence: Orbax's own format
    ("elastix-train", PERSIST, False),  # it turns OCDBT off itself on Pathways
])
def test_maxtext_persistence_needs_its_pathways_checkpoint_format(command, flags, warned):
    found = lint(manifest(command, **flags))
    assert found.errors == []
    assert rules(found.warnings) == (["pathways-persistence"] if warned else [])
    if warned:
        assert found.warnings[0][2] == ("add checkpoint_storage_use_ocdbt=false "
                                        "checkpoint_storage_use_zarr3=false")


@pytest.mark.parametrize(("restart", "said"), [
    ("OnFailure", "restartPolicy OnFailure"),
    (None, "restartPolicy unset (JobSet's webhook makes it OnFailure)"),
    ("Never", None),
])
def test_a_pod_failure_policy_needs_pods_that_restart_never(restart, said):
    """The API server refuses a Job with a podFailurePolicy unless its pods restart Never, and
    JobSet's webhook fills in OnFailure where a template says nothing (a user's template)."""
    m = copy.deepcopy(manifest())
    worker = replicated_job(m, labels.WORKER_JOB)
    worker["template"]["spec"]["podFailurePolicy"] = {"rules": []}
    pod_spec(worker).pop("restartPolicy", None)
    if restart:
        pod_spec(worker)["restartPolicy"] = restart
    found = lint(m)
    errors = [msg for rule, msg, _ in found.errors if rule == "pod-failure-policy"]
    if said is None:
        assert errors == []
    else:
        assert len(errors) == 1 and said in errors[0] and "'worker'" in errors[0], errors
