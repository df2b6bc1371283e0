"""Kueue install and queues: ``cluster create --kueue`` (dry run and for real) against the fake
API server over HTTP, through the official client; ``cluster create`` against httpserver for GKE.
"""

from __future__ import annotations

import json

import pytest
import yaml
from kueue_release import kueue_manifest

from elastix.clients.kube import Http
from elastix.errors import UsageError
from elastix.main import main
from elastix.provision import cluster, kueue_install

BASE = "/v1/projects/my-proj-1/locations/us-central1-a"


def _write(path, docs):
    path.write_text(yaml.safe_dump_all(docs))
    return path


def _cfg():
    return cluster.validate("my-proj-1", "us-central1-a", "elastic", tpu_type="v5litepod-16",
                            num_slices=2)


def test_objects_follow_xpk_shapes():
    by_kind = {(o["kind"], o["metadata"]["name"]): o for o in kueue_install.objects(_cfg())}
    flavor = by_kind[("ResourceFlavor", "2xv5litepod-16")]["spec"]["nodeLabels"]
    assert flavor == {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
                      "cloud.google.com/gke-tpu-topology": "4x4"}
    assert by_kind[("ResourceFlavor", "cpu-user")]["spec"]["nodeLabels"] == {
        "cloud.google.com/gke-nodepool": "cpu-np"}
    groups = by_kind[("ClusterQueue", "cluster-queue")]["spec"]["resourceGroups"]
    assert groups[0]["flavors"][0]["resources"] == [{"name": "google.com/tpu",
                                                     "nominalQuota": 32}]
    # n2-standard-64: 64 vCPUs, 256 GiB; the head pool autoscales to 20 nodes
    assert groups[1]["flavors"][0]["resources"] == [{"name": "cpu", "nominalQuota": 1280},
                                                    {"name": "memory", "nominalQuota": "5120Gi"}]
    lq = by_kind[("LocalQueue", "multislice-queue")]
    assert lq["metadata"]["namespace"] == "default"
    assert lq["spec"] == {"clusterQueue": "cluster-queue"}
    assert [n for (k, n) in by_kind if k == "PriorityClass"] == [
        "very-low", "low", "medium", "high", "very-high"]


