"""Kueue on GKE: ``workload create --queue/--priority`` checks them first, ``workload status``
explains a queued workload (its Workload's conditions, the admission check holding it, its
position from the visibility API, or that the API is not served).

Real parts: the fake API server process with its Kueue (``tests/fakes/k8s_kueue.py``), the real
CLI as a subprocess, the official kubernetes client over HTTP.
"""

from __future__ import annotations

import json

from fake_cluster import CREATE, elastix, wait_for

QUEUE = ["--queue", "multislice-queue"]
PENDING = {"conditions": [{
    "type": "QuotaReserved", "status": "False", "reason": "Pending",
    "lastTransitionTime": "2026-12-03T08:00:00Z",
    "message": "couldn't assign flavors to pod set worker: insufficient unused quota for "
               "google.com/tpu in flavor 2xv5litepod-16, 32 more needed"}]}
CHECKED = {"conditions": [
    {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
     "lastTransitionTime": "2026-12-03T08:01:00Z", "message": "Quota reserved in ClusterQueue "
     "cluster-queue"},
    {"type": "Admitted", "status": "False", "reason": "NoChecks",
     "lastTransitionTime": "2026-12-03T08:01:00Z",
     "message": "The workload has not all checks ready"}],
    "admissionChecks": [{"name": "dws-prov", "state": "Pending",
                         "lastTransitionTime": "2026-12-03T08:01:00Z",
                         "message": "Waiting for resources. Currently there are not enough "
                                    "resources available to fulfill the request."}]}


def _jobsets(fake) -> list[str]:
    return [j["metadata"]["name"] for j in
            fake.get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets")["items"]]


def _create(fake, name: str, *extra: str):
    args = [a if a != "demo" else name for a in CREATE]
    return elastix(fake, *args, *QUEUE, *extra)


def test_a_queued_workload_shows_its_position_then_its_admission_check(fake_cluster):
    fake = fake_cluster
    fake.install_kueue()
    _create(fake, "first")
    _create(fake, "demo", "--priority", "medium")
    js = fake.get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/demo")
    assert js["spec"]["suspend"] is True  # Kueue's webhook
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "multislice-queue"
    fake.kueue_workload("demo", PENDING)

    st = json.loads(elastix(fake, "workload", "status", "demo", "-o", "json").stdout)
    q = st["queue"]
    assert q["queue"] == "multislice-queue" and q["workload"].startswith("jobset-demo-")
    assert (q["quota_reserved"], q["admitted"]) == (False, None)
    assert (q["position"], q["cluster_position"]) == (1, 1)  # second after "first"
    assert "insufficient unused quota for google.com/tpu" in q["message"]
    assert st["reasons"][0].startswith(f"Kueue Workload {q['workload']} in LocalQueue "
                                       "multislice-queue, position 2 (2 in its ClusterQueue): "
                                       "no quota reserved: couldn't assign flavors")
    table = elastix(fake, "workload", "status", "demo").stdout
    assert "Kueue: LocalQueue multislice-queue" in table and "position 2" in table
    assert fake.pods("jobset.sigs.k8s.io/jobset-name=demo") == []  # suspended: no pods

    fake.kueue_workload("demo", CHECKED)
    st = json.loads(elastix(fake, "workload", "status", "demo", "-o", "json").stdout)
    assert st["queue"]["pending_checks"] == [{"name": "dws-prov", "state": "Pending",
                                              "message": CHECKED["admissionChecks"][0]["message"]}]
    assert "admission check dws-prov Pending: Waiting for resources." in "\n".join(st["reasons"])
    assert st["queue"]["position"] is None and st["queue"]["visibility"] is None  # has quota
    table = elastix(fake, "workload", "status", "demo").stdout
    assert "quota reserved, admission checks pending" in table
    assert "admission check dws-prov Pending" in table

    # admitted: Kueue resumes the JobSet, its pods come, the queue is no reason any more
    fake.kueue_workload("demo", {"conditions": CHECKED["conditions"][:1] + [
        {"type": "Admitted", "status": "True", "reason": "Admitted",
         "lastTransitionTime": "2026-12-03T08:02:00Z", "message": "The workload is admitted"}],
        "admissionChecks": [{**CHECKED["admissionChecks"][0], "state": "Ready"}]})
    wait_for(lambda: fake.pods("jobset.sigs.k8s.io/jobset-name=demo"), what="pods on resume")
    st = json.loads(elastix(fake, "workload", "status", "demo", "-o", "json").stdout)
    assert st["queue"] is None
    assert not any("Kueue" in r for r in st["reasons"])


def test_visibility_api_not_served_is_one_line_and_the_state_still_shows(fake_cluster):
    fake = fake_cluster
    fake.install_kueue(visibility=False)
    _create(fake, "demo")
    fake.kueue_workload("demo", PENDING)
    st = json.loads(elastix(fake, "workload", "status", "demo", "-o", "json").stdout)
    assert st["queue"]["position"] is None
    assert st["queue"]["quota_reserved"] is False
    lines = [r for r in st["reasons"] if "visibility" in r]
    assert lines == ["queue position not shown: the cluster does not serve Kueue's visibility "
                     "API (visibility.kueue.x-k8s.io/v1beta1)"]
    table = elastix(fake, "workload", "status", "demo").stdout
    assert "no quota reserved: couldn't assign flavors" in table
    assert "queue position not shown" in table


def test_missing_queue_or_priority_exits_2_and_creates_nothing(fake_cluster):
    fake = fake_cluster
    fake.install_kueue()
    fake.requests(clear=True)
    for extra, word in ((["--queue", "nope"], "no Kueue LocalQueue 'nope'"),
                        ([*QUEUE, "--priority", "urgent"], "no PriorityClass 'urgent'")):
        args = [a for a in CREATE]
        proc = elastix(fake, *args, *extra, check=False)
        assert proc.returncode == 2, proc.stderr
        assert word in proc.stderr
    assert _jobsets(fake) == []
    assert fake.get("/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads")["items"] == []
    mutating = [r for r in fake.requests() if r["method"] not in ("GET",)]
    assert mutating == []
    assert fake.head_access() == {"serviceaccounts": [], "roles": [], "rolebindings": []}


def test_a_queue_without_kueue_installed_is_a_notice(fake_cluster):
    """Without Kueue the label is inert: the JobSet runs at once, and the user is told."""
    proc = elastix(fake_cluster, *CREATE, *QUEUE)
    assert "Kueue is not installed: the label kueue.x-k8s.io/queue-name=multislice-queue " \
        "has no effect" in proc.stdout + proc.stderr
    assert _jobsets(fake_cluster) == ["demo"]


def test_reasons_without_a_workload_and_for_a_retrying_check():
    from elastix.backends.gke import kueue

    none = kueue.queue_status("q", None, None, None)
    assert kueue.reasons(none) == ["queued in LocalQueue q: Kueue has no Workload for it yet "
                                   "(is Kueue running, and does the LocalQueue exist?)"]
    wl = {"metadata": {"name": "jobset-demo-abcde"}, "status": {"admissionChecks": [
        {"name": "dws-prov", "state": "Retry", "message": "ProvisioningRequest failed"},
        {"name": "other", "state": "Ready", "message": ""}]}}
    q = kueue.queue_status("q", wl, [], None)
    assert q.visibility == "not in the queue's pending list (being admitted, or just requeued)"
    assert kueue.reasons(q) == [
        "Kueue Workload jobset-demo-abcde in LocalQueue q: no quota reserved",
        "admission check dws-prov Retry: ProvisioningRequest failed",
        "queue position not shown: not in the queue's pending list (being admitted, or just "
        "requeued)"]
