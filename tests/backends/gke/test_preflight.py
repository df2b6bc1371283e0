"""Preflight on ``workload create`` (GKE): every reason the cluster cannot run the workload, at
once, before anything is submitted; read from Nodes (kubeconfig) or node pools (--cluster)."""

from __future__ import annotations

import pytest
from fake_cluster import CREATE, elastix, start_fake, stop, wait_for
from fake_gke import pool_nodes

from elastix.backends.gke import preflight as pf
from elastix.workload import platform


def _pool(name: str, machine: str, nodes: int, topology: str | None = None, **extra) -> dict:
    pool = {"name": name, "initialNodeCount": nodes, "config": {"machineType": machine}, **extra}
    if topology:
        pool["placementPolicy"] = {"type": 1, "tpuTopology": topology}
    return pool


def _tpu_pools(n: int, machine: str = "ct5lp-hightpu-4t", topology: str = "4x4",
               hosts: int = 4) -> list[dict]:
    return [_pool(f"tpu-slice-{i}", machine, hosts, topology) for i in range(n)]


@pytest.fixture
def fake(tmp_path):
    f = start_fake(tmp_path, {"start_delay": 0.01, "log_interval": 0.1})
    yield f
    stop(f)


def _nodes(fake, *pools: dict) -> None:
    for p in pools:
        fake.add_nodes(*pool_nodes("c", p))


def _jobsets(fake) -> list:
    return fake.get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets")["items"]


def test_a_cluster_that_fits_gets_the_workload_and_every_pod_runs(fake):
    _nodes(fake, _pool(platform.HEAD_POOL, platform.HEAD_MACHINE, 1), *_tpu_pools(2))
    elastix(fake, *CREATE)
    wait_for(lambda: (len(fake.pods()) == 9 and
                      all(p["status"]["phase"] == "Running" for p in fake.pods())),
             what="head and 8 workers running")


def test_todays_cluster_create_pools_are_refused_with_every_reason(fake):
    # What an older `cluster create` made: a head pool named pathways-head.
    _nodes(fake, _pool("pathways-head", "n2-standard-32", 1), *_tpu_pools(1))
    out = elastix(fake, *CREATE, check=False)
    assert out.returncode == 1, out.stderr  # a cluster problem among them: exit 1
    err = out.stderr
    assert "2 problems found by preflight; nothing was submitted" in err
    assert "head pool: no node pool matches the head pod's selector " \
           "cloud.google.com/gke-nodepool=cpu-np (untainted pools: pathways-head)" in err
    assert "--num-slices: the workload needs 2 slices of 4 tpu-v5-lite-podslice 4x4 hosts; " \
           "the cluster has room for 1" in err and "pass --num-slices 1" in err
    assert _jobsets(fake) == []


def test_a_head_machine_too_small_names_both_sizes(fake):
    _nodes(fake, _pool(platform.HEAD_POOL, "n2-standard-32", 1), *_tpu_pools(2))
    out = elastix(fake, *CREATE, check=False)
    assert out.returncode == 1
    line = " ".join(out.stderr.split())
    assert "head pool: the head pod needs 48 CPU / 216 GiB but pool cpu-np (n2-standard-32) " \
           "leaves 31.85 CPU / 119 GiB to pods" in line
    assert "use a head pool of n2-standard-64 or larger" in line
    assert _jobsets(fake) == []


def test_only_the_command_is_wrong_exit_2(fake):
    _nodes(fake, _pool(platform.HEAD_POOL, platform.HEAD_MACHINE, 1),
           *_tpu_pools(2, "ct6e-standard-4t", "2x4", hosts=2))
    out = elastix(fake, *CREATE, check=False)
    assert out.returncode == 2
    assert "--tpu-type: the cluster has no tpu-v5-lite-podslice 4x4 nodes; it has " \
           "tpu-v6e-slice 2x4" in " ".join(out.stderr.split())


