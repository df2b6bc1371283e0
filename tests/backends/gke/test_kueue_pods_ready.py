"""Kueue's WaitForPodsReady and an elastic workload missing a slice, and the default queue.

Under the Kueue that ``cluster create --kueue`` installs (``elastix.provision.kueue_install``:
timeout 8760h, recoveryTimeout 0s) a workload missing a slice for 31 minutes stays admitted;
under the release's defaults (v0.19.2: 30m and 30m) it is evicted, requeued and loses every
slice. The fake Kueue (``tests/fakes/k8s_kueue.py``) runs WaitForPodsReady on a fake clock;
``workload create`` runs as the real CLI, without ``--queue``: it is queued in xpk's LocalQueue.
"""

from __future__ import annotations

import pytest
from fake_cluster import CREATE, elastix, wait_for

from elastix.clients.kube import Http
from elastix.provision import cluster, jobset_install, kueue_install

ADMIT = {"conditions": [
    {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""},
    {"type": "Admitted", "status": "True", "reason": "Admitted", "message": ""}]}
WORKERS = "jobset.sigs.k8s.io/jobset-name=demo,jobset.sigs.k8s.io/replicatedjob-name=worker"
TPU = {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice"}


def _api(fake):
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = fake.url
    return client.ApiClient(cfg)


def _install(fake, tmp_path, settings: str) -> None:
    """Kueue from a release-shaped manifest: through ``kueue_install.install`` (elastix's
    settings), or applied as released first (its defaults kept), then the queues."""
    import yaml
    from kueue_release import kueue_manifest

    api = _api(fake)
    path = tmp_path / "kueue.yaml"
    path.write_text(yaml.safe_dump_all(kueue_manifest()))
    if settings == "release":
        jobset_install.apply(api, "fake", jobset_install.plan(kueue_manifest(),
                                                              kueue_install._KINDS))
    cfg = cluster.validate("my-proj-1", "us-central1-a", "c", tpu_type="v5litepod-16",
                           num_slices=2)
    kueue_install.install(api, "fake", cfg, lambda s: None, str(path), interval=0.05)
    api.close()


def _workload(fake) -> dict:
    items = fake.get("/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads")["items"]
    assert len(items) == 1
    return items[0]


def _cond(wl: dict, kind: str) -> dict:
    return next((c for c in wl["status"].get("conditions") or [] if c["type"] == kind), {})


def _ready(pods: list[dict]) -> int:
    return sum(1 for p in pods if not p["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in p["status"].get("conditions") or []))


@pytest.mark.parametrize("settings", ["elastix", "release"])
@pytest.mark.parametrize("missing", ["lost", "never"])
def test_a_slice_missing_for_31_minutes(fake_cluster, tmp_path, settings, missing):
    """``lost``: running, then one host of slice 1 gone (a TPU repair, spot capacity): the
    recovery timeout. ``never``: admitted while no TPU capacity comes (a --flex wait, a run on
    fewer slices): the timeout."""
    fake = fake_cluster
    _install(fake, tmp_path, settings)
    if missing == "never":
        fake.admin("config", {"unschedulable": TPU})
    proc = elastix(fake, *CREATE)
    out = " ".join((proc.stdout + proc.stderr).split())  # the console wraps long notes
    assert "queued in Kueue LocalQueue multislice-queue" in out
    warned = "Kueue's WaitForPodsReady on: timeout 30m, recoveryTimeout 30m" in out
    assert warned == (settings == "release")
    js = fake.get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/demo")
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "multislice-queue"
    assert js["spec"]["suspend"] is True

    fake.kueue_workload("demo", ADMIT)  # admitted at the fake clock's time
    wait_for(lambda: len(fake.pods(WORKERS)) == 8, what="8 worker pods once admitted")
    if missing == "lost":
        wait_for(lambda: _ready(fake.pods(WORKERS)) == 8, what="every worker ready")
        fake.admin("kueue_clock", {"advance": 60})
        assert _cond(_workload(fake), "PodsReady")["status"] == "True"
        fake.admin("config", {"recreate_delay": 3600})  # its replacement does not come
        pod = next(p for p in fake.pods(WORKERS)
                   if p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] == "1")
        api = _api(fake)
        Http(api).request("DELETE", f"/api/v1/namespaces/default/pods/"
                          f"{pod['metadata']['name']}", {"gracePeriodSeconds": 0})
        api.close()
        wait_for(lambda: _ready(fake.pods(WORKERS)) == 7, what="a host of slice 1 gone")
    fake.admin("kueue_clock", {"advance": 0})  # Kueue sees it as it happens
    wl = _workload(fake)
    assert _cond(wl, "PodsReady")["status"] == "False"
    assert _cond(wl, "PodsReady")["reason"] == ("WaitForRecovery" if missing == "lost"
                                                else "WaitForStart")

    fake.admin("kueue_clock", {"advance": 31 * 60})
    wl = _workload(fake)
    js = fake.get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/demo")
    if settings == "elastix":
        assert _cond(wl, "Admitted")["status"] == "True"
        assert _cond(wl, "Evicted") == {}
        assert not js["spec"].get("suspend")
        assert len(fake.pods(WORKERS)) == (7 if missing == "lost" else 8)
    else:
        assert (_cond(wl, "Evicted")["status"], _cond(wl, "Evicted")["reason"]) == (
            "True", "PodsReadyTimeout")
        assert _cond(wl, "Admitted")["status"] == "False"
        assert wl["status"]["requeueState"]["count"] == 1
        assert js["spec"]["suspend"] is True
        wait_for(lambda: fake.pods("jobset.sigs.k8s.io/jobset-name=demo") == [],
                 what="every pod gone: the whole workload evicted")


def test_kueue_without_the_local_queue_is_one_notice(fake_cluster):
    """Kueue served but no multislice-queue in the namespace: the workload bypasses Kueue and
    the user is told in one line how to queue it."""
    fake = fake_cluster
    fake.install_kueue(queues=False)
    proc = elastix(fake, *CREATE)
    text = " ".join((proc.stdout + proc.stderr).split())  # the console wraps long notes
    notes = [n for n in text.split("note: ") if "bypasses Kueue" in n]
    assert len(notes) == 1
    assert "no LocalQueue multislice-queue" in notes[0] and "--queue NAME" in notes[0]
    js = fake.get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/demo")
    assert "kueue.x-k8s.io/queue-name" not in (js["metadata"].get("labels") or {})
    assert not js["spec"].get("suspend")


def test_an_explicit_queue_is_kept(fake_cluster):
    fake = fake_cluster
    fake.install_kueue()
    fake.post("/apis/kueue.x-k8s.io/v1beta2/namespaces/default/localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "team-a"}, "spec": {"clusterQueue": "cluster-queue"}})
    proc = elastix(fake, *CREATE, "--queue", "team-a")
    assert "queued in Kueue LocalQueue multislice-queue" not in proc.stdout + proc.stderr
    js = fake.get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/demo")
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"


# A release before v0.16 reads ``recoveryTimeout: 0s`` as "evict at once" (kueue
# pkg/controller/core/core.go L110-112 @ v0.15.8; v0.16.0's L113 keeps only a positive one), and
# a ``config.kueue.x-k8s.io/v1beta1`` file defaults ``blockAdmission`` to true
# (apis/config/v1beta1/defaults.go L98 @ v0.15.8): one run missing a slice would block every
# admission. (release, its Configuration's API version, the versions its CRDs serve)
OLDER = [("v0.14.3", "v1beta1", ("v1beta1",)), ("v0.15.8", "v1beta2", ("v1beta1", "v1beta2"))]


def _install_release(fake, tmp_path, release: str, config: str, served) -> list[str]:
    """``kueue_install.install`` of a release-shaped manifest of ``release``; its lines."""
    import yaml
    from kueue_release import kueue_manifest

    api = _api(fake)
    path = tmp_path / "kueue.yaml"
    path.write_text(yaml.safe_dump_all(kueue_manifest(release, served, config)))
    cfg = cluster.validate("my-proj-1", "us-central1-a", "c", tpu_type="v5litepod-16",
                           num_slices=2)
    lines: list[str] = []
    kueue_install.install(api, "fake", cfg, lines.append, str(path), interval=0.05)
    api.close()
    return lines


def _workloads(fake, version: str) -> dict[str, dict]:
    items = fake.get(f"/apis/kueue.x-k8s.io/{version}/namespaces/default/workloads")["items"]
    return {w["metadata"]["ownerReferences"][0]["name"]: w for w in items}


@pytest.mark.parametrize("release, config, served", OLDER)
def test_an_older_release_keeps_a_run_missing_a_slice_and_admits_others(
        fake_cluster, tmp_path, release, config, served):
    fake = fake_cluster
    lines = _install_release(fake, tmp_path, release, config, served)
    said = " ".join(lines)
    assert "a run missing a slice stays admitted" in said
    assert "blockAdmission false" in said
    import yaml

    cm = fake.get("/api/v1/namespaces/kueue-system/configmaps/kueue-manager-config")
    block = yaml.safe_load(cm["data"]["controller_manager_config.yaml"])["waitForPodsReady"]
    assert block["blockAdmission"] is False
    assert "recoveryTimeout" not in block  # unset is off before v0.16; 0s evicts at once

    proc = elastix(fake, *CREATE)
    assert "WaitForPodsReady" not in proc.stdout + proc.stderr  # no warning: it is kept
    fake.kueue_workload("demo", ADMIT)
    wait_for(lambda: _ready(fake.pods(WORKERS)) == 8, what="every worker ready")
    fake.admin("kueue_clock", {"advance": 60})
    fake.admin("config", {"recreate_delay": 3600})  # the lost host's replacement never comes
    pod = next(p for p in fake.pods(WORKERS)
               if p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] == "1")
    api = _api(fake)
    Http(api).request("DELETE", f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}",
                      {"gracePeriodSeconds": 0})
    api.close()
    wait_for(lambda: _ready(fake.pods(WORKERS)) == 7, what="a host of slice 1 gone")
    fake.admin("kueue_clock", {"advance": 1})
    wl = _workloads(fake, served[-1])["demo"]
    assert _cond(wl, "PodsReady")["reason"] == "WaitForRecovery"
    assert _cond(wl, "Evicted") == {} and _cond(wl, "Admitted")["status"] == "True"

    # another workload is admitted meanwhile: one run missing a slice blocks no one
    elastix(fake, *[a if a != "demo" else "other" for a in CREATE])
    fake.kueue_workload("other", ADMIT)
    other = _workloads(fake, served[-1])["other"]
    assert _cond(other, "Admitted").get("status") == "True", other.get("status")
    fake.admin("kueue_clock", {"advance": 31 * 60})
    assert _cond(_workloads(fake, served[-1])["demo"], "Evicted") == {}
