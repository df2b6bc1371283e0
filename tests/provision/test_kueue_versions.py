"""Kueue's API versions: ``cluster create`` writes its queues in the newest version the installed
Kueue serves (``v1beta1`` before v0.15.0), in the shape that version's CRD declares, or refuses
in one line, exit 2, before any node pool is made. Against the fake API server over HTTP
through the official client; GKE against httpserver.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from elastix.clients.kube import Http
from elastix.errors import UsageError
from elastix.provision import cluster, jobset_install, kueue_install

SPECS = json.loads((Path(__file__).resolve().parents[1] / "fixtures" /
                    "kueue_queue_specs.json").read_text())["schemas"]
BASE = "/v1/projects/my-proj-1/locations/us-central1-a"


def _cfg():
    return cluster.validate("my-proj-1", "us-central1-a", "elastic", tpu_type="v5litepod-16",
                            num_slices=2)


def _closed(s):
    """Every object with ``properties`` closed (the API server prunes unknown fields), and
    int-or-string as either (``nominalQuota``)."""
    if isinstance(s, list):
        return [_closed(x) for x in s]
    if not isinstance(s, dict):
        return s
    s = {k: ({pk: _closed(pv) for pk, pv in v.items()} if k == "properties"
             else v if k in ("enum", "required") else _closed(v)) for k, v in s.items()}
    if s.pop("x-kubernetes-int-or-string", False):
        s.pop("anyOf", None)
        s.pop("type", None)
        s["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in s and "additionalProperties" not in s:
        s["additionalProperties"] = False
    return s


@pytest.mark.parametrize("version, release", [("v1beta1", "v0.14.3"), ("v1beta2", "v0.19.2")])
def test_objects_fit_each_versions_crd(version, release):
    """The spec of each object against its kind's CRD schema of that version and release
    (``tests/fixtures/kueue_queue_specs.json``): no field unknown, wrongly typed or named."""
    import jsonschema

    objs = kueue_install.objects(_cfg(), api_version=f"kueue.x-k8s.io/{version}")
    kinds = [o for o in objs if o["apiVersion"].startswith("kueue.x-k8s.io/")]
    assert {o["apiVersion"] for o in kinds} == {f"kueue.x-k8s.io/{version}"}
    assert {o["kind"] for o in kinds} == {"ResourceFlavor", "ClusterQueue", "LocalQueue"}
    for o in kinds:
        schema = _closed(copy.deepcopy(SPECS[f"{version}@{release}"][o["kind"]]))
        errors = list(jsonschema.Draft7Validator(schema).iter_errors(o["spec"]))
        assert not errors, (o["kind"], [e.message for e in errors])
    # and a field the other version names differently is caught (ClusterQueue cohort)
    cq = next(o for o in kinds if o["kind"] == "ClusterQueue")
    wrong = {"v1beta1": "cohortName", "v1beta2": "cohort"}[version]
    schema = _closed(copy.deepcopy(SPECS[f"{version}@{release}"]["ClusterQueue"]))
    assert list(jsonschema.Draft7Validator(schema).iter_errors({**cq["spec"], wrong: "x"}))


def test_kueue_0_14_gets_v1beta1_objects(k8s_api, tmp_path):
    """A Kueue v0.14.3 (as xpk <= 1.0 installs) serves only v1beta1: the queues are written in
    it, where v1beta2 requests would 404 after the pools exist."""
    from kueue_release import kueue_manifest

    jobset_install.apply(k8s_api, "fake", jobset_install.plan(
        kueue_manifest("v0.14.3", served=("v1beta1",)), kueue_install._KINDS))
    st = kueue_install.status(k8s_api, "fake")
    assert (st.version, st.served) == ("v0.14.3", ("v1beta1",))
    lines: list[str] = []
    kueue_install.install(k8s_api, "fake", _cfg(), lines.append)
    assert lines[-1].endswith("(kueue.x-k8s.io/v1beta1)")
    http = Http(k8s_api)
    lq = http.request("GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/default/localqueues/"
                      "multislice-queue")
    assert lq["spec"] == {"clusterQueue": "cluster-queue"}
    # the kept Kueue keeps its own settings, and says what they are
    assert "its settings are kept: WaitForPodsReady off" in lines[0]


def test_a_kueue_serving_no_known_version_refuses_before_any_pool(httpserver, monkeypatch,
                                                                   k8s_api):
    """An existing cluster whose Kueue serves neither v1beta2 nor v1beta1: one line, exit 2,
    and no node pool requested."""
    from google.auth.credentials import AnonymousCredentials
    from kueue_release import kueue_manifest

    from elastix.clients import gke

    docs = kueue_manifest("v0.2.1", served=("v1alpha1",))
    jobset_install.apply(k8s_api, "fake", jobset_install.plan(docs, kueue_install._KINDS))
    monkeypatch.setenv(gke.ENDPOINT_ENV, httpserver.url_for("").rstrip("/"))
    client = gke.cluster_manager(AnonymousCredentials())
    httpserver.expect_request(f"{BASE}/clusters/elastic", method="GET").respond_with_data(
        json.dumps({"name": "elastic", "nodePools": [{"name": "cpu-np"}]}),
        content_type="application/json")  # the TPU pools are still to create
    with pytest.raises(UsageError) as err:
        cluster.create(_cfg(), client, lambda s: None, kube=lambda: (k8s_api, "fake"),
                       kueue=None)
    assert err.value.exit_code == 2
    assert "\n" not in str(err.value)
    assert str(err.value).startswith("Kueue v0.2.1 on this cluster serves neither "
                                     "kueue.x-k8s.io/v1beta2 nor v1beta1")
    assert [r.method for r, _ in httpserver.log] == ["GET"]  # no POST of a node pool
