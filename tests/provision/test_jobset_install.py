"""JobSet controller install: server-side apply through the official client to the fake API server."""

from __future__ import annotations

import json

import jobset_manifest
import pytest

from elastix.errors import BackendError, UsageError
from elastix.provision import jobset_install


def test_plan_orders_dependencies_first():
    kinds = [s.kind for s in jobset_install.plan(jobset_manifest.manifest())]
    assert kinds[:2] == ["Namespace", "CustomResourceDefinition"]
    assert kinds.index("Service") < kinds.index("Deployment") < kinds.index(
        "ValidatingWebhookConfiguration")
    paths = {s.kind: s.path for s in jobset_install.plan(jobset_manifest.manifest())}
    assert paths["Deployment"] == \
        "/apis/apps/v1/namespaces/jobset-system/deployments/jobset-controller-manager"
    assert paths["CustomResourceDefinition"] == \
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/jobsets.jobset.x-k8s.io"


def test_install_on_empty_cluster_then_status(k8s_api, tmp_path):
    where = "fake"
    before = jobset_install.status(k8s_api, where)
    assert (before.crd_installed, before.version, before.installed) == (False, None, False)

    docs = jobset_install.read_manifest(str(jobset_manifest.write(tmp_path / "m.yaml",
                                                      jobset_manifest.manifest())))
    applied = []
    jobset_install.apply(k8s_api, where, jobset_install.plan(docs), on_step=applied.append)
    assert len(applied) == len(docs)

    ticks = iter(range(1000))
    st = jobset_install.wait_ready(k8s_api, where, timeout=100, clock=lambda: next(ticks),
                       sleep=lambda s: None)
    assert st.installed and st.version == "v0.12.0" and st.ready_replicas >= 1

    # The CRD is really served now: the JobSet API answers (the fake registers applied CRDs).
    from kubernetes import client

    listed = client.CustomObjectsApi(k8s_api).list_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", "default", "jobsets")
    assert listed["items"] == []
    sa = client.CoreV1Api(k8s_api).read_namespaced_service_account(
        "jobset-controller-manager", "jobset-system")
    assert sa.metadata.labels == {"app.kubernetes.io/name": "jobset"}


def test_reapply_is_an_upgrade(k8s_api, tmp_path):
    for version in ("v0.12.0", "v0.12.1"):
        docs = jobset_install.read_manifest(str(jobset_manifest.write(tmp_path / f"{version}.yaml",
                                                          jobset_manifest.manifest(version))))
        jobset_install.apply(k8s_api, "fake", jobset_install.plan(docs))
        assert jobset_install.status(k8s_api, "fake").version == version


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d + [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}],
     "unexpected object Pod"),
    (lambda d: [x for x in d if x["kind"] != "Deployment"], "no Deployment"),
    (lambda d: [x for x in d if x["kind"] != "CustomResourceDefinition"],
     "no CustomResourceDefinition"),
])
def test_manifest_that_is_not_a_jobset_release_is_rejected(tmp_path, mutate, needle):
    path = jobset_manifest.write(tmp_path / "m.yaml", mutate(jobset_manifest.manifest()))
    with pytest.raises(UsageError, match=needle):
        jobset_install.read_manifest(str(path))


def test_manifest_source_rules(tmp_path):
    with pytest.raises(UsageError, match="only https"):
        jobset_install.read_manifest("http://example.com/manifests.yaml")
    with pytest.raises(UsageError, match="cannot read"):
        jobset_install.read_manifest(str(tmp_path / "missing.yaml"))
    (tmp_path / "bad.yaml").write_text("a: [")
    with pytest.raises(UsageError, match="not valid YAML at line 2"):
        jobset_install.read_manifest(str(tmp_path / "bad.yaml"))


@pytest.mark.parametrize(("content", "message"), [
    (b"a: [b\n", "is not valid YAML at line 2: did not find expected ',' or ']'"),
    (b"- 1\n- 2\n", "a document is a list, not a Kubernetes object"),
    (b"just words\n", "a document is a str, not a Kubernetes object"),
    (b"\xff\xfe\n", "is not UTF-8 text (byte 0)"),
    (b"apiVersion: v1\nkind: Namespace\nmetadata: 5\n", "unexpected object Namespace v1"),
    (b"apiVersion: v1\nkind: Namespace\nmetadata: {name: [1]}\n",
     "unexpected object Namespace v1"),
    (b"[" * 5000 + b"]" * 5000, "nest"),  # libyaml: "nesting depth"; PyYAML: RecursionError
])
def test_malformed_manifest_files_are_one_line(tmp_path, content, message):
    """Each of these was an AttributeError, UnicodeDecodeError or a multi-line parser error."""
    path = tmp_path / "m.yaml"
    path.write_bytes(content)
    with pytest.raises(UsageError) as err:
        jobset_install.read_manifest(str(path))
    assert message in err.value.message and "\n" not in err.value.message
    assert err.value.hint


def test_forbidden_apply_is_a_clear_error(httpserver):
    from kubernetes import client

    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
              "code": 403, "message": 'namespaces "jobset-system" is forbidden: User "me" '
                                      'cannot patch resource "namespaces"'}
    httpserver.expect_oneshot_request(
        "/api/v1/namespaces/jobset-system", method="PATCH",
        query_string={"fieldManager": "elastix", "force": "true"},
        headers={"Content-Type": "application/apply-patch+yaml"},
    ).respond_with_data(json.dumps(status), status=403, content_type="application/json")
    cfg = client.Configuration()
    cfg.host = httpserver.url_for("").rstrip("/")
    with client.ApiClient(cfg) as api, pytest.raises(BackendError) as err:
        jobset_install.apply(api, "fake", jobset_install.plan(jobset_manifest.manifest()))
    assert "permission denied while applying Namespace jobset-system" in err.value.message
    assert "cannot patch" in err.value.message and err.value.hint
    sent = httpserver.log[0][0]
    assert json.loads(sent.data)["metadata"]["name"] == "jobset-system"  # the object, verbatim
