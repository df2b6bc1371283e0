"""The fake API server admits what elastix renders and refuses what JobSet v0.12.0's webhook and
Kubernetes' validation refuse, each rule on its own, with the Status the real server sends.

The rules, with their sources, are in tests/fixtures/jobset_webhook_rules.json; the fake's code
is tests/fakes/k8s_admission.py and k8s_jobset_webhook.py.
"""

from __future__ import annotations

import copy
import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fake_cluster import start_fake, stop, wait_for
from render_cases import COMBOS, spec_values, tpu_types

from elastix.backends.gke.backend import GKEBackend
from elastix.errors import ManifestError
from elastix.workload.render import render
from elastix.workload.spec import build_spec

RULES = json.loads((Path(__file__).resolve().parents[2] / "fixtures"
                    / "jobset_webhook_rules.json").read_text())["rules"]
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
NAME_LIMIT = 22  # what elastix states for its template (tests/workload/test_names.py checks it)

@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    f = start_fake(tmp_path_factory.mktemp("admission"))
    yield f
    stop(f)


def send(fake, method: str, path: str, body: Any, dry_run: bool = True,
         content_type: str = "application/json") -> tuple[int, dict]:
    q = "?dryRun=All" if dry_run else ""
    req = urllib.request.Request(f"{fake.url}{path}{q}", data=json.dumps(body).encode(),
                                 method=method, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def backend(fake) -> GKEBackend:
    from elastix.clients.kube import api_client_from_kubeconfig

    api, where = api_client_from_kubeconfig(str(fake.kubeconfig), None)
    return GKEBackend(api, "default", where)


def test_every_rendered_manifest_is_admitted(fake):
    """Every TPU type x flag combination, at the longest name elastix allows, passes the fake's
    admission: the JobSet and the head's ServiceAccount, Role and RoleBinding (server dry run)."""
    b = backend(fake)
    refused = []
    for tpu_type in tpu_types():
        for combo in COMBOS:
            manifest = render(build_spec(None, spec_values(tpu_type, combo, "a" * NAME_LIMIT)))
            try:
                b.submit(manifest, dry_run="server", preflight=False)
            except ManifestError as e:
                refused.append(f"{tpu_type}/{combo}: {e.message}")
    assert not refused, refused[:3]


def base() -> dict:
    return render(build_spec(None, spec_values("v5litepod-16", "elastic", "demo")))


def rjob(m: dict, i: int) -> dict:
    return m["spec"]["replicatedJobs"][i]


def pod_template(m: dict, i: int) -> dict:
    return rjob(m, i)["template"]["spec"]["template"]


def _set(path: str, value: Any):
    def f(m: dict) -> None:
        *parents, last = path.split(".")
        cur = m
        for p in parents:
            cur = cur[int(p)] if isinstance(cur, list) else cur.setdefault(p, {})
        cur[last] = value
    return f


def _rules(**rules) -> Any:
    return _set("spec.failurePolicy.rules", [
        {"name": rules.get("name", "r1"), "action": rules.get("action", "FailJobSet"),
         **{k: v for k, v in rules.items() if k not in ("name", "action")}}])


# One breaking change per rule id. A create rule: the change is made to the manifest before a
# (dry-run) create. An update rule: the JobSet is created, then replaced with the change.
CREATE_BREAKS = {
    "k8s-name": _set("metadata.name", "Demo_1"),
    "k8s-label-key": _set("metadata.labels", {"bad key!": "x"}),
    "k8s-label-value": _set("metadata.labels", {"team": "x" * 64}),
    "k8s-annotation-key": _set("metadata.annotations", {"a/b/c": "x"}),
    "k8s-annotations-size": _set("metadata.annotations", {"big": "x" * (256 * 1024)}),
    "crd-startup-depends-on": lambda m: m["spec"].update(
        startupPolicy={"startupPolicyOrder": "InOrder"}),  # the workers render dependsOn
    "js-in-place-restart-gate": _set("spec.failurePolicy.restartStrategy", "InPlaceRestart"),
    "js-depends-on-first": lambda m: (m["spec"].pop("startupPolicy", None), rjob(m, 0).update(
        dependsOn=[{"name": "pathways-head", "status": "Ready"}])),
    "js-subdomain": _set("spec.network.subdomain", "Bad.Sub"),
    "js-managed-by": _set("spec.managedBy", "no-slash"),
    "js-replicas-parallelism": lambda m: (rjob(m, 1).update(replicas=2**20),
                                          rjob(m, 1)["template"]["spec"].update(
                                              parallelism=2**12, completions=None)),
    "js-group-name": lambda m: rjob(m, 1).update(groupName="Group_1"),
    "js-job-name": lambda m: (rjob(m, 1).update(name="w" * 60),  # not Indexed: no pod names
                              rjob(m, 1)["template"]["spec"].update(completionMode="NonIndexed")),
    "js-pod-name": lambda m: rjob(m, 1).update(name="w" * 49),  # demo-w..w-3-3-abcde: 64
    "js-depends-on-previous": lambda m: (m["spec"].pop("startupPolicy", None), rjob(m, 1).update(
        dependsOn=[{"name": "nobody", "status": "Ready"}])),
    "js-success-policy-targets": _set("spec.successPolicy.targetReplicatedJobs", ["head"]),
    "js-restart-job-gate": _rules(action="RestartJob"),
    "js-failure-rule-name": _rules(name="1bad"),
    "js-failure-rule-targets": _rules(targetReplicatedJobs=["nobody"]),
    "js-failure-rule-reasons": _rules(onJobFailureReasons=["OutOfLuck"]),
    "js-failure-rule-unique": _set("spec.failurePolicy.rules", [
        {"name": "same", "action": "FailJobSet"}, {"name": "same", "action": "FailJobSet"}]),
    "js-coordinator": _set("spec.coordinator.jobIndex", 3),
    "js-coordinator-label": lambda m: m["metadata"].update(name="d" * 23),
    "js-volume-claim-policies": _set("spec.volumeClaimPolicies", [
        {"templates": [{"metadata": {"name": "cache"}, "spec": {}}]}]),  # nothing mounts it
    "crd-volume-claim-namespace": lambda m: (_claim(m, "cache"), m["spec"][
        "volumeClaimPolicies"][0]["templates"][0]["metadata"].update(namespace="other")),
}
UPDATE_BREAKS = {
    "crd-immutable": _set("spec.network.subdomain", "other"),
    "js-update-replicated-jobs": lambda m: rjob(m, 1).update(replicas=5),
    "js-update-managed-by": _set("spec.managedBy", "example.com/mine"),
}
POD_BREAKS = {  # created as plain objects through the API
    "k8s-pod-hostname": ("/api/v1/namespaces/default/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"hostname": "h" * 64, "containers": [{"name": "c", "image": "i"}]}}),
    "k8s-job-pod-failure-policy": ("/apis/batch/v1/namespaces/default/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"podFailurePolicy": {"rules": []},
                 "template": {"spec": {"restartPolicy": "OnFailure"}}}}),
    "k8s-indexed-job-hostname": ("/apis/batch/v1/namespaces/default/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j" * 62},
        "spec": {"completionMode": "Indexed", "completions": 10, "template": {}}}),
}


