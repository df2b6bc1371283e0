"""``workload lint FILE`` on what the other launchers render: xpk 1.16.0's JobSet and Cluster
Toolkit's ``gcluster job submit --pathways`` (``tests/fixtures/PROVENANCE.md``). Both run the
trainer inside a ``bash -c`` SIGTERM wrapper, gcluster's in ``workload-container``; the lint reads
the trainer's settings from inside it, and takes the manifest as the API server takes it
(gcluster's empty ``volumes:`` and its unnamed failure policy rule)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from elastix.workload.trainer_command import trainer_command

FIXTURES = Path(__file__).parents[1] / "fixtures"
GCLUSTER = yaml.safe_load((FIXTURES / "gcluster" / "pathways-elastic.yaml").read_text())
XPK = yaml.safe_load((FIXTURES / "xpk-1.16.0-pathways-elastic.yaml").read_text())
GUIDE_TRAINER = (
    "python3 -m maxtext.trainers.pre_train.train     src/maxtext/configs/base.yml     "
    "base_output_directory=gs://test-bucket/maxtext-runs     run_name=elastic-qwen3     "
    "model_name=qwen3-0.6b     dataset_type=synthetic     per_device_batch_size=1     "
    "max_target_length=2048     attention=flash     remat_policy=full     steps=5000     "
    "enable_checkpointing=true     checkpoint_period=100     enable_single_controller=True     "
    "elastic_enabled=true     elastic_timeout_seconds=300     elastic_max_retries=10")


def _head_main(manifest: dict) -> dict:
    return manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"][0]


def _write(tmp_path: Path, manifest: dict) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return path


def test_the_trainer_is_read_from_inside_each_wrapper():
    assert trainer_command(GCLUSTER).command == GUIDE_TRAINER
    assert trainer_command(XPK).command == "python3 train.py"


def test_lint_reads_gcluster_s_manifest_and_the_guide_s_budget(cli, tmp_path):
    r = cli("workload", "lint", str(FIXTURES / "gcluster" / "pathways-elastic.yaml"),
            "-o", "json")
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout)
    assert found["errors"] == []
    (w,) = found["warnings"]
    assert w["rule"] == "budget" and w["message"].startswith(
        "MaxText elastic_max_retries=10 recovers from 9 slice losses, but the JobSet replaces "
        "30 in-process (10 restarts x 3 slices)")


def test_lint_reads_xpk_s_manifest(cli):
    r = cli("workload", "lint", str(FIXTURES / "xpk-1.16.0-pathways-elastic.yaml"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "elastic lint: no errors, 0 warnings"


@pytest.mark.parametrize("maker", ["gcluster", "xpk"])
def test_an_error_inside_the_wrapper_is_refused(cli, tmp_path, maker):
    """MaxText elastic without a single controller, inside each launcher's wrapper: refused."""
    m = copy.deepcopy(GCLUSTER if maker == "gcluster" else XPK)
    main = _head_main(m)
    inner = GUIDE_TRAINER.replace("enable_single_controller=True", "")
    old = GUIDE_TRAINER if maker == "gcluster" else "python3 train.py"
    main["command"][-1] = main["command"][-1].replace(old, inner)
    assert inner in main["command"][-1]
    r = cli("workload", "lint", str(_write(tmp_path, m)))
    assert r.returncode == 2
    assert "error: single-controller: MaxText elastic_enabled=true needs " \
           "enable_single_controller=true" in " ".join(r.stderr.split()), r.stderr


def test_a_null_the_api_server_would_refuse_is_still_refused(cli, tmp_path):
    """Only nulls are dropped and rule names defaulted, as the API server does: a wrong type
    is still one line, exit 2."""
    m = copy.deepcopy(GCLUSTER)
    m["spec"]["replicatedJobs"][1]["replicas"] = "three"
    r = cli("workload", "lint", str(_write(tmp_path, m)))
    assert r.returncode == 2 and "spec.replicatedJobs[1].replicas" in r.stderr, r.stderr


def test_a_pod_failure_policy_on_gcluster_s_onfailure_workers_is_refused(cli, tmp_path):
    """gcluster's Pathways template puts its podFailurePolicy on the worker Job, whose pods
    restart OnFailure (cluster-toolkit ``pathways_jobset.tmpl`` @ 7993057): the API server
    refuses every such Job ("only \"Never\" is supported when podFailurePolicy is specified",
    kubernetes ``pkg/apis/batch/validation/validation.go``). On the head, whose pods restart
    Never, the same policy is taken."""
    policy = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}
    m = copy.deepcopy(GCLUSTER)
    head, worker = m["spec"]["replicatedJobs"]
    head["template"]["spec"]["podFailurePolicy"] = policy
    assert cli("workload", "lint", str(_write(tmp_path, m))).returncode == 0
    worker["template"]["spec"]["podFailurePolicy"] = policy
    r = cli("workload", "lint", str(_write(tmp_path, m)))
    assert r.returncode == 2
    said = " ".join(r.stderr.split())
    assert "error: pod-failure-policy: replicated job 'worker' has a podFailurePolicy and " \
           "restartPolicy OnFailure: the API server refuses every Job made from it" in said, said
    assert "'pathways-head'" not in said
