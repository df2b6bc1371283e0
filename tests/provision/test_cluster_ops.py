"""Cluster operations through google-cloud-container's REST transport against a local server."""

from __future__ import annotations

import json

import jobset_manifest
import pytest

from elastix.errors import BackendError, UsageError
from elastix.main import main
from elastix.provision import cluster, jobset_install
from elastix.workload import platform

BASE = "/v1/projects/my-proj-1/locations/us-central1-a"


@pytest.fixture
def cluster_manager(httpserver, monkeypatch):
    """The product's GKE API client, pointed at httpserver."""
    from google.auth.credentials import AnonymousCredentials

    from elastix.clients import gke

    monkeypatch.setenv(gke.ENDPOINT_ENV, httpserver.url_for("").rstrip("/"))
    return gke.cluster_manager(AnonymousCredentials())


def _cfg(**kw):
    return cluster.validate("my-proj-1", "us-central1-a", "elastic", tpu_type="v5litepod-16",
                            num_slices=2, **kw)


def _parse(message_type, value: dict):
    from google.protobuf import json_format

    return json_format.ParseDict(value, message_type.meta.pb())


def _op(name: str, status: str, error: str | None = None) -> str:
    body = {"name": name, "status": status, "operationType": "CREATE_CLUSTER"}
    if error:
        body["error"] = {"code": 8, "message": error}
    return json.dumps(body)


def _json(httpserver, path, method, body, status=200, **kw):
    httpserver.expect_ordered_request(path, method=method, **kw).respond_with_data(
        body, status=status, content_type="application/json")


def _not_found(httpserver, path):
    _json(httpserver, path, "GET", json.dumps({"error": {"code": 404, "status": "NOT_FOUND",
                                                         "message": "not found"}}), status=404)


def test_create_sends_the_planned_requests_and_polls_to_done(httpserver, cluster_manager):
    cfg = _cfg()
    planned = cluster.plan_create(cfg)
    _not_found(httpserver, f"{BASE}/clusters/elastic")
    _json(httpserver, f"{BASE}/clusters", "POST", _op("op-1", "RUNNING"))
    _json(httpserver, f"{BASE}/operations/op-1", "GET", _op("op-1", "RUNNING"))
    _json(httpserver, f"{BASE}/operations/op-1", "GET", _op("op-1", "DONE"))
    for i in range(2):
        _json(httpserver, f"{BASE}/clusters/elastic/nodePools", "POST", _op(f"p{i}", "PENDING"))
        _json(httpserver, f"{BASE}/operations/p{i}", "GET", _op(f"p{i}", "DONE"))
    lines: list[str] = []
    sent = cluster.create(cfg, cluster_manager, lines.append, interval=0, sleep=lambda s: None)
    httpserver.check_assertions()
    assert sent == planned
    posts = [(r.path, json.loads(r.data)) for r, _ in httpserver.log if r.method == "POST"]
    # What --dry-run prints is what was sent: the transport writes enums as numbers, --dry-run
    # as names; parsed back, the messages are equal.
    assert [p for p, _ in posts] == [f"/v1/{s.path}" for s in planned]
    for (_, sent_body), step in zip(posts, planned, strict=True):
        ((key, value),) = sent_body.items()
        assert _parse(type(step.message), value) == _parse(type(step.message), step.body[key])
    created = planned[0].body["cluster"]
    assert created["nodePools"] == [{
        "name": "cpu-np", "initialNodeCount": 1,
        "config": {"machineType": "n2-standard-64", "oauthScopes": list(platform.NODE_SCOPES)},
        "autoscaling": {"enabled": True, "minNodeCount": 1, "maxNodeCount": 20}}]
    assert "workloadIdentityConfig" not in created  # only with --enable-workload-identity
    pool = posts[1][1]["nodePool"]
    assert (pool["name"], pool["initialNodeCount"], pool["config"]["machineType"]) == \
        ("tpu-slice-0", 4, "ct5lp-hightpu-4t")
    assert pool["placementPolicy"] == {"type": 1, "tpuTopology": "4x4"}  # on the wire: numbers
    assert "creating cluster elastic: running (0 s)" in lines
    assert "creating node pool tpu-slice-1: done (0 s)" in lines


def test_create_resumes_keeping_what_exists(httpserver, cluster_manager):
    existing = {"name": "elastic", "status": "RUNNING", "nodePools": [
        {"name": "pathways-head", "config": {"machineType": "n2-standard-32"}},
        {"name": "tpu-slice-0", "config": {"machineType": "ct5lp-hightpu-4t"}}]}
    _json(httpserver, f"{BASE}/clusters/elastic", "GET", json.dumps(existing))
    _json(httpserver, f"{BASE}/clusters/elastic/nodePools", "POST", _op("h", "DONE"))
    _json(httpserver, f"{BASE}/clusters/elastic/nodePools", "POST", _op("p1", "DONE"))
    sent = cluster.create(_cfg(), cluster_manager, lambda s: None, interval=0,
                          sleep=lambda s: None)
    httpserver.check_assertions()
    assert [s.message.name for s in sent] == ["cpu-np", "tpu-slice-1"]  # no cpu-np yet


