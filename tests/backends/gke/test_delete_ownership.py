"""``workload delete NAME`` on GKE deletes only what elastix made (issue 59, item 1).

The JobSet's labels prove it elastix's (``elastix.dev/workload: NAME`` and
``app.kubernetes.io/managed-by: elastix``), and its delete carries the uid that was read as a
precondition (Kubernetes ``DeleteOptions.preconditions``): a JobSet replaced in between is a
409 Conflict, answered by the fake as the API server words it, and nothing is deleted. A JobSet
another tool made is refused as every other write is, unless ``--foreign`` names it; one that
is no Pathways workload is refused with ``--foreign`` too. The head's ServiceAccount, Role and
RoleBinding ``NAME-head`` go only when they carry elastix's labels. Against the fake API
server with the official client and the real CLI.
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path

import pytest
import yaml
from fake_cluster import CREATE, elastix, wait_for
from fault_proxy import Rule, fault_proxy

from elastix.backends.gke.backend import GKEBackend
from elastix.clients.kube import api_client_from_kubeconfig
from elastix.errors import ConflictError

FIXTURES = Path(__file__).parents[2] / "fixtures"
XPK = yaml.safe_load((FIXTURES / "xpk-1.16.0-pathways-elastic.yaml").read_text())
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
ACCESS = {"serviceaccounts": "/api/v1", "roles": "/apis/rbac.authorization.k8s.io/v1",
          "rolebindings": "/apis/rbac.authorization.k8s.io/v1"}


def _create(fake, body: dict) -> dict:
    """Create a JobSet the way another launcher does: the API server, not elastix."""
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(fake.kubeconfig))
    return client.CustomObjectsApi(api).create_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", "default", "jobsets", copy.deepcopy(body))


def _jobset(fake, name: str) -> dict | None:
    names = {j["metadata"]["name"]: j for j in fake.get(JOBSETS)["items"]}
    return names.get(name)


def _foreign_account(fake, name: str) -> None:
    """``NAME-head`` ServiceAccount, Role and RoleBinding someone else made (no labels)."""
    from elastix.workload import rbac

    for _version, plural, body in rbac.objects(name, "default"):
        body = copy.deepcopy(body)
        body["metadata"].pop("labels")
        fake.post(f"{ACCESS[plural]}/namespaces/default/{plural}", body)


def _accounts(fake, name: str) -> list[str]:
    out = []
    for plural, prefix in ACCESS.items():
        out += [plural for o in fake.get(f"{prefix}/namespaces/default/{plural}")["items"]
                if o["metadata"]["name"] == f"{name}-head"]
    return out


def _deletes(fake) -> list[str]:
    return [r["path"] for r in fake.requests() if r["method"] == "DELETE"]


def test_an_xpk_workload_is_refused_unless_foreign_names_it(fake_cluster):
    fake = fake_cluster
    _create(fake, XPK)
    _foreign_account(fake, "elastic-demo")  # someone's, of the same name
    fake.requests(clear=True)
    p = elastix(fake, "workload", "delete", "elastic-demo", check=False)
    assert p.returncode == 2, p.stderr
    said = " ".join(p.stderr.split())
    assert said.startswith("error: JobSet elastic-demo in namespace default was made by xpk, "
                           "not by elastix: nothing was deleted"), said
    assert "elastix workload delete elastic-demo --foreign" in said
    assert _deletes(fake) == []
    assert _jobset(fake, "elastic-demo") is not None

    p = elastix(fake, "workload", "delete", "elastic-demo", "--foreign")
    assert "workload elastic-demo: deletion requested" in p.stderr
    assert _jobset(fake, "elastic-demo") is None
    # the JobSet alone: the account is not elastix's, and is left as it was
    assert _accounts(fake, "elastic-demo") == list(ACCESS)
    assert "ServiceAccount, Role and RoleBinding elastic-demo-head are not elastix's" in \
        " ".join(p.stderr.split())


def test_a_jobset_that_is_no_pathways_workload_is_refused_even_when_foreign(fake_cluster):
    fake = fake_cluster
    body = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "batch-job"},
            "spec": {"replicatedJobs": [{"name": "trainer", "replicas": 1, "template": {
                "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "busybox"}]}}}}}]}}
    _create(fake, body)
    fake.requests(clear=True)
    for extra in ((), ("--foreign",)):
        p = elastix(fake, "workload", "delete", "batch-job", *extra, check=False)
        assert p.returncode == 2 and "is not a Pathways workload" in p.stderr, p.stderr
    assert _deletes(fake) == [] and _jobset(fake, "batch-job") is not None


def test_a_name_that_matches_nothing_deletes_nothing(fake_cluster):
    """A typo: no JobSet, and a ``NAME-head`` account someone else made (no elastix labels)."""
    fake = fake_cluster
    _foreign_account(fake, "demo")
    fake.requests(clear=True)
    p = elastix(fake, "workload", "delete", "demo", check=False)
    assert p.returncode == 1, p.stderr
    said = " ".join(p.stderr.split())
    assert "JobSet 'demo' not found in namespace default" in said and \
        "nothing was deleted" in said, said
    assert "demo-head" in said and "not elastix's" in said
    assert _deletes(fake) == [] and _accounts(fake, "demo") == list(ACCESS)
    p = elastix(fake, "workload", "delete", "demo", "--ignore-not-found")
    assert p.returncode == 0 and _accounts(fake, "demo") == list(ACCESS)


def test_elastix_s_own_workload_is_deleted_with_its_uid(fake_cluster):
    fake = fake_cluster
    elastix(fake, *CREATE)
    uid = _jobset(fake, "demo")["metadata"]["uid"]
    fake.requests(clear=True)
    elastix(fake, "workload", "delete", "demo")
    assert _jobset(fake, "demo") is None and _accounts(fake, "demo") == []
    bodies = [r.get("body") or {} for r in fake.requests() if r["method"] == "DELETE"]
    assert len(bodies) == 4  # the JobSet, then its three head objects
    assert bodies[0]["preconditions"] == {"uid": uid}
    assert all((b.get("preconditions") or {}).get("uid") for b in bodies)


def test_a_jobset_replaced_between_read_and_delete_is_not_deleted(fake_cluster):
    """The delete is held at the proxy until the JobSet is deleted and made again (a new uid):
    the API server then answers 409 Conflict, and the new one stays."""
    fake = fake_cluster
    elastix(fake, *CREATE)
    old = _jobset(fake, "demo")
    go = threading.Event()
    api, _ = api_client_from_kubeconfig(str(fake.kubeconfig), None)
    with fault_proxy(fake.url) as (url, proxy):
        proxy.add(Rule("DELETE", r"/jobsets/demo", "stall", until=go))
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = url
        b = GKEBackend(client.ApiClient(cfg), "default", url)
        got: list[BaseException] = []

        def delete() -> None:
            try:
                b.delete("demo")
            except BaseException as e:  # noqa: BLE001 - the test reads it
                got.append(e)

        t = threading.Thread(target=delete)
        t.start()
        wait_for(lambda: any(s.method == "DELETE" for s in proxy.seen), what="delete held")
        # replaced meanwhile (kubectl delete, then a create of the same name)
        from kubernetes import client as kc

        kc.CustomObjectsApi(api).delete_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", "default", "jobsets", "demo")
        again = {k: v for k, v in old.items() if k != "status"}
        again["metadata"] = {"name": "demo", "labels": old["metadata"]["labels"]}
        _create(fake, again)
        go.set()
        t.join(30)
    new = _jobset(fake, "demo")
    assert new is not None and new["metadata"]["uid"] != old["metadata"]["uid"]
    assert len(got) == 1 and isinstance(got[0], ConflictError), got
    msg = got[0].message
    assert "was replaced while it was being deleted" in msg and "nothing was deleted" in msg


def test_the_fake_answers_a_stale_uid_as_the_api_server_does(fake_cluster):
    """409 Conflict, reason Conflict, the apimachinery message (storage's
    ``Precondition failed: UID in precondition: X, UID in object meta: Y`` inside
    ``Operation cannot be fulfilled on jobsets.jobset.x-k8s.io "demo": StorageError: invalid
    object, Code: 4, ...``)."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    fake = fake_cluster
    body = copy.deepcopy(XPK)
    body["metadata"]["name"] = "demo"
    made = _create(fake, body)
    api = config.new_client_from_config(config_file=str(fake.kubeconfig))
    with pytest.raises(ApiException) as err:
        client.CustomObjectsApi(api).delete_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", "default", "jobsets", "demo",
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="stale")))
    assert err.value.status == 409
    import json

    status = json.loads(err.value.body)
    assert status["reason"] == "Conflict"
    assert status["message"] == (
        'Operation cannot be fulfilled on jobsets.jobset.x-k8s.io "demo": StorageError: '
        "invalid object, Code: 4, Key: /registry/jobset.x-k8s.io/jobsets/default/demo, "
        "ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: "
        f"stale, UID in object meta: {made['metadata']['uid']}")
    assert status["details"] == {"name": "demo", "group": "jobset.x-k8s.io", "kind": "jobsets"}
    assert _jobset(fake, "demo") is not None
