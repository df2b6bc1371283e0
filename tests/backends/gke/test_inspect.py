"""``elastix workload inspect`` on GKE through the fake API server: one file that says why a
workload is stuck or failed, for a JobSet elastix made and for one xpk made (created with the
official ``kubernetes`` client, never by elastix), and never a value of the workload's own
environment in it, even where its head printed one."""

from __future__ import annotations

import copy
import json
import os
import stat
from pathlib import Path

import fake_cluster as gke
import pytest
import yaml
from fake_gke import node
from test_kueue import PENDING, QUEUE

FIXTURES = Path(__file__).parents[2] / "fixtures"
XPK = yaml.safe_load((FIXTURES / "xpk-1.16.0-pathways-elastic.yaml").read_text())
MAXTEXT = (FIXTURES / "maxtext" / "elastic.log").read_text().splitlines()
SECRET = "s3cr3t-token-4f9a"
JS = "jobset.sigs.k8s.io/"


def _head(fake, name: str) -> dict:
    return gke.wait_for(lambda: [p for p in fake.pods(f"{JS}jobset-name={name},"
                                                      f"{JS}replicatedjob-name=pathways-head")
                                 if p["status"].get("phase") == "Running"], what="head")[0]


QUOTED = 'quo"te\\back-Ünï-12345'
"""A secret with a quote, a backslash and non-ASCII: JSON escapes each of them."""
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _xpk_with_a_secret() -> dict:
    """xpk's JobSet, its head's main container given variables of the user's own, applied
    with kubectl (which keeps the object, values JSON-escaped, in its last-applied
    annotation)."""
    body = copy.deepcopy(XPK)
    for rj in body["spec"]["replicatedJobs"]:
        if rj["name"] == "pathways-head":
            main = rj["template"]["spec"]["template"]["spec"]["containers"][0]
            main.setdefault("env", []).extend([{"name": "HF_TOKEN", "value": SECRET},
                                               {"name": "API_PASS", "value": QUOTED}])
    body["metadata"].setdefault("annotations", {})[LAST_APPLIED] = json.dumps(body)
    return body


@pytest.fixture
def xpk_made(tmp_path):
    from kubernetes import client, config

    fake = gke.start_fake(tmp_path, {"log_interval": 0.2})
    try:
        api = config.new_client_from_config(config_file=str(fake.kubeconfig))
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", "default", "jobsets", _xpk_with_a_secret())
        gke.wait_for(lambda: sum(p["status"].get("phase") == "Running"
                                 for p in fake.pods()) >= 13, timeout=60, what="pods running")
        head = _head(fake, "elastic-demo")
        stamp = MAXTEXT[-1].partition(" ")[0]
        fake.admin("log", {"pod": head["metadata"]["name"],
                           "container": head["spec"]["containers"][0]["name"],
                           "lines": [*MAXTEXT, f"{stamp} HF_TOKEN is {SECRET}"],
                           "timestamps": True})
        yield fake
    finally:
        gke.stop(fake)


def test_a_bundle_of_an_xpk_made_workload_says_what_is_there_and_hides_its_secret(
        xpk_made, tmp_path):
    fake = xpk_made
    tpu = {"cloud.google.com/gke-nodepool": "tpu-np-0",
           "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
           "cloud.google.com/gke-tpu-topology": "4x4"}
    sick = node("tpu-2", tpu, {"cpu": "224", "memory": "400Gi", "google.com/tpu": "4"})
    sick["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    fake.add_nodes(node("tpu-1", tpu, {"cpu": "224", "memory": "400Gi", "google.com/tpu": "4"}),
                   sick)
    out = tmp_path / "bundle.json"
    gke.elastix(fake, "workload", "inspect", "elastic-demo", "--output-file", str(out))
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    text = out.read_text()
    assert SECRET not in text
    for form in (QUOTED, json.dumps(QUOTED)[1:-1], json.dumps(json.dumps(QUOTED))[1:-1]):
        assert form not in text, form  # nor in the last-applied annotation, escaped
    b = json.loads(text)
    applied = json.loads(b["manifest"]["metadata"]["annotations"][LAST_APPLIED])
    kept = {e["name"]: e.get("value") for rj in applied["spec"]["replicatedJobs"]
            for c in rj["template"]["spec"]["template"]["spec"]["containers"]
            for e in c.get("env") or []}
    assert kept["API_PASS"] == kept["HF_TOKEN"] == "<hidden by elastix>"
    assert kept["JAX_PLATFORMS"] == "proxy"
    assert b["elastix"]["backend"] == "gke" and b["unreadable"] == []
    assert b["workload"]["made_by"] == "xpk" and b["workload"]["num_slices"] == 3
    head = next(c for rj in b["manifest"]["spec"]["replicatedJobs"] if rj["name"] ==
                "pathways-head" for c in rj["template"]["spec"]["template"]["spec"]["containers"])
    env = {e["name"]: e.get("value") for e in head["env"]}
    assert env["HF_TOKEN"] == "<hidden by elastix>"
    assert env["JAX_PLATFORMS"] == "proxy"  # the platform's own: shown
    pods = b["pods"]
    assert pods[0]["role"] == "head"
    assert sorted((p["slice"], p["host"]) for p in pods[1:]) == [
        (s, h) for s in range(3) for h in range(4)]
    assert all(p["phase"] == "Running" and "events" in p for p in pods)
    assert len(b["jobs"]) == 4 and {j["replicated_job"] for j in b["jobs"]} == {
        "pathways-head", "worker"}
    assert b["nodes"] == [{"pool": "tpu-np-0", "accelerator": "tpu-v5-lite-podslice",
                           "topology": "4x4", "healthy": 1, "total": 2,
                           "unhealthy": ["tpu-2"]}]
    assert b["kueue"] == {"queue": "multislice-queue", "installed": False}  # xpk's label
    assert any("HF_TOKEN is <hidden by elastix>" in x for x in b["head_log"])
    m = b["measurement"]
    assert m["source"].startswith("log") and m["goodput"]["recoveries"]
    assert m["progress"]["last_step"] == 299


def test_a_queued_workload_bundles_kueue_s_view(fake_cluster):
    fake = fake_cluster
    fake.install_kueue()
    gke.elastix(fake, *gke.CREATE, *QUEUE, "--env", f"API_KEY={SECRET}")
    fake.kueue_workload("demo", PENDING)
    text = gke.elastix(fake, "workload", "inspect", "demo", "-o", "yaml").stdout
    assert SECRET not in text
    b = yaml.safe_load(text)
    q = b["kueue"]
    assert q["queue"] == "multislice-queue" and q["workload"].startswith("jobset-demo-")
    assert q["conditions"][0]["reason"] == "Pending" and q["position"] == 0
    assert b["pods"] == [] and b["workload"]["queue"]["quota_reserved"] is False
    assert b["measurement"] is None and b["head_log"] is None  # no pod yet
    assert [x.split(":")[0] for x in b["unreadable"]] == ["head log", "measurement"]


def test_bad_names_are_one_line(fake_cluster, tmp_path):
    fake = fake_cluster
    p = gke.elastix(fake, "workload", "inspect", "nothing-here", check=False)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "nothing-here" in p.stderr.strip().splitlines()[0]
    gke.elastix(fake, *gke.CREATE)
    p = gke.elastix(fake, "workload", "inspect", "demo", "--output-file", str(tmp_path),
                    check=False)
    assert p.returncode == 2 and "is a directory" in p.stderr