def fired(status: dict) -> set[str]:
    """The rule ids whose message matches a cause of a 422 Status (each cause exactly one)."""
    out = set()
    for cause in status["details"]["causes"]:
        text = f"{cause['field'] or '<nil>'}: {cause['message']}"
        ids = {r["id"] for r in RULES if re.search(r["message"], text)}
        assert len(ids) == 1, (text, ids)
        out |= ids
    return out


def test_every_rule_has_a_breaking_case():
    assert set(CREATE_BREAKS) | set(UPDATE_BREAKS) | set(POD_BREAKS) == {r["id"] for r in RULES}


@pytest.mark.parametrize("rule", sorted(CREATE_BREAKS))
def test_create_refused_by_exactly_that_rule(fake, rule):
    m = base()
    code, body = send(fake, "POST", JOBSETS, m)
    assert code == 201, body  # the base is admitted
    CREATE_BREAKS[rule](m)
    code, body = send(fake, "POST", JOBSETS, m)
    assert (code, body["reason"], body["kind"]) == (422, "Invalid", "Status"), body
    assert fired(body) == {rule}, body["message"]
    by = next(r["by"] for r in RULES if r["id"] == rule)
    webhook = body["message"].startswith('admission webhook "vjobset.kb.io" denied the request: ')
    assert webhook == (by == "webhook"), body["message"]
    assert f'JobSet.jobset.x-k8s.io "{m["metadata"]["name"]}" is invalid: ' in body["message"]


@pytest.mark.parametrize("rule", sorted(UPDATE_BREAKS))
def test_update_refused_by_exactly_that_rule(fake, rule):
    m = base()
    m["metadata"]["name"] = f"upd{sorted(UPDATE_BREAKS).index(rule)}"  # 2n+19 <= 63
    code, created = send(fake, "POST", JOBSETS, m, dry_run=False)
    assert code == 201, created
    try:
        changed = copy.deepcopy(created)
        UPDATE_BREAKS[rule](changed)
        code, body = send(fake, "PUT", f"{JOBSETS}/{m['metadata']['name']}", changed)
        assert (code, body["reason"]) == (422, "Invalid"), body
        assert fired(body) == {rule}, body["message"]
        code, body = send(fake, "PUT", f"{JOBSETS}/{m['metadata']['name']}", created)
        assert code == 200, body  # an unchanged spec is an allowed update
    finally:
        req = urllib.request.Request(f"{fake.url}{JOBSETS}/{m['metadata']['name']}",
                                     method="DELETE")
        urllib.request.urlopen(req, timeout=10).close()