def test_failed_operation_is_a_clear_error(httpserver, cluster_manager):
    _not_found(httpserver, f"{BASE}/clusters/elastic")
    _json(httpserver, f"{BASE}/clusters", "POST", _op("op-1", "RUNNING"))
    _json(httpserver, f"{BASE}/operations/op-1", "GET",
          _op("op-1", "DONE", error="Insufficient regional quota to satisfy request"))
    with pytest.raises(BackendError, match="creating cluster elastic failed: Insufficient "
                                           "regional quota") as err:
        cluster.create(_cfg(), cluster_manager, lambda s: None, interval=0,
                       sleep=lambda s: None)
    assert "op-1" in err.value.hint


@pytest.mark.parametrize("code,status,exc,needle", [
    (403, "PERMISSION_DENIED", BackendError, "permission denied"),
    (429, "RESOURCE_EXHAUSTED", BackendError, "quota or capacity"),
    (400, "INVALID_ARGUMENT", UsageError, "GKE rejected the request"),
    (500, "INTERNAL", BackendError, "the GKE API failed"),
])
def test_api_errors_become_clear_messages(httpserver, cluster_manager, code, status, exc, needle):
    _not_found(httpserver, f"{BASE}/clusters/elastic")
    _json(httpserver, f"{BASE}/clusters", "POST", json.dumps(
        {"error": {"code": code, "status": status, "message": "the server says no"}}),
        status=code)
    with pytest.raises(exc, match=needle) as err:
        cluster.create(_cfg(), cluster_manager, lambda s: None, interval=0,
                       sleep=lambda s: None)
    assert "the server says no" in err.value.message and err.value.hint


def test_create_installs_jobset_when_missing(httpserver, cluster_manager, k8s_api, tmp_path):
    existing = {"name": "elastic", "nodePools": [{"name": "cpu-np"}] + [
        {"name": f"tpu-slice-{i}"} for i in range(2)]}
    _json(httpserver, f"{BASE}/clusters/elastic", "GET", json.dumps(existing))
    manifest = jobset_manifest.write(tmp_path / "m.yaml", jobset_manifest.manifest())
    lines: list[str] = []
    cluster.create(_cfg(), cluster_manager, lines.append, kube=lambda: (k8s_api, "fake"),
              jobset_manifest=str(manifest))
    assert jobset_install.status(k8s_api, "fake").version == "v0.12.0"
    assert "JobSet v0.12.0 installed and ready" in lines
    lines.clear()
    _json(httpserver, f"{BASE}/clusters/elastic", "GET", json.dumps(existing))
    cluster.create(_cfg(), cluster_manager, lines.append, kube=lambda: (k8s_api, "fake"),
              jobset_manifest=str(tmp_path / "never-read.yaml"))
    assert "JobSet v0.12.0 is already installed" in lines


def test_delete_polls_to_done(httpserver, cluster_manager):
    cfg = cluster.validate("my-proj-1", "us-central1-a", "elastic")
    _json(httpserver, f"{BASE}/clusters/elastic", "DELETE", _op("d1", "RUNNING"))
    _json(httpserver, f"{BASE}/operations/d1", "GET", _op("d1", "DONE"))
    cluster.run(cluster_manager, cfg, cluster.plan_delete(cfg), lambda s: None, interval=0,
                sleep=lambda s: None)
    httpserver.check_assertions()


def test_pools_report_tpu_capacity():
    from google.cloud import container_v1

    found = container_v1.Cluster(node_pools=[
        container_v1.NodePool(name="pathways-head", initial_node_count=1,
                              config=container_v1.NodeConfig(machine_type="n2-standard-32")),
        container_v1.NodePool(
            name="tpu-slice-0", initial_node_count=4,
            config=container_v1.NodeConfig(machine_type="ct5lp-hightpu-4t"),
            placement_policy=container_v1.NodePool.PlacementPolicy(tpu_topology="4x4"))])
    head, tpu = cluster.pools(found)
    assert (head.tpu_chips, tpu.tpu_chips, tpu.topology) == (0, 16, "4x4")


@pytest.mark.parametrize("args,needles", [
    (["create", "Elastic_1", "--project", "my-proj-1", "--zone", "us-central1-a",
      "--tpu-type", "v5litepod-16"], ["not a valid GKE cluster name"]),
    (["create", "elastic", "--project", "my-proj-1", "--zone", "us-central1",
      "--tpu-type", "v5litepod-16"], ["is a region"]),
    (["create", "elastic", "--project", "my-proj-1", "--zone", "us-central1-a",
      "--tpu-type", "v5litepod-17"], ["unknown TPU type", "did you mean"]),
    (["delete", "elastic", "--project", "P", "--zone", "uscentral1a", "--yes"],
     ["2 problems", "--project", "--zone"]),
    (["delete", "elastic", "--yes"],
     ["a Google Cloud project is required", "a zone is required"]),
])
def test_bad_input_rejected_before_any_request(capsys, monkeypatch, args, needles):
    monkeypatch.setenv("ELASTIX_GKE_API_ENDPOINT", "http://127.0.0.1:9")  # nothing listens
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)  # --project's env fallback
    assert main(["cluster", *args]) == 2
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err