def test_dry_run_lists_the_install_and_the_three_objects(capsys, monkeypatch):
    monkeypatch.setenv("ELASTIX_GKE_API_ENDPOINT", "http://127.0.0.1:9")  # nothing listens
    assert main(["cluster", "create", "elastic", "--project", "my-proj-1", "--zone",
                 "us-central1-a", "--tpu-type", "v5litepod-16", "--num-slices", "2", "--kueue",
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"GET {kueue_install.RELEASE_URL}\n" in out
    assert f"GET {kueue_install.CRD_PATH} (install Kueue {kueue_install.KUEUE_VERSION}" in out
    q = "?fieldManager=elastix&force=true"
    for path in ("/apis/kueue.x-k8s.io/v1beta2/resourceflavors/2xv5litepod-16",
                 "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue",
                 "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/localqueues/multislice-queue",
                 "/apis/scheduling.k8s.io/v1/priorityclasses/medium"):
        assert f"PATCH {path}{q}" in out
    assert '"nominalQuota": 32' in out


def test_dry_run_of_a_manifest_file_lists_each_object(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("ELASTIX_GKE_API_ENDPOINT", "http://127.0.0.1:9")
    manifest = _write(tmp_path / "k.yaml", kueue_manifest())
    assert main(["cluster", "create", "elastic", "--project", "my-proj-1", "--zone",
                 "us-central1-a", "--tpu-type", "v5litepod-16", "--kueue", "--kueue-manifest",
                 str(manifest), "--dry-run"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if "kueue" in ln and ln.startswith("PATCH")]
    # dependency order: the namespace and CRDs first, the webhooks after the APIService
    assert "/namespaces/kueue-system?" in lines[0]
    assert "apiservices" in lines[-6] and "mutatingwebhookconfigurations" in lines[-5]


def test_not_a_kueue_manifest(tmp_path):
    bad = _write(tmp_path / "k.yaml", [d for d in kueue_manifest() if d["kind"] != "Deployment"])
    with pytest.raises(UsageError, match="no Deployment kueue-controller-manager"):
        kueue_install.read_manifest(str(bad))


def test_install_then_queues_on_the_fake(k8s_api, tmp_path):
    manifest = _write(tmp_path / "k.yaml", kueue_manifest())
    assert not kueue_install.status(k8s_api, "fake").installed
    lines: list[str] = []
    st = kueue_install.install(k8s_api, "fake", _cfg(), lines.append, str(manifest))
    assert st.version == kueue_install.KUEUE_VERSION
    http = Http(k8s_api)
    lq = http.request("GET", "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/localqueues/"
                      "multislice-queue")
    assert lq["spec"]["clusterQueue"] == "cluster-queue"
    # served as v1beta1 too (0.19 keeps it)
    cq = http.request("GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/cluster-queue")
    assert cq["spec"]["resourceGroups"][0]["coveredResources"] == ["google.com/tpu"]
    assert http.request("GET", "/apis/scheduling.k8s.io/v1/priorityclasses/high")["value"] == 750
    lines.clear()  # a second run keeps Kueue and re-applies the queues (idempotent)
    kueue_install.install(k8s_api, "fake", _cfg(), lines.append, str(tmp_path / "never.yaml"))
    assert any(ln.startswith(f"Kueue {kueue_install.KUEUE_VERSION} is already installed; "
                             "its settings are kept: WaitForPodsReady on: timeout 8760h, "
                             "recoveryTimeout off") for ln in lines)


def test_cluster_create_applies_queues_when_kueue_is_found(httpserver, monkeypatch, k8s_api,
                                                           tmp_path):
    """No --kueue: a cluster with Kueue gets its queues for these pools; one without is left
    alone (no Kueue object requested)."""
    from google.auth.credentials import AnonymousCredentials

    from elastix.clients import gke

    monkeypatch.setenv(gke.ENDPOINT_ENV, httpserver.url_for("").rstrip("/"))
    client = gke.cluster_manager(AnonymousCredentials())
    existing = {"name": "elastic", "nodePools": [{"name": "cpu-np"}] + [
        {"name": f"tpu-slice-{i}"} for i in range(2)]}
    httpserver.expect_request(f"{BASE}/clusters/elastic", method="GET").respond_with_data(
        json.dumps(existing), content_type="application/json")
    import jobset_manifest

    from elastix.provision import jobset_install

    js = jobset_manifest.write(tmp_path / "m.yaml", jobset_manifest.manifest())
    lines: list[str] = []
    cluster.create(_cfg(), client, lines.append, kube=lambda: (k8s_api, "fake"),
                   jobset_manifest=str(js), kueue=None)
    assert not any("Kueue" in ln for ln in lines)
    jobset_install.apply(k8s_api, "fake", kueue_install.plan(kueue_manifest()))
    cluster.create(_cfg(), client, lines.append, kube=lambda: (k8s_api, "fake"),
                   jobset_manifest=str(js), kueue=None)
    assert any("LocalQueue multislice-queue" in ln for ln in lines)


@pytest.mark.parametrize("version, config, rec", [
    ("v0.14.3", "v1beta1", None), ("v0.15.8", "v1beta2", None), ("v0.16.0", "v1beta2", "0s"),
    (kueue_install.KUEUE_VERSION, "v1beta2", "0s")])
def test_settings_are_written_in_the_releases_own_meaning(version, config, rec):
    """recoveryTimeout 0s is "off" from v0.16.0 only (before, it evicts at once: unset is off
    there); blockAdmission is false whatever the config's API version defaults it to."""
    docs = kueue_manifest(version, config_version=config)
    docs[-1]["data"]["controller_manager_config.yaml"] += (
        "waitForPodsReady:\n  recoveryTimeout: 3m\n")  # an old value is not kept either
    [cm] = [d for d in kueue_install.configure(docs) if d["kind"] == "ConfigMap"]
    block = yaml.safe_load(cm["data"]["controller_manager_config.yaml"])["waitForPodsReady"]
    assert block.get("recoveryTimeout") == rec
    assert block["blockAdmission"] is False and block["timeout"] == "8760h"
    assert block.get("enable") is (True if config == "v1beta1" else None)
    line = kueue_install.settings_line(kueue_install.release_version(docs))
    assert ("recoveryTimeout 0s (off)" in line) is (rec == "0s")
