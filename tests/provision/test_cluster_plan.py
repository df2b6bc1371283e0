"""`cluster create` makes a cluster the workload fits: pool names, sizes, scopes, TPU settings.

Checked against what ``workload create`` renders and against xpk's node-pool settings
(tests/fixtures/xpk_pathways_head.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastix.main import main
from elastix.provision import cluster
from elastix.workload import platform, render, spec

XPK = json.loads((Path(__file__).parents[1] / "fixtures" / "xpk_pathways_head.json").read_text())
ARGS = ["--project", "my-proj-1", "--zone", "us-central1-a"]


def _cfg(tpu_type="v5litepod-16", **kw):
    return cluster.validate("my-proj-1", "us-central1-a", "elastic", tpu_type=tpu_type, **kw)


def _bodies(cfg):
    steps = cluster.plan_create(cfg)
    return steps[0].body["cluster"], [s.body["nodePool"] for s in steps[1:]]


def _head_pod(manifest):
    (head,) = [r for r in manifest["spec"]["replicatedJobs"] if r["name"] == "pathways-head"]
    return head["template"]["spec"]["template"]["spec"]


def test_the_workload_head_selects_a_pool_cluster_create_makes():
    ws = spec.build_spec({}, {"name": "demo", "tpu_type": "v5litepod-16", "command": "true",
                              "docker_image": "img"})
    selector = _head_pod(render.render(ws))["nodeSelector"]
    created, _ = _bodies(_cfg())
    (head_pool,) = created["nodePools"]
    assert selector == {platform.NODEPOOL_LABEL: head_pool["name"]}
    assert head_pool["name"] == XPK["node_pools"]["cpu_pool_name"]


def test_default_head_machine_holds_the_rendered_head_pod():
    created, _ = _bodies(_cfg())
    machine = created["nodePools"][0]["config"]["machineType"]
    assert machine == platform.HEAD_MACHINE == XPK["cpu_machine_default"]["value"]
    room = platform.allocatable(platform.machine_capacity(machine))
    assert cluster.head_pod_requests() == platform.Resources(48.0, 232e9)
    assert cluster.head_pod_requests().fits_in(room)


def test_a_machine_too_small_for_the_head_is_refused_before_any_request(capsys, monkeypatch):
    monkeypatch.setenv("ELASTIX_GKE_API_ENDPOINT", "http://127.0.0.1:9")  # nothing listens
    assert main(["cluster", "create", "elastic", *ARGS, "--tpu-type", "v5litepod-16",
                 "--cpu-machine-type", "n2-standard-32", "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert "n2-standard-32 leaves" in err and "head pod requests 48 CPU / 216 GiB" in err
    assert "n2-standard-64" in err


def test_an_unknown_machine_needs_the_skip_flag(capsys):
    assert main(["cluster", "create", "elastic", *ARGS, "--tpu-type", "v5litepod-16",
                 "--cpu-machine-type", "c3-standard-88", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "cannot check that it holds the head pod" in err and "--skip-cpu-machine-check" in err
    assert main(["cluster", "create", "elastic", *ARGS, "--tpu-type", "v5litepod-16",
                 "--cpu-machine-type", "c3-standard-88", "--skip-cpu-machine-check",
                 "--skip-jobset", "--dry-run"]) == 0
    assert '"machineType": "c3-standard-88"' in capsys.readouterr().out


def test_every_pool_has_the_storage_scopes():
    created, tpu_pools = _bodies(_cfg(num_slices=2))
    pools = [*created["nodePools"], *tpu_pools]
    assert len(pools) == 3
    for pool in pools:
        scopes = set(pool["config"]["oauthScopes"])
        assert scopes & platform.STORAGE_SCOPES
        assert "https://www.googleapis.com/auth/cloud-platform" in scopes  # as xpk
    assert "https://www.googleapis.com/auth/cloud-platform" in XPK["node_pools"]["tpu_pool"][
        "scopes"]


@pytest.mark.parametrize(("tpu_type", "multi_host"), [("v5litepod-16", True), ("v6e-8", True),
                                                      ("v4-8", False), ("v6e-1", False)])
def test_tpu_pools_follow_xpk(tpu_type, multi_host):
    _, (pool,) = _bodies(_cfg(tpu_type))
    xpk = XPK["node_pools"]["tpu_pool"]
    assert pool["config"]["gvnic"] == {"enabled": xpk["gvnic"]}
    t = cluster.validate("p-roject1", "us-central1-a", "e", tpu_type=tpu_type).tpu
    assert pool["initialNodeCount"] == t.hosts and pool["config"]["machineType"] == t.machine_type
    if multi_host:
        rule = xpk["multi_host_only (vms_per_slice > 1)"]
        assert pool["placementPolicy"] == {"type": rule["placement_type"],
                                           "tpuTopology": t.topology}
        assert pool["maxPodsConstraint"] == {"maxPodsPerNode": str(rule["max_pods_per_node"])}
    else:
        assert "placementPolicy" not in pool and "maxPodsConstraint" not in pool
    # No Pathways source sends a maintenance policy: only on request (--maintenance-exclusion).
    assert "maintenancePolicy" not in pool


def test_head_pool_autoscales_as_xpk_unless_fixed():
    xpk = XPK["node_pools"]["cpu_pool"]["autoscaling"]
    created, _ = _bodies(_cfg())
    assert created["nodePools"][0]["autoscaling"] == {
        "enabled": xpk["enabled"], "minNodeCount": xpk["min_nodes"],
        "maxNodeCount": xpk["max_nodes"]}
    created, _ = _bodies(_cfg(cpu_nodes=2, cpu_max_nodes=2))
    assert "autoscaling" not in created["nodePools"][0]
    with pytest.raises(cluster.ClusterOptionsError) as err:
        _cfg(cpu_nodes=3, cpu_max_nodes=2)
    assert "--cpu-max-nodes" in str(err.value.problems)


def test_dry_run_prints_enum_names_not_numbers(capsys):
    assert main(["cluster", "create", "elastic", *ARGS, "--tpu-type", "v5litepod-16",
                 "--skip-jobset", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert '"type": "COMPACT"' in out
    assert '"channel": "RAPID"' in out
    assert '"mode": 2' not in out and '"type": 1' not in out


def test_dry_run_says_what_it_makes_before_its_requests(capsys):
    # The requests run to hundreds of lines: a few lines first say what they make.
    assert main(["cluster", "create", "elastic", *ARGS, "--tpu-type", "v5litepod-16",
                 "--num-slices", "2", "--spot", "--kueue", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("cluster create elastic --dry-run (nothing is sent): in ")
    assert lines[1].startswith("  head pool cpu-np: n2-standard-64, 1 node")
    assert lines[2] == "  2 TPU pools, one a slice: v5litepod-16 (4 x ct5lp-hightpu-4t), spot"
    assert lines[3] == "  then installs JobSet v0.12.0 and Kueue v0.19.2 and its queues"
    assert lines[4] == "the requests, in order:" and lines[5].startswith("GET /v1/projects/")
