"""The manifest follows the cluster's JobSet controller (issue 38 item 3), over HTTP against the
fake API server: DependsOn or startupPolicy by the controller's version; RestartJob rules only
with the controller's gate on, and then a lost slice is recreated alone and counted per slice.

The controller is installed as JobSet's release installs it: a Deployment whose image tag is the
version, mounting its configuration (``featureGates``) from a ConfigMap as ``manager-config``.
"""

from __future__ import annotations

import json

from fake_cluster import CREATE, elastix, wait_for

NS = "jobset-system"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"


def install_controller(fake, version: str, gates: dict[str, bool] | None = None) -> None:
    fake.post("/api/v1/namespaces", {"metadata": {"name": NS}})
    config = "apiVersion: config.jobset.x-k8s.io/v1alpha1\nkind: Configuration\n"
    if gates:
        config += "featureGates:\n" + "".join(f"  {k}: {str(v).lower()}\n"
                                              for k, v in gates.items())
    fake.post(f"/api/v1/namespaces/{NS}/configmaps", {
        "metadata": {"name": "jobset-manager-config"},
        "data": {"controller_manager_config.yaml": config}})
    fake.post(f"/apis/apps/v1/namespaces/{NS}/deployments", {
        "metadata": {"name": "jobset-controller-manager"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"control-plane": "cm"}},
                 "template": {"metadata": {"labels": {"control-plane": "cm"}}, "spec": {
                     "containers": [{"name": "manager",
                                     "image": f"registry.k8s.io/jobset/jobset:{version}",
                                     "args": ["--zap-log-level=2",
                                              "--config=/controller_manager_config.yaml"]}],
                     "volumes": [{"name": "manager-config",
                                  "configMap": {"name": "jobset-manager-config"}}]}}}})


def stored(fake, name: str = "demo") -> dict:
    return fake.get(f"{JOBSETS}/{name}")


def workers(js: dict) -> dict:
    return next(rj for rj in js["spec"]["replicatedJobs"] if rj["name"] == "worker")


def test_the_start_order_follows_the_controllers_version(fake_cluster):
    install_controller(fake_cluster, "v0.7.2")
    r = elastix(fake_cluster, *CREATE, "--skip-preflight")
    js = stored(fake_cluster)
    assert js["spec"]["startupPolicy"] == {"startupPolicyOrder": "InOrder"}
    assert all("dependsOn" not in rj for rj in js["spec"]["replicatedJobs"])
    assert "v0.7.2, without DependsOn" in r.stderr and "startupPolicy InOrder" in r.stderr
    elastix(fake_cluster, "workload", "delete", "demo", "--wait")

    # Upgraded: the same flags render DependsOn, and nothing is said about it.
    dep = f"/apis/apps/v1/namespaces/{NS}/deployments/jobset-controller-manager"
    body = fake_cluster.get(dep)
    body["spec"]["template"]["spec"]["containers"][0]["image"] = \
        "registry.k8s.io/jobset/jobset:v0.12.0"
    _put(fake_cluster, dep, body)
    r = elastix(fake_cluster, *CREATE, "--skip-preflight")
    js = stored(fake_cluster)
    assert "startupPolicy" not in js["spec"]
    assert workers(js)["dependsOn"] == [{"name": "pathways-head", "status": "Ready"}]
    assert "DependsOn" not in r.stderr


def test_a_controller_that_cannot_be_read_gets_dependson_when_its_crd_serves_it(fake_cluster):
    # No Deployment to read (a managed JobSet, or another namespace's objects): the served CRD
    # (v0.12.0's, vendored) has dependsOn.
    elastix(fake_cluster, *CREATE, "--skip-preflight")
    assert workers(stored(fake_cluster))["dependsOn"][0]["name"] == "pathways-head"


