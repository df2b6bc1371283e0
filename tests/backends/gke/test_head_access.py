"""The head pod's ServiceAccount, Role and RoleBinding (its pod watch): made by
`workload create`, removed by `workload delete`, never left behind by a failed submit, and
never taken from a running workload of the same name. Against the fake API server, with the
real CLI and the official client."""

from __future__ import annotations

import copy

import pytest
from fake_cluster import CREATE, HEAD_ACCESS_KINDS, elastix, wait_for
from fault_proxy import Rule, fault_proxy, k8s_refusal

from elastix.backends.gke.backend import GKEBackend
from elastix.clients.kube import Busy, api_client_from_kubeconfig
from elastix.clients.retry import RetryPolicy
from elastix.errors import ConflictError, ElastixError, ManifestError
from elastix.workload import rbac, render
from elastix.workload.spec import build_spec

KINDS = HEAD_ACCESS_KINDS


def access(fake, namespace: str = "default") -> dict[str, list[str]]:
    return fake.head_access(namespace)


NONE = {k: [] for k in KINDS}
DEMO = {k: ["demo-head"] for k in KINDS}


def manifest(name: str = "demo") -> dict:
    return render.render(build_spec(None, {
        "name": name, "tpu_type": "v5litepod-16", "num_slices": 2, "docker_image": "img:1",
        "command": "python train.py", "project": "p", "cluster": "c", "location": "l"}))


def backend(url_or_fake) -> GKEBackend:
    if isinstance(url_or_fake, str):
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = url_or_fake
        return GKEBackend(client.ApiClient(cfg), "default", url_or_fake)
    api, where = api_client_from_kubeconfig(str(url_or_fake.kubeconfig), None)
    return GKEBackend(api, "default", where)


