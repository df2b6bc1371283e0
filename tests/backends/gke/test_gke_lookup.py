"""``--cluster/--project/--location``: the GKE API (google-cloud-container, REST transport) served
by a local HTTP server, a token from a local OAuth endpoint, then the Kubernetes API over TLS
with the cluster CA it returned. No gcloud, no kubeconfig."""

from __future__ import annotations

import base64
import json

import pytest
from fake_cluster import CREATE, self_signed, start_fake, stop, wait_for
from werkzeug import Response

from elastix.main import main

CLUSTER_PATH = "/v1/projects/proj/locations/us-central2-b/clusters/tpu"


@pytest.fixture
def gke_api(httpserver, tmp_path, monkeypatch):
    """Application-default credentials whose token endpoint is the local server."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    # A service-account key: unlike authorized_user files, it keeps its own token_uri.
    adc = tmp_path / "adc.json"
    adc.write_text(json.dumps({"type": "service_account", "project_id": "proj",
                               "private_key_id": "k1", "private_key": pem,
                               "client_email": "elastix-test@proj.iam.gserviceaccount.com",
                               "client_id": "1", "token_uri": httpserver.url_for("/token")}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc))
    monkeypatch.setenv("ELASTIX_GKE_API_ENDPOINT", httpserver.url_for("/").rstrip("/"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent-kubeconfig"))
    monkeypatch.delenv("ELASTIX_BACKEND", raising=False)
    httpserver.expect_request("/token", method="POST").respond_with_json(
        {"access_token": "ya29.local-token", "expires_in": 3600, "token_type": "Bearer"})
    return httpserver


ARGS = ["--cluster", "tpu", "--project", "proj", "--location", "us-central2-b"]


def test_cluster_lookup_then_kubernetes_over_tls(gke_api, tmp_path, capsys):
    tls = tmp_path / "tls"
    tls.mkdir()
    pem = self_signed(tls)
    fake = start_fake(tmp_path, {"log_interval": 0.1}, extra=["--tls-dir", str(tls),
                                                                 "--require-token",
                                                                 "ya29.local-token"])
    try:
        gke_api.expect_request(CLUSTER_PATH, method="GET").respond_with_json({
            "name": "tpu", "endpoint": f"127.0.0.1:{fake.port}", "status": "RUNNING",
            "masterAuth": {"clusterCaCertificate": base64.b64encode(pem).decode()}})
        assert main([*CREATE, *ARGS]) == 0, capsys.readouterr().err
        assert main(["workload", "list", "-o", "json", *ARGS]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert [w["name"] for w in listed] == ["demo"]
        paths = [req.path for req, _ in gke_api.log]
        assert paths.count("/token") >= 1 and CLUSTER_PATH in paths
        cluster_req = next(req for req, _ in gke_api.log if req.path == CLUSTER_PATH)
        assert cluster_req.headers["Authorization"].startswith("Bearer ")  # a signed JWT
        wait_for(lambda: main(["workload", "delete", "demo", "--wait", *ARGS]) == 0,
                 what="delete")
    finally:
        stop(fake)


def test_cluster_not_found(gke_api, capsys):
    gke_api.expect_request(CLUSTER_PATH).respond_with_response(Response(json.dumps(
        {"error": {"code": 404, "message": "Not found: cluster tpu.", "status": "NOT_FOUND"}}),
        status=404, content_type="application/json"))
    assert main(["workload", "list", *ARGS]) == 1
    err = capsys.readouterr().err
    assert "no GKE cluster 'tpu' in project 'proj', location 'us-central2-b'" in err
    assert "hint:" in err and "Traceback" not in err


def test_cluster_permission_denied(gke_api, capsys):
    gke_api.expect_request(CLUSTER_PATH).respond_with_response(Response(json.dumps(
        {"error": {"code": 403, "message": "Required 'container.clusters.get' permission",
                   "status": "PERMISSION_DENIED"}}), status=403,
        content_type="application/json"))
    assert main(["workload", "list", *ARGS]) == 1
    err = capsys.readouterr().err
    assert "permission denied reading cluster projects/proj/locations/us-central2-b/clusters/tpu" \
        in err
    assert "container.clusters.get" in err


def test_no_application_default_credentials(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    assert main(["workload", "list", *ARGS]) == 2  # bad input: the variable names no file
    err = capsys.readouterr().err
    assert "GOOGLE_APPLICATION_CREDENTIALS" in err and "application-default" in err
    assert "Traceback" not in err
