"""A 404 says what was not found: the kind, name and namespace the API server named, or the
path asked for; "the JobSet CRD is not installed" only when JobSets were asked for and no
object was named. The fake API server, behind the fault proxy for answers it would not give."""

from __future__ import annotations

import pytest
from fake_cluster import wait_for
from fault_proxy import Rule, fault_proxy

from elastix.backends.base import LogOptions
from elastix.backends.gke.backend import GKEBackend
from elastix.clients.kube import ApiUnavailable
from elastix.errors import NotFoundError
from elastix.workload import render
from elastix.workload.spec import build_spec

LOG = r"/pods/[^/]+/log"


def backend(url: str) -> GKEBackend:
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = url
    return GKEBackend(client.ApiClient(cfg), "default", f"fake ({url})")


def running(b: GKEBackend) -> None:
    b.submit(render.render(build_spec(None, {
        "name": "demo", "tpu_type": "v5litepod-16", "num_slices": 1, "docker_image": "img:1",
        "command": "python train.py", "project": "p", "cluster": "c", "location": "l"})),
        preflight=False)
    wait_for(lambda: b.status("demo").state == "Running", what="running")


def test_a_missing_workload_names_the_jobset_and_namespace(fake_cluster):
    with pytest.raises(NotFoundError) as err:
        backend(fake_cluster.url).status("nope")
    assert not isinstance(err.value, ApiUnavailable)
    assert err.value.message == ("JobSet 'nope' not found in namespace default: no workload of "
                                 "that name")
    assert "elastix workload list --all -n default" in err.value.hint


def test_a_pod_gone_under_a_log_read_is_named_a_pod(fake_cluster):
    """The kind comes from the API server's Status (``details.kind``), not from the caller."""
    with fault_proxy(fake_cluster.url) as (url, proxy):
        b = backend(url)
        running(b)
        head = fake_cluster.pods("jobset.sigs.k8s.io/replicatedjob-name=pathways-head")[0]
        pod = head["metadata"]["name"]
        proxy.add(Rule("GET", LOG, "status", status=404, body={
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
            "message": f'pods "{pod}" not found', "code": 404,
            "details": {"name": pod, "kind": "pods"}}))
        with pytest.raises(NotFoundError) as err:
            list(b.logs("demo", LogOptions()))
    assert err.value.message.startswith(f"pod '{pod}' not found in namespace default")
    assert "workload" not in err.value.message.split("(")[0]


def test_a_404_naming_nothing_off_the_jobset_api_is_not_a_missing_crd(fake_cluster):
    """A 404 without the API server's Status (a proxy's) on a pod's log is not "the JobSet CRD
    is not installed?": it names the path it was for."""
    with fault_proxy(fake_cluster.url) as (url, proxy):
        b = backend(url)
        running(b)
        proxy.add(Rule("GET", LOG, "status", status=404))
        with pytest.raises(NotFoundError) as err:
            list(b.logs("demo", LogOptions()))
    assert not isinstance(err.value, ApiUnavailable) and "CRD" not in err.value.message
    assert "/api/v1/namespaces/default/pods/demo-pathways-head-" in err.value.message


def test_a_missing_crd_is_still_said(tmp_path):
    from fake_cluster import start_fake, stop

    fake = start_fake(tmp_path, crd=False)
    try:
        with pytest.raises(ApiUnavailable) as err:
            backend(fake.url).status("demo")
    finally:
        stop(fake)
    assert "the JobSet CRD is not installed" in err.value.message
