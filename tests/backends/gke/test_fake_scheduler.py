"""The fake API server's scheduler model: pods bind only where the real scheduler would put them,
and stay Pending with its message otherwise (tests/fakes/k8s_scheduler.py)."""

from __future__ import annotations

import pytest
from fake_cluster import start_fake, stop, wait_for
from fake_gke import TPU_TAINT, node, pool_nodes

from elastix.workload import platform

JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
TPU_TOLERATION = {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture
def fake(tmp_path):
    f = start_fake(tmp_path, {"start_delay": 0.01})
    yield f
    stop(f)


def _container(cpu: str, memory: str = "1G", **extra: str) -> dict:
    return {"name": "c", "image": "i", "resources": {"limits": {"cpu": cpu, "memory": memory,
                                                                **extra}}}


def _jobset(name: str, pod_spec: dict, replicas: int = 1, pods: int = 1,
            exclusive: str | None = None) -> dict:
    annotations = {"alpha.jobset.sigs.k8s.io/exclusive-topology": exclusive} if exclusive else {}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": replicas, "template": {
                "metadata": {"annotations": annotations},
                "spec": {"completions": pods, "parallelism": pods,
                         "template": {"spec": pod_spec}}}}]}}


def _cpu_node(name: str, pool: str, cpu: str = "4") -> dict:
    return node(name, {platform.NODEPOOL_LABEL: pool, "kubernetes.io/hostname": name},
                {"cpu": cpu, "memory": str(16 * 2**30)})


def _phases(fake, name: str) -> list[str]:
    pods = fake.pods(f"jobset.sigs.k8s.io/jobset-name={name}")
    return sorted(p["status"]["phase"] for p in pods)


def test_insufficient_cpu_stays_pending_with_the_schedulers_message(fake):
    fake.add_nodes(*(_cpu_node(f"n{i}", "cpu-np") for i in range(3)))
    fake.post(JOBSETS, _jobset("big", {"containers": [_container("8")]}))
    msgs = wait_for(lambda: fake.events("FailedScheduling"), what="FailedScheduling")
    assert msgs == ["0/3 nodes are available: 3 Insufficient cpu."]
    assert _phases(fake, "big") == ["Pending"]


def test_native_sidecars_add_to_the_pod_request(fake):
    fake.add_nodes(_cpu_node("n0", "cpu-np"))
    sidecar = {**_container("3"), "name": "side", "restartPolicy": "Always"}
    fake.post(JOBSETS, _jobset("side", {"containers": [_container("2")],
                                        "initContainers": [sidecar]}))
    assert wait_for(lambda: fake.events("FailedScheduling")) == \
        ["0/1 nodes are available: 1 Insufficient cpu."]


def test_selector_and_taint_reasons_are_counted_per_node(fake):
    tpu = node("t0", {platform.NODEPOOL_LABEL: "tpu", platform.ACCELERATOR_LABEL: "x"},
               {"cpu": "100", "memory": str(2**40), "google.com/tpu": "4"}, [TPU_TAINT])
    fake.add_nodes(tpu, _cpu_node("n0", "pathways-head"), _cpu_node("n1", "pathways-head"))
    fake.post(JOBSETS, _jobset("head", {"nodeSelector": {platform.NODEPOOL_LABEL: "cpu-np"},
                                        "containers": [_container("1")]}))
    assert wait_for(lambda: fake.events("FailedScheduling")) == [
        "0/3 nodes are available: 1 node(s) had untolerated taint {google.com/tpu: present}, "
        "2 node(s) didn't match Pod's node affinity/selector."]


def test_exclusive_topology_one_job_per_pool_then_a_new_pool_takes_the_waiting_job(fake):
    pools = [{"name": f"slice-{i}", "initialNodeCount": 2,
              "config": {"machineType": "ct5lp-hightpu-4t"},
              "placementPolicy": {"type": 1, "tpuTopology": "2x4"}} for i in range(3)]
    fake.add_nodes(*pool_nodes("c", pools[0]), *pool_nodes("c", pools[1]))
    spec = {"nodeSelector": {platform.ACCELERATOR_LABEL: "tpu-v5-lite-podslice"},
            "tolerations": [TPU_TOLERATION],
            "containers": [_container("1", **{"google.com/tpu": "4"})]}
    fake.post(JOBSETS, _jobset("ex", spec, replicas=3, pods=2,
                               exclusive=platform.NODEPOOL_LABEL))
    wait_for(lambda: _phases(fake, "ex") == ["Pending"] * 2 + ["Running"] * 4, what="4 running")
    pods = fake.pods("jobset.sigs.k8s.io/jobset-name=ex")
    by_job: dict[str, set[str]] = {}
    for p in pods:
        if p["spec"].get("nodeName"):
            pool = p["spec"]["nodeName"].rsplit("-", 1)[0]
            by_job.setdefault(p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"], set()).add(
                pool)
    assert sorted(len(v) for v in by_job.values()) == [1, 1]  # each Job on one pool
    assert len(set().union(*by_job.values())) == 2  # and no pool shared
    # Resources are filtered before pod affinity (the default profile's order): full TPU hosts.
    assert fake.events("FailedScheduling")[0] == \
        "0/4 nodes are available: 4 Insufficient google.com/tpu."
    fake.add_nodes(*pool_nodes("c", pools[2]))
    wait_for(lambda: _phases(fake, "ex") == ["Running"] * 6, what="the third pool used")


def test_exclusive_topology_keeps_other_jobs_out_of_a_used_domain(fake):
    fake.add_nodes(*(_cpu_node(f"a{i}", "pool-a", cpu="64") for i in range(2)))
    spec = {"containers": [_container("1")]}
    fake.post(JOBSETS, _jobset("aa", spec, replicas=2, pods=1, exclusive=platform.NODEPOOL_LABEL))
    msgs = wait_for(lambda: fake.events("FailedScheduling"), what="FailedScheduling")
    assert msgs == ["0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."]
    wait_for(lambda: _phases(fake, "aa") == ["Pending", "Running"], what="one of two running")


def test_without_nodes_every_pod_runs(fake):
    fake.post(JOBSETS, _jobset("free", {"containers": [_container("1000")]}))
    wait_for(lambda: _phases(fake, "free") == ["Running"], what="running without Nodes")


def test_tpu_pool_nodes_carry_gke_labels_taint_and_chips():
    pool = {"name": "np-0", "initialNodeCount": 4, "config": {"machineType": "ct5lp-hightpu-4t"},
            "placementPolicy": {"type": 1, "tpuTopology": "4x4"}}
    nodes = pool_nodes("c", pool)
    assert len(nodes) == 4
    labels = nodes[0]["metadata"]["labels"]
    assert labels[platform.ACCELERATOR_LABEL] == "tpu-v5-lite-podslice"
    assert labels[platform.TOPOLOGY_LABEL] == "4x4"
    assert labels[platform.NODEPOOL_LABEL] == "np-0"
    assert nodes[0]["spec"]["taints"] == [TPU_TAINT]
    assert nodes[0]["status"]["allocatable"]["google.com/tpu"] == "4"
    cpu = pool_nodes("c", {"name": "cpu-np", "initialNodeCount": 1,
                           "config": {"machineType": "n2-standard-64"}})[0]
    alloc = platform.allocatable(platform.machine_capacity("n2-standard-64"))
    assert float(cpu["status"]["allocatable"]["cpu"]) == pytest.approx(alloc.cpu, abs=1e-3)
    assert cpu["spec"]["taints"] == []