def test_skip_preflight_submits_and_the_scheduler_says_why_it_waits(fake):
    _nodes(fake, _pool("pathways-head", "n2-standard-32", 1), *_tpu_pools(2))
    elastix(fake, *CREATE, "--skip-preflight")
    msgs = wait_for(lambda: fake.events("FailedScheduling"), what="FailedScheduling")
    assert "0/9 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, " \
           "8 node(s) had untolerated taint {google.com/tpu: present}." in msgs


def test_jobset_missing_is_folded_in(tmp_path):
    fake = start_fake(tmp_path, crd=False)
    try:
        _nodes(fake, _pool("pathways-head", "n2-standard-64", 1), *_tpu_pools(2))
        out = elastix(fake, *CREATE, check=False)
        assert out.returncode == 1
        assert "JobSet: the JobSet CRD is not installed" in out.stderr
        assert "head pool: no node pool matches" in out.stderr
    finally:
        stop(fake)


def test_no_nodes_at_all_only_checks_jobset(fake):
    elastix(fake, *CREATE)  # scale-from-zero or not GKE: nothing to judge


# --- node pools (--cluster), pure -----------------------------------------------------------


def _cluster(pools: list[dict]):
    from google.cloud import container_v1
    from google.protobuf import json_format

    msg = container_v1.Cluster()
    json_format.ParseDict({"name": "c", "nodePools": pools}, container_v1.Cluster.pb(msg))
    return msg


def _manifest(**flags):
    from elastix.workload.render import render
    from elastix.workload.spec import build_spec

    base = {"name": "demo", "tpu_type": "v5litepod-16", "num_slices": 2, "elastic_slices": 2,
            "docker_image": "img:1", "command": "python train.py"}
    return render(build_spec(None, {**base, **flags}))


STORAGE = ["https://www.googleapis.com/auth/devstorage.full_control",
           "https://www.googleapis.com/auth/cloud-platform"]


def test_pools_without_storage_scopes_are_named_when_gs_paths_are_used():
    pools = [_pool(platform.HEAD_POOL, platform.HEAD_MACHINE, 1), *_tpu_pools(2)]
    pools[1]["config"]["oauthScopes"] = STORAGE
    groups = pf.groups_from_pools(_cluster(pools))
    problems = pf.check(pf.needs(_manifest()), groups, True, "c")
    assert [(p[0], p[3]) for p in problems] == [("scopes", pf.CLUSTER)]
    assert "node pools cpu-np, tpu-slice-1 cannot write to Cloud Storage" in problems[0][1]
    with pytest.raises(pf.PreflightError) as err:
        pf.raise_if_problems(problems)
    assert err.value.exit_code == 1 and err.value.message.startswith("scopes: node pools")


def test_pools_that_fit_pass_and_an_autoscaling_pool_is_not_counted_short():
    pools = [_pool(platform.HEAD_POOL, platform.HEAD_MACHINE, 1), *_tpu_pools(1)]
    for p in pools:
        p["config"]["oauthScopes"] = STORAGE
    need = pf.needs(_manifest())
    assert [p[0] for p in pf.check(need, pf.groups_from_pools(_cluster(pools)), True, "c")] == \
        ["--num-slices"]
    # Exclusive placement: one slice per pool, so a pool autoscaling to 8 still holds one.
    pools[1]["autoscaling"] = {"enabled": True, "maxNodeCount": 8}
    assert [p[0] for p in pf.check(need, pf.groups_from_pools(_cluster(pools)), True, "c")] == \
        ["--num-slices"]
    # A second pool with no node yet that autoscales to a slice's hosts makes room.
    pools.append(_pool("tpu-slice-1", "ct5lp-hightpu-4t", 0, "4x4",
                       autoscaling={"enabled": True, "minNodeCount": 0, "maxNodeCount": 4}))
    pools[-1]["config"]["oauthScopes"] = STORAGE
    assert pf.check(need, pf.groups_from_pools(_cluster(pools)), True, "c") == []