def test_slice_restart_job_is_refused_while_the_gate_is_off(fake_cluster):
    install_controller(fake_cluster, "v0.12.0")
    r = elastix(fake_cluster, *CREATE, "--skip-preflight", "--slice-restart", "job", check=False)
    assert r.returncode == 2, r.stderr
    assert "RestartJob feature gate, which is off (controller v0.12.0)" in r.stderr
    assert "featureGates: {RestartJob: true}" in r.stderr
    assert fake_cluster.get(JOBSETS)["items"] == []
    assert fake_cluster.head_access() == {"serviceaccounts": [], "roles": [], "rolebindings": []}

    install_old = "v0.11.1"
    dep = f"/apis/apps/v1/namespaces/{NS}/deployments/jobset-controller-manager"
    body = fake_cluster.get(dep)
    body["spec"]["template"]["spec"]["containers"][0]["image"] = \
        f"registry.k8s.io/jobset/jobset:{install_old}"
    _put(fake_cluster, dep, body)
    r = elastix(fake_cluster, *CREATE, "--skip-preflight", "--slice-restart", "job", check=False)
    assert r.returncode == 2 and "needs JobSet v0.12.0 or newer, the controller is v0.11.1" \
        in r.stderr


def test_with_the_gate_on_a_lost_slice_is_recreated_alone_and_counted(fake_cluster):
    install_controller(fake_cluster, "v0.12.0", {"RestartJob": True})
    elastix(fake_cluster, *CREATE, "--skip-preflight", "--slice-restart", "job",
            "--max-slice-restarts", "3")
    js = stored(fake_cluster)
    fp = js["spec"]["failurePolicy"]
    assert fp["maxRestarts"] == 6  # 3 restarts x 2 slices, --max-restarts 0
    assert fp["rules"] == [
        {"name": "headFails", "action": "FailJobSet", "targetReplicatedJobs": ["pathways-head"]},
        {"name": "sliceRestart", "action": "RestartJob", "targetReplicatedJobs": ["worker"]}]
    assert workers(js)["template"]["spec"]["backoffLimit"] == 0

    jobs = "/apis/batch/v1/namespaces/default/jobs"
    wait_for(lambda: len(fake_cluster.pods("jobset.sigs.k8s.io/replicatedjob-name=worker")) == 8,
             what="both slices' pods")
    before = {j["metadata"]["name"]: j["metadata"]["uid"]
              for j in fake_cluster.get(jobs)["items"]}
    head_pod = fake_cluster.pods("jobset.sigs.k8s.io/replicatedjob-name=pathways-head")[0]
    elastix(fake_cluster, "chaos", "kill-worker", "demo", "--slice", "1")

    def restarts():
        st = stored(fake_cluster).get("status") or {}
        return next((x.get("jobRestarts") for x in st.get("replicatedJobsStatus") or []
                     if x["name"] == "worker"), None)

    wait_for(lambda: restarts() == [0, 1], what="slice 1's Job recreated")
    after = {j["metadata"]["name"]: j["metadata"]["uid"] for j in fake_cluster.get(jobs)["items"]}
    assert after["demo-worker-0"] == before["demo-worker-0"]  # the other slice untouched
    assert after["demo-pathways-head-0"] == before["demo-pathways-head-0"]
    assert after["demo-worker-1"] != before["demo-worker-1"]
    assert fake_cluster.pods("jobset.sigs.k8s.io/replicatedjob-name=pathways-head")[0][
        "metadata"]["uid"] == head_pod["metadata"]["uid"]
    assert (stored(fake_cluster).get("status") or {}).get("restarts", 0) == 0

    st = json.loads(elastix(fake_cluster, "workload", "status", "demo", "-o", "json").stdout)
    assert [(s["index"], s["job_restarts"], s["slice_restarts"], s["max_slice_restarts"])
            for s in st["slices"]] == [(0, 0, 0, None), (1, 1, 1, None)]
    table = elastix(fake_cluster, "workload", "status", "demo").stdout
    assert "JobSet restarts 0/6" in table


def test_ttl_after_finished_is_rendered(fake_cluster):
    elastix(fake_cluster, *CREATE, "--skip-preflight", "--ttl-after-finished", "3600")
    assert stored(fake_cluster)["spec"]["ttlSecondsAfterFinished"] == 3600


def _put(fake, path: str, body: dict) -> None:
    import urllib.request

    req = urllib.request.Request(f"{fake.url}{path}", data=json.dumps(body).encode(),
                                 method="PUT", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        r.read()
