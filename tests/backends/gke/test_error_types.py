"""The Translator raises a typed error for each outcome callers branch on (not matched text):
scripted answers from pytest-httpserver, read through the real client and the GKE backend."""

from __future__ import annotations

import json
import time

import pytest
from werkzeug import Response

from elastix.backends.base import LogOptions
from elastix.backends.gke.backend import GKEBackend
from elastix.clients.kube import ApiTimeout, ApiUnavailable, ContainerWaiting, StreamCut
from elastix.errors import BackendError, NotFoundError

JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
# the least a JobSet needs to be a Pathways workload elastix reads (backends/gke/foreign.py)
PATHWAYS_JOBSET = {"metadata": {"name": "demo"}, "spec": {"replicatedJobs": [
    {"name": "pathways-head"}, {"name": "worker"}]}}
PODS = "/api/v1/namespaces/default/pods"
POD = "demo-pathways-head-0-0-abcde"


@pytest.fixture
def backend(httpserver):
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = httpserver.url_for("").rstrip("/")
    with client.ApiClient(cfg) as api:
        yield GKEBackend(api, "default", "context fake")


def _head_pod(httpserver):
    pod = {"metadata": {"name": POD, "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"containers": [{"name": "jax-tpu"}]}, "status": {"phase": "Running"}}
    httpserver.expect_request(f"{JOBSETS}/demo").respond_with_json(PATHWAYS_JOBSET)
    httpserver.expect_request(PODS).respond_with_json(
        {"metadata": {"resourceVersion": "5"}, "items": [pod]})


def test_no_jobset_api_is_api_unavailable(httpserver, backend):
    httpserver.expect_request(f"{JOBSETS}/demo").respond_with_data(
        "404 page not found\n", status=404, content_type="text/plain")
    with pytest.raises(ApiUnavailable) as err:
        backend.get_jobset("demo")
    assert isinstance(err.value, NotFoundError)  # the type raised before: same exit code
    assert "JobSet API is not available" in err.value.message
    with pytest.raises(ApiUnavailable):
        backend.exists("demo")  # not "no such workload"


def test_slow_answer_is_api_timeout(httpserver, backend, monkeypatch):
    from elastix.backends.gke import api as gke  # where the request bound lives

    monkeypatch.setattr(gke, "TIMEOUT", (2.0, 0.3))

    def slow(_request):
        time.sleep(1.0)
        return Response("{}", content_type="application/json")

    httpserver.expect_request(f"{JOBSETS}/demo").respond_with_handler(slow)
    with pytest.raises(ApiTimeout) as err:
        backend.get_jobset("demo")
    assert isinstance(err.value, BackendError) and err.value.message.startswith("timed out")


def test_stream_ending_early_is_stream_cut(httpserver, backend):
    _head_pod(httpserver)
    # Content-Length promises more than is sent: the connection ends mid-stream.
    httpserver.expect_request(f"{PODS}/{POD}/log").respond_with_response(Response(
        iter([b"line 1\n"]), headers={"Content-Length": "1000"}, content_type="text/plain"))
    lines = []
    with pytest.raises(StreamCut) as err:
        for event in backend.logs("demo", LogOptions()):
            lines.append(event.text)
    assert lines == ["line 1"]
    assert isinstance(err.value, BackendError) and "was cut" in err.value.message


def test_log_of_unstarted_container_is_container_waiting(httpserver, backend):
    _head_pod(httpserver)
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 400,
              "reason": "BadRequest",
              "message": f'container "jax-tpu" in pod "{POD}" is waiting to start: '
                         "ContainerCreating"}
    httpserver.expect_request(f"{PODS}/{POD}/log").respond_with_data(
        json.dumps(status), status=400, content_type="application/json")
    with pytest.raises(ContainerWaiting) as err:
        list(backend.logs("demo", LogOptions()))
    assert isinstance(err.value, BackendError)
    assert err.value.message == (f'container "jax-tpu" in pod "{POD}" is waiting to start: '
                                 f"ContainerCreating (while reading the log of pod {POD})")