def test_needs_reads_the_manifest():
    need = pf.needs(_manifest())
    assert need.head_selector == {platform.NODEPOOL_LABEL: platform.HEAD_POOL}
    assert (need.head.cpu, need.head.memory) == (48, 232e9)
    assert (need.slices, need.hosts, need.exclusive) == (2, 4, platform.NODEPOOL_LABEL)
    assert need.gcs  # the default scratch location is on Cloud Storage


# --- node counts from the Nodes the cluster reports (--cluster) -----------------------------


def _scoped(pools: list[dict]) -> list[dict]:
    for p in pools:
        p["config"]["oauthScopes"] = STORAGE
    return pools


def test_nodes_are_counted_from_the_cluster_not_the_pools_initial_size():
    """A pool created with 4 nodes and resized to 2 holds no slice of 4 hosts, though its
    initial_node_count still says 4; the Nodes list (by node-pool label) says 2."""
    pools = _scoped([_pool(platform.HEAD_POOL, platform.HEAD_MACHINE, 1), *_tpu_pools(2)])
    nodes = [n for p in pools for n in pool_nodes("c", p)]
    resized = [n for n in nodes if not n["metadata"]["name"].startswith("gke-c-tpu-slice-1-")
               or n["metadata"]["name"].endswith(("-0", "-1"))]
    assert len(resized) == len(nodes) - 2
    need = pf.needs(_manifest())
    assert pf.check(need, pf.groups_from_pools(_cluster(pools), nodes), True, "c") == []
    problems = pf.check(need, pf.groups_from_pools(_cluster(pools), resized), True, "c")
    assert [p[0] for p in problems] == ["--num-slices"]
    assert "room for 1 (nodes per pool: tpu-slice-0: 4, tpu-slice-1: 2)" in problems[0][1]
    # Without the Nodes (not allowed to list them): the pools' size, per zone.
    pools[2]["locations"] = ["us-central1-a", "us-central1-b"]
    groups = pf.groups_from_pools(_cluster(pools), None)
    assert [g.nodes for g in groups] == [1, 4, 8]


def test_a_head_pool_with_no_nodes_that_does_not_autoscale_is_refused():
    pools = _scoped([_pool(platform.HEAD_POOL, platform.HEAD_MACHINE, 1), *_tpu_pools(2)])
    nodes = [n for p in pools[1:] for n in pool_nodes("c", p)]  # cpu-np scaled to zero
    problems = pf.check(pf.needs(_manifest()), pf.groups_from_pools(_cluster(pools), nodes),
                        True, "c")
    assert [(p[0], p[3]) for p in problems] == [("head pool", pf.CLUSTER)]
    assert "pool cpu-np has no nodes and does not autoscale" in problems[0][1]
    pools[0]["autoscaling"] = {"enabled": True, "minNodeCount": 0, "maxNodeCount": 2}
    assert pf.check(pf.needs(_manifest()), pf.groups_from_pools(_cluster(pools), nodes),
                    True, "c") == []


def test_the_service_account_roles_preflight_cannot_see_are_named():
    pools = _scoped([_pool(platform.HEAD_POOL, platform.HEAD_MACHINE, 1), *_tpu_pools(1)])
    pools[1]["config"]["serviceAccount"] = "tpu-nodes@p.iam.gserviceaccount.com"
    manifest = _manifest(events_path="gs://ckpt-bucket/run1/events.jsonl")
    note = pf.identity_note(manifest, pf.groups_from_pools(_cluster(pools), []))
    assert note.startswith("preflight did not check the IAM roles of the nodes' service account "
                           "(the Compute Engine default service account, "
                           "tpu-nodes@p.iam.gserviceaccount.com)")
    assert "on gs://ckpt-bucket, gs://cloud-pathways-staging (e.g. roles/storage.objectUser)" \
        in note and "roles/artifactregistry.reader" in note
    assert "elastix cannot read IAM policies" in note
    assert pf.identity_note(manifest, pf.groups_from_nodes([])) is None  # Nodes: not visible
