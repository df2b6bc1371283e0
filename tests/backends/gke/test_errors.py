"""Cluster errors become one line with a hint (no traceback): exact responses from a scripted
HTTP server (pytest-httpserver), the real CLI entry point in-process."""

from __future__ import annotations

import json
import re
import socket
import time

import pytest
from fake_cluster import write_kubeconfig
from werkzeug import Response

from elastix.main import main

JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
# the least a JobSet needs to be a Pathways workload elastix reads (backends/gke/foreign.py)
PATHWAYS_JOBSET = {"metadata": {"name": "demo"}, "spec": {"replicatedJobs": [
    {"name": "pathways-head"}, {"name": "worker"}]}}


def status(code: int, reason: str, message: str, details: dict | None = None) -> Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
            "reason": reason, "code": code, **({"details": details} if details else {})}
    return Response(json.dumps(body), status=code, content_type="application/json")


@pytest.fixture
def run(httpserver, tmp_path, capsys, monkeypatch):
    kc = write_kubeconfig(tmp_path / "kc", httpserver.url_for("/").rstrip("/"))
    monkeypatch.setenv("KUBECONFIG", str(kc))
    monkeypatch.delenv("ELASTIX_BACKEND", raising=False)

    def _run(*args: str) -> tuple[int, str]:
        rc = main(list(args))
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        _run.out = captured.out
        return rc, captured.err

    return _run