def test_suspended_jobset_may_change_pod_scheduling_fields(fake):
    """jobset_webhook.go L373-391: Kueue changes a suspended JobSet's nodeSelector."""
    m = base()
    m["metadata"]["name"] = "suspended"
    m["spec"]["suspend"] = True
    code, created = send(fake, "POST", JOBSETS, m, dry_run=False)
    assert code == 201, created
    changed = copy.deepcopy(created)
    pod_template(changed, 1)["spec"]["nodeSelector"] = {"pool": "other"}
    code, changed = send(fake, "PUT", f"{JOBSETS}/suspended", changed, dry_run=False)
    assert code == 200, changed
    changed["spec"]["suspend"] = False
    pod_template(changed, 1)["spec"]["containers"][0]["image"] = "other:2"
    assert send(fake, "PUT", f"{JOBSETS}/suspended", changed)[0] == 422


def _claim(m: dict, name: str) -> None:
    """A volume claim policy whose PVC the worker pods mount."""
    m["spec"]["volumeClaimPolicies"] = [{"templates": [{"metadata": {"name": name}, "spec": {}}]}]
    pod_template(m, 1)["spec"]["containers"][0]["volumeMounts"].append(
        {"name": name, "mountPath": "/cache"})


def test_volume_claim_policies(fake):
    """A mounted claim is admitted; its PVC name <claim>-<jobset> counts against 63."""
    m = base()
    _claim(m, "cache")
    assert send(fake, "POST", JOBSETS, m)[0] == 201
    _claim(m, "c" * 59)  # c..c-demo: 64
    code, body = send(fake, "POST", JOBSETS, m)
    assert code == 422 and "VolumeClaimPolicies template name is too long" in body["message"]


@pytest.mark.parametrize("rule", sorted(POD_BREAKS))
def test_pod_and_job_rules(fake, rule):
    path, body = POD_BREAKS[rule]
    code, out = send(fake, "POST", path, body)
    assert code == 422 and fired(out) == {rule}, out


def test_refusal_reaches_the_user_in_one_line(fake):
    """What the webhook says reaches elastix's error once, on one line."""
    m = base()
    m["metadata"]["name"] = "x" * 30
    with pytest.raises(ManifestError) as err:
        backend(fake).submit(m, dry_run="server", preflight=False)
    msg = err.value.message
    assert "\n" not in msg and msg.count("spec will lead to invalid label value") == 1, msg
    assert 'admission webhook "vjobset.kb.io" denied the request' in msg
    assert err.value.exit_code == 2



def _long_label(m: dict) -> None:
    pod_template(m, 1)["metadata"]["labels"]["team"] = "x" * 64


def _pod_failure_policy(m: dict) -> None:  # gcluster's worker Job when it sets one
    rjob(m, 1)["template"]["spec"]["podFailurePolicy"] = {"rules": []}


@pytest.mark.parametrize(("breaks", "said"), [
    (_long_label, "spec.template.metadata.labels: Invalid value"),
    (_pod_failure_policy, 'spec.template.spec.restartPolicy: Invalid value: "OnFailure": only '
                          '"Never" is supported when podFailurePolicy is specified'),
], ids=["pod-template-label", "pod-failure-policy"])
def test_admitted_jobset_whose_jobs_are_refused(fake, breaks, said):
    """The webhook checks neither pod template labels nor a podFailurePolicy against the pods'
    restartPolicy: the JobSet is admitted, and the Job the controller makes is refused by the
    API server, a JobCreationFailed event on the JobSet."""
    m = base()
    name = "bad" + breaks.__name__.replace("_", "-")  # its own: the fake's events outlive it
    m["metadata"]["name"] = name
    breaks(m)
    code, body = send(fake, "POST", JOBSETS, m, dry_run=False)
    assert code == 201, body
    try:
        def failed():
            return [msg for msg in fake.events("JobCreationFailed")
                    if f'Job.batch "{name}-worker-' in msg]
        msgs = wait_for(failed, what="JobCreationFailed event")
        assert said in msgs[0], msgs[0]
        jobs = fake.get("/apis/batch/v1/namespaces/default/jobs")["items"]
        names = {j["metadata"]["name"] for j in jobs}
        assert f"{name}-pathways-head-0" in names and not any(
            n.startswith(f"{name}-worker") for n in names)
    finally:
        req = urllib.request.Request(f"{fake.url}{JOBSETS}/{name}", method="DELETE")
        urllib.request.urlopen(req, timeout=10).close()