def test_delete_asks_and_does_nothing_when_declined(monkeypatch, capsys, httpserver):
    monkeypatch.setenv("ELASTIX_GKE_API_ENDPOINT", httpserver.url_for("").rstrip("/"))
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("n\n"))
    assert main(["cluster", "delete", "elastic", "--project", "my-proj-1",
                 "--zone", "us-central1-a"]) == 1  # an answer, not an interrupt (130)
    out, err = capsys.readouterr()
    assert "Delete cluster elastic" in out
    assert "cluster elastic was not deleted" in err and "--yes" in err
    assert httpserver.log == []


def test_dry_run_prints_every_request(capsys, tmp_path):
    manifest = jobset_manifest.write(tmp_path / "m.yaml", jobset_manifest.manifest())
    assert main(["cluster", "create", "elastic", "--project", "my-proj-1", "--zone",
                 "us-central1-a", "--tpu-type", "v5e-16", "--num-slices", "2",
                 "--jobset-manifest", str(manifest), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"POST {BASE}/clusters/elastic/nodePools") == 2
    assert f"POST {BASE}/clusters\n" in out and out.count("(until DONE)") == 3
    assert '"tpuTopology": "4x4"' in out
    assert "PATCH /apis/apps/v1/namespaces/jobset-system/deployments/jobset-controller-manager" \
        in out


def test_dry_run_with_a_url_names_the_apply_request_without_downloading(capsys, monkeypatch):
    monkeypatch.setenv("ELASTIX_GKE_API_ENDPOINT", "http://127.0.0.1:9")  # nothing listens
    assert main(["cluster", "create", "elastic", "--project", "my-proj-1", "--zone",
                 "us-central1-a", "--tpu-type", "v5e-16", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"GET {jobset_install.RELEASE_URL}\n" in out
    assert "PATCH each object of it (server-side apply, fieldManager=elastix)\n" in out
    # The same request the plan of a real manifest describes, object by object.
    step = jobset_install.plan(jobset_manifest.manifest())[0]
    assert step.describe().startswith(f"PATCH {step.path}?fieldManager=elastix&force=true")


def test_describe_shows_pools_capacity_and_jobset(httpserver, monkeypatch, capsys, k8s_api,
                                                   tmp_path):
    from google.auth.credentials import AnonymousCredentials

    from elastix.clients import gke

    # Seams at the credential and kube-client factories only: the GKE API goes over HTTP to
    # httpserver, the JobSet check over HTTP to the fake API server.
    monkeypatch.setenv(gke.ENDPOINT_ENV, httpserver.url_for("").rstrip("/"))
    monkeypatch.setattr(gke, "credentials", lambda: (AnonymousCredentials(), None))
    monkeypatch.setattr(gke, "api_client_for_cluster", lambda *a: (k8s_api, "fake"))
    jobset_install.apply(k8s_api, "fake", jobset_install.plan(jobset_manifest.manifest()))
    described = {"name": "elastic", "status": "RUNNING", "currentMasterVersion": "1.33.2-gke.1",
               "endpoint": "34.1.2.3", "nodePools": [
                   {"name": "pathways-head", "initialNodeCount": 1, "status": "RUNNING",
                    "config": {"machineType": "n2-standard-32"}}] + [
                   {"name": f"tpu-slice-{i}", "initialNodeCount": 4, "status": "RUNNING",
                    "config": {"machineType": "ct5lp-hightpu-4t"},
                    "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"}}
                   for i in range(2)]}
    _json(httpserver, f"{BASE}/clusters/elastic", "GET", json.dumps(described))
    # The Nodes the cluster reports: tpu-slice-1 has lost a host since it was created.
    from fake_gke import pool_nodes
    from kubernetes import client

    for pool in described["nodePools"]:
        for node in pool_nodes("elastic", pool):
            if node["metadata"]["name"] != "gke-elastic-tpu-slice-1-3":
                client.CoreV1Api(k8s_api).create_node(node)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["cluster", "describe", "elastic", "--project", "my-proj-1",
                 "--zone", "us-central1-a"]) == 0
    out = capsys.readouterr().out
    assert "cluster elastic: RUNNING, GKE 1.33.2-gke.1, endpoint 34.1.2.3" in out
    assert "TPU capacity: 28 chips in 2 TPU node pools" in out
    assert "nodes: as the cluster reports them" in out
    assert "JobSet: installed v0.12.0" in out
    assert "Kueue: not installed" in out
    assert "tpu-slice-1" in out and "ct5lp-hightpu-4t" in out