def test_unreachable_api_server(tmp_path, capsys, monkeypatch):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kc",
                                                           f"http://127.0.0.1:{port}")))
    assert main(["workload", "list"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the Kubernetes API server while listing workloads (context fake" in err
    assert "hint:" in err and "--context" in err and "Traceback" not in err


def test_401_names_the_credential(httpserver, run):
    httpserver.expect_request(JOBSETS).respond_with_response(
        status(401, "Unauthorized", "Unauthorized"))
    rc, err = run("workload", "list")
    assert rc == 1
    assert "rejected the credentials of context fake" in err and "401" in err
    assert "hint:" in err


def test_403_names_the_permission(httpserver, run):
    msg = ('jobsets.jobset.x-k8s.io is forbidden: User "dev@example.com" cannot list resource '
           '"jobsets" in API group "jobset.x-k8s.io" in the namespace "default"')
    httpserver.expect_request(JOBSETS).respond_with_response(status(403, "Forbidden", msg))
    rc, err = run("workload", "list")
    assert rc == 1
    assert "permission denied while listing workloads" in err and 'cannot list resource' in err
    assert "RBAC" in err


def test_404_workload_missing(httpserver, run):
    httpserver.expect_request(f"{JOBSETS}/nope").respond_with_response(status(
        404, "NotFound", 'jobsets.jobset.x-k8s.io "nope" not found',
        {"name": "nope", "group": "jobset.x-k8s.io", "kind": "jobsets"}))
    rc, err = run("workload", "status", "nope")
    assert rc == 1
    assert "JobSet 'nope' not found in namespace default: no workload of that name" in err
    assert "elastix workload list --all -n default" in err


def test_404_jobset_crd_missing(httpserver, run):
    httpserver.expect_request(JOBSETS).respond_with_data("404 page not found\n", status=404,
                                                         content_type="text/plain")
    rc, err = run("workload", "list")
    assert rc == 1
    assert "JobSet CRD is not installed" in err and "jobset/releases" in err


def _head_access(httpserver) -> None:
    """Answer the server-side applies of the head's ServiceAccount, Role and RoleBinding."""
    httpserver.expect_request(re.compile(r".*/(serviceaccounts|roles|rolebindings)/demo-head"),
                              method="PATCH").respond_with_json({}, status=200)


def _posts(httpserver) -> list:
    return [req for req, _ in httpserver.log if req.method == "POST"]


def test_409_on_create_offers_replace(httpserver, run):
    _head_access(httpserver)
    httpserver.expect_request(JOBSETS, method="POST").respond_with_response(status(
        409, "AlreadyExists", 'jobsets.jobset.x-k8s.io "demo" already exists',
        {"name": "demo", "group": "jobset.x-k8s.io", "kind": "jobsets"}))
    # --skip-preflight: this server scripts only the create (preflight: test_preflight.py).
    rc, err = run("workload", "create", "demo", "--tpu-type", "v5litepod-16",
                  "--docker-image", "img:1", "--command", "true", "--backend", "gke",
                  "--skip-preflight")
    assert rc == 2  # bad input, as every other usage error
    assert "workload 'demo' already exists in namespace default" in err and "--replace" in err
    [req] = _posts(httpserver)
    assert req.args.get("fieldValidation") == "Strict" and "dryRun" not in req.args


def test_server_dry_run_sends_dry_run_all(httpserver, run):
    _head_access(httpserver)
    httpserver.expect_request(JOBSETS, method="POST",
                              query_string={"dryRun": "All", "fieldValidation": "Strict"}
                              ).respond_with_json({"kind": "JobSet"}, status=201)
    rc, err = run("workload", "create", "demo", "--tpu-type", "v5litepod-16",
                  "--docker-image", "img:1", "--command", "true", "--backend", "gke",
                  "--dry-run=server", "--skip-preflight")
    assert rc == 0, err
    # This server answers 500 to Kueue's discovery: the default-queue lookup says so in one
    # line and the create goes on (the platform would take it).
    assert "could not look for Kueue's LocalQueue multislice-queue" in " ".join(err.split())
    sent = json.loads(_posts(httpserver)[0].get_data())
    assert sent["kind"] == "JobSet" and sent["metadata"]["name"] == "demo"
    patches = [req for req, _ in httpserver.log if req.method == "PATCH"]
    assert len(patches) == 3 and all(r.args.get("dryRun") == "All" for r in patches)


def test_5xx(httpserver, run):
    # 503 is "unavailable", retried (test_503_says_unavailable, test_retries.py); other 5xx not.
    httpserver.expect_request(JOBSETS).respond_with_response(
        status(500, "InternalError", "etcdserver: leader changed"))
    rc, err = run("workload", "list")
    assert rc == 1 and len(httpserver.log) == 1
    assert "API server failed (500) while listing workloads: etcdserver: leader changed" in err
    assert "try again" in err


def test_timeout(httpserver, run, monkeypatch):
    from elastix.backends.gke import api as gke  # where the request bound lives

    monkeypatch.setattr(gke, "TIMEOUT", (2.0, 0.3))  # a short read timeout, to keep the test fast

    def slow(_request):
        time.sleep(1.0)
        return Response("{}", content_type="application/json")

    httpserver.expect_request(JOBSETS).respond_with_handler(slow)
    rc, err = run("workload", "list")
    assert rc == 1
    assert "timed out listing workloads" in err


def test_log_stream_cut_midway(httpserver, run):
    pod = {"metadata": {"name": "demo-pathways-head-0-0-abcde", "uid": "u1",
                        "creationTimestamp": "2026-01-01T00:00:00Z",
                        "labels": {"jobset.sigs.k8s.io/replicatedjob-name": "pathways-head"}},
           "spec": {"containers": [{"name": "jax-tpu"}]}, "status": {"phase": "Running"}}
    httpserver.expect_request(f"{JOBSETS}/demo").respond_with_json(PATHWAYS_JOBSET)
    httpserver.expect_request("/api/v1/namespaces/default/pods").respond_with_json(
        {"metadata": {"resourceVersion": "5"}, "items": [pod]})
    # Content-Length promises more than is sent (a streamed body keeps the header as given):
    # the connection ends mid-stream.
    httpserver.expect_request("/api/v1/namespaces/default/pods/demo-pathways-head-0-0-abcde/log"
                              ).respond_with_response(Response(
                                  iter([b"line 1\n", b"line 2\n"]),
                                  headers={"Content-Length": "1000"}, content_type="text/plain"))
    rc, err = run("logs", "demo")
    assert rc == 1
    assert run.out == "line 1\nline 2\n"  # what arrived before the cut is shown
    assert "connection was cut while reading the log of pod demo-pathways-head-0-0-abcde" in err


def test_bad_kubeconfig_context(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:1")))
    assert main(["workload", "list", "--context", "nope"]) == 2
    err = capsys.readouterr().err
    assert "error: --context 'nope' is not in kubeconfig" in err and "(its contexts: " in err
    assert "hint: pass --context with one of them" in err and "Traceback" not in err


def test_429_says_throttled_with_its_retry_after_never_no_crd(httpserver, run):
    """One 429 was reported as "the JobSet CRD is not installed?" (issue 34)."""
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429,
            "message": "Too many requests, please try again later.", "reason": "TooManyRequests",
            "details": {"retryAfterSeconds": 120}}
    httpserver.expect_request(JOBSETS).respond_with_response(Response(
        json.dumps(body), status=429, content_type="application/json",
        headers={"Retry-After": "120"}))
    rc, err = run("workload", "list")
    assert rc == 1 and "CRD" not in err
    assert "the Kubernetes API server is throttling requests (429 Too Many Requests) while " \
           "listing workloads" in err
    assert "it asked to retry after 120 s (longer than elastix waits)" in err
    assert len(httpserver.log) == 1  # 120 s is more than the bound: not waited for


def test_503_says_unavailable(httpserver, run):
    resp = status(503, "ServiceUnavailable", "the server is currently unable to handle the request")
    resp.headers["Retry-After"] = "300"  # longer than the bound: answered at once
    httpserver.expect_request(f"{JOBSETS}/demo").respond_with_response(resp)
    rc, err = run("workload", "status", "demo")
    assert rc == 1 and "CRD" not in err
    assert "the Kubernetes API server is unavailable (503 Service Unavailable) while reading " \
           "workload demo" in err and "unable to handle the request" in err
    assert "retry after 300 s" in err and "try again in a few minutes" in err