def test_create_grants_the_head_pod_its_role_and_delete_removes_it(fake_cluster):
    fake = fake_cluster
    elastix(fake, *CREATE)
    assert access(fake) == DEMO
    ns = "/namespaces/default"
    role = fake.get(f"{KINDS['roles']}{ns}/roles/demo-head")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"],
                              "verbs": ["get", "list", "watch"]},
                             # the recovery point: patch on its own JobSet only, no get
                             {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"],
                              "verbs": ["patch"], "resourceNames": ["demo"]}]
    binding = fake.get(f"{KINDS['rolebindings']}{ns}/rolebindings/demo-head")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "demo-head",
                                    "namespace": "default"}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "demo-head"}
    uid = fake.get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/demo")[
        "metadata"]["uid"]
    for kind, prefix in KINDS.items():  # deleted with the JobSet, however it is deleted
        [owner] = fake.get(f"{prefix}{ns}/{kind}/demo-head")["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("JobSet", "demo", uid)
    [head] = fake.pods("jobset.sigs.k8s.io/replicatedjob-name=pathways-head")
    assert head["spec"]["serviceAccountName"] == "demo-head"
    workers = fake.pods("jobset.sigs.k8s.io/replicatedjob-name=worker")
    assert workers and all("serviceAccountName" not in p["spec"] for p in workers)
    # Workers never call the API: no token mounted in them; the head's watch needs its own.
    assert all(p["spec"].get("automountServiceAccountToken") is False for p in workers)
    assert head["spec"].get("automountServiceAccountToken") is not False

    # A second create of the same name fails and leaves the running one's access alone.
    again = elastix(fake, *CREATE, check=False)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert access(fake) == DEMO

    elastix(fake, "workload", "delete", "demo")
    assert access(fake) == NONE


def test_a_rejected_jobset_leaves_no_access_behind(fake_cluster):
    bad = manifest()
    bad["spec"]["replicatedJobs"][1]["template"]["spec"]["backofLimit"] = 3  # a typo
    with pytest.raises(ManifestError):
        backend(fake_cluster).submit(bad, preflight=False)
    assert access(fake_cluster) == NONE


def test_server_dry_run_makes_no_access(fake_cluster):
    assert backend(fake_cluster).submit(manifest(), dry_run="server", preflight=False) == "demo"
    assert access(fake_cluster) == NONE


def test_a_refused_grant_submits_a_head_that_polls_and_says_so(fake_cluster):
    """A user who may not create Roles still gets the workload: the watch only speeds a
    recovery up. The account made before the refusal is undone, the head pod names none (a
    pod naming a missing account is rejected), and one note says what was given up."""
    with fault_proxy(fake_cluster.url) as (url, proxy):
        proxy.add(Rule("PATCH", r"/roles/", "status", status=403))
        b = backend(url)
        assert b.submit(manifest(), preflight=False) == "demo"
    assert access(fake_cluster) == NONE
    [head] = fake_cluster.pods("jobset.sigs.k8s.io/replicatedjob-name=pathways-head")
    assert "serviceAccountName" not in head["spec"]
    [note] = b.notices
    assert "will not watch its worker pods" in note and "rolebindings" in note


def test_a_grant_that_fails_otherwise_undoes_the_account_and_submits_nothing(fake_cluster):
    with fault_proxy(fake_cluster.url) as (url, proxy):
        proxy.add(Rule("PATCH", r"/roles/", "status", status=500, count=100))
        with pytest.raises(ElastixError):
            backend(url).submit(manifest(), preflight=False)
    assert access(fake_cluster) == NONE
    assert backend(fake_cluster).list() == []


def test_replace_keeps_access_and_a_template_without_the_account_gets_none(fake_cluster):
    b = backend(fake_cluster)
    b.submit(manifest(), preflight=False)
    b.submit(manifest(), replace=True, preflight=False)
    assert access(fake_cluster) == DEMO
    other = copy.deepcopy(manifest("plain"))
    head = other["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    del head["serviceAccountName"]  # a user's --template that names no account
    assert rbac.wanted(other) is None
    b.submit(other, preflight=False)
    assert access(fake_cluster) == DEMO
    with pytest.raises(ConflictError):
        b.submit(manifest(), preflight=False)
    assert access(fake_cluster) == DEMO
    bad = manifest()  # a broken manifest of a running workload's name: its account stays
    bad["spec"]["replicatedJobs"][1]["template"]["spec"]["backofLimit"] = 3
    with pytest.raises(ManifestError):
        b.submit(bad, preflight=False)
    assert access(fake_cluster) == DEMO


def _owners(fake, name: str = "demo-head") -> list[str]:
    """The uid each head object is owned by (one per object; '' for none)."""
    out = []
    for kind, prefix in KINDS.items():
        refs = fake.get(f"{prefix}/namespaces/default/{kind}/{name}")["metadata"].get(
            "ownerReferences") or [{}]
        out.append(refs[0].get("uid", ""))
    return out


def test_a_create_refused_while_the_api_server_is_unavailable_leaves_nothing(fake_cluster):
    """Issue 34: a 503 on the JobSet POST, with the API server refusing the reads after it too,
    left the head's account, Role and RoleBinding with no owner. The API server's own 503 means
    it made nothing: they are deleted without asking it whether the JobSet exists."""
    with fault_proxy(fake_cluster.url) as (url, proxy):
        proxy.add(k8s_refusal("POST", r"/jobsets", 503, count=100, retry_after=None))
        proxy.add(k8s_refusal("GET", r"/jobsets", 503, count=100, retry_after=None))
        b = backend(url)
        b.http.retry = RetryPolicy(sleep=lambda _s: None)  # waits not slept
        with pytest.raises(Busy) as err:
            b.submit(manifest(), preflight=False)
    assert access(fake_cluster) == NONE
    assert err.value.not_processed and "unavailable (503" in err.value.message
    # no need to ask whether the JobSet exists (the CRD's schema, read to fit the manifest to
    # the JobSet controller, is not the JobSet)
    assert proxy.matching("GET", r"/namespaces/default/jobsets") == []


def test_a_create_whose_answer_was_lost_gives_the_jobset_its_objects(fake_cluster):
    """The API server made the JobSet but its answer never came (the connection dropped): the
    create fails, says the JobSet may be there, and the JobSet owns the head's objects, so
    they go with it (not left without an owner, nor deleted from under it)."""
    with fault_proxy(fake_cluster.url) as (url, proxy):
        proxy.add(Rule("POST", r"/jobsets", "lose"))
        with pytest.raises(ElastixError) as err:
            backend(url).submit(manifest(), preflight=False)
    assert "exists now" in err.value.hint
    uid = fake_cluster.get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/demo")[
        "metadata"]["uid"]
    assert _owners(fake_cluster) == [uid] * 3


def test_a_create_cut_before_the_api_server_got_it_is_cleaned_up_by_delete(fake_cluster):
    """Cut before any answer and no JobSet seen: it might still be being made, and deleting the
    account would get its head refused. So the objects stay, the error says so, and
    `workload delete` removes them though there is no JobSet."""
    with fault_proxy(fake_cluster.url) as (url, proxy):
        proxy.add(Rule("POST", r"/jobsets", "reset"))
        with pytest.raises(ElastixError) as err:
            backend(url).submit(manifest(), preflight=False)
    assert "elastix workload delete demo" in err.value.hint
    assert access(fake_cluster) == DEMO
    out = elastix(fake_cluster, "workload", "delete", "demo")
    assert "only its head's ServiceAccount, Role and RoleBinding were left" in out.stderr
    assert access(fake_cluster) == NONE
    again = elastix(fake_cluster, "workload", "delete", "demo", check=False)
    assert again.returncode == 1 and "JobSet 'demo' not found" in again.stderr


def test_a_stale_owner_is_replaced_and_an_owned_account_never_deleted(fake_cluster):
    """Objects a JobSet owned before this create (one deleted with kubectl, not yet collected,
    or a running one of the same name) are not this create's to delete when it fails; when it
    succeeds, the new JobSet owns them (the stale owner's collector would take them)."""
    b = backend(fake_cluster)
    b.submit(manifest(), preflight=False)
    first = _owners(fake_cluster)
    fake_cluster_delete_jobset_only(fake_cluster)
    with fault_proxy(fake_cluster.url) as (url, proxy):
        proxy.add(k8s_refusal("POST", r"/jobsets", 429, count=100, retry_after=None))
        failing = backend(url)
        failing.http.retry = RetryPolicy(attempts=1)
        with pytest.raises(Busy):
            failing.submit(manifest(), preflight=False)
    assert access(fake_cluster) == DEMO and _owners(fake_cluster) == first  # kept
    b.submit(manifest(), preflight=False)
    uid = b.get_jobset("demo")["metadata"]["uid"]
    assert uid not in first and _owners(fake_cluster) == [uid] * 3


def fake_cluster_delete_jobset_only(fake) -> None:
    """Delete the JobSet as kubectl would, leaving its dependents (the fake collects none)."""
    import urllib.request

    req = urllib.request.Request(
        f"{fake.url}/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/demo",
        method="DELETE")
    urllib.request.urlopen(req, timeout=10).read()
    wait_for(lambda: not fake.pods("jobset.sigs.k8s.io/jobset-name=demo"), what="pods gone")
