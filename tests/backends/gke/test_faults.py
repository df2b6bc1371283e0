"""Chaos faults on the GKE backend (``GKEBackend.inject``), checked by what the fake API server
received over HTTP: which pods were deleted, with which grace and which UID precondition.

One fake cluster for the module, a workload per test (its own name, so its own pods); every
test reads only the requests made since it cleared the log.
"""

from __future__ import annotations

import pytest
from fake_cluster import start_fake, stop, wait_for
from fault_proxy import Rule, fault_proxy

from elastix.backends.base import Fault
from elastix.backends.gke.backend import GKEBackend
from elastix.errors import ConflictError, NotFoundError, UsageError
from elastix.workload import render
from elastix.workload.spec import build_spec

JS = "jobset.sigs.k8s.io/"
SLICES, HOSTS = 2, 4  # v5litepod-16: 4 hosts a slice


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    cluster = start_fake(tmp_path_factory.mktemp("fake"),
                         {"log_interval": 0.1, "terminate_delay": 0.2})
    yield cluster
    stop(cluster)


def backend(url: str) -> GKEBackend:
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = url
    return GKEBackend(client.ApiClient(cfg), "default", f"fake ({url})")


def running(fake, name: str, role: str = "worker") -> dict[str, dict]:
    """Running (not terminating) pods of ``name``'s head or workers, by name."""
    return {p["metadata"]["name"]: p
            for p in fake.pods(f"{JS}jobset-name={name},{JS}replicatedjob-name={role}")
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}


def launch(fake, name: str, **extra) -> GKEBackend:
    """Submit ``name`` (2 elastic slices of 4 hosts), wait until every pod runs, clear the
    request log; the backend to fault it with."""
    b = backend(fake.url)
    b.submit(render.render(build_spec(None, {
        "name": name, "tpu_type": "v5litepod-16", "num_slices": SLICES,
        "elastic_slices": SLICES, "docker_image": "img:1", "command": "python train.py",
        "project": "p", "cluster": "c", "location": "l", **extra})), preflight=False)
    wait_for(lambda: len(running(fake, name)) == SLICES * HOSTS
             and len(running(fake, name, "pathways-head")) == 1, what=f"{name}'s pods running")
    fake.requests(clear=True)
    return b


def deletes(fake) -> list[dict]:
    """The pod DELETEs the fake received since the log was cleared."""
    return [r for r in fake.requests() if r["method"] == "DELETE" and "/pods/" in r["path"]]


def pod_of(path: str) -> str:
    return path.rsplit("/", 1)[1]


def where(pod: dict) -> tuple[int, int]:
    lab = pod["metadata"]["labels"]
    return int(lab[f"{JS}job-index"]), int(lab["batch.kubernetes.io/job-completion-index"])


def test_kill_deletes_one_worker_with_no_grace(fake):
    b = launch(fake, "f-kill")
    before = running(fake, "f-kill")
    (rec,) = b.inject("f-kill", Fault("kill"), slice=0, host=1)
    assert (rec.fault, rec.slice, rec.host, rec.grace, rec.dry_run) == ("kill", 0, 1, None, False)
    (req,) = deletes(fake)
    assert pod_of(req["path"]) == rec.pod and where(before[rec.pod]) == (0, 1)
    assert req["body"]["gracePeriodSeconds"] == 0
    assert req["body"]["preconditions"] == {"uid": before[rec.pod]["metadata"]["uid"]}


def test_term_deletes_one_worker_with_the_pods_own_grace_and_does_not_wait(fake):
    b = launch(fake, "f-term", termination_grace_period=7)
    before = running(fake, "f-term")
    (rec,) = b.inject("f-term", Fault("term"), slice=1, host=2)
    assert (rec.fault, rec.slice, rec.host, rec.grace) == ("term", 1, 2, 7.0)
    (req,) = deletes(fake)
    assert pod_of(req["path"]) == rec.pod and where(before[rec.pod]) == (1, 2)
    assert req["body"]["gracePeriodSeconds"] == 7
    assert req["body"]["preconditions"] == {"uid": before[rec.pod]["metadata"]["uid"]}
    # Returned while the pod is in its grace: SIGTERM sent, the kubelet's SIGKILL still to come.
    (pod,) = [p for p in fake.pods(f"{JS}jobset-name=f-term")
              if p["metadata"]["name"] == rec.pod]
    assert pod["metadata"]["deletionTimestamp"]
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 7


def test_term_with_a_grace_overrides_the_pods_in_whole_seconds(fake):
    b = launch(fake, "f-grace", termination_grace_period=7)
    (rec,) = b.inject("f-grace", Fault("term", grace=2.5), seed=3)
    assert rec.grace == 3.0  # the API takes whole seconds: rounded up, never less than asked
    (req,) = deletes(fake)
    assert pod_of(req["path"]) == rec.pod and req["body"]["gracePeriodSeconds"] == 3
    assert req["body"]["preconditions"]["uid"]
    with pytest.raises(UsageError, match="--grace must be 0 or more"):
        b.inject("f-grace", Fault("term", grace=-1))


@pytest.mark.parametrize("pin", [None, 0])
def test_slice_deletes_every_pod_of_one_slice_and_no_other(fake, pin):
    name = f"f-slice-{'seeded' if pin is None else pin}"
    b = launch(fake, name)
    before = running(fake, name)
    recs = b.inject(name, Fault("slice"), slice=pin, seed=5)
    chosen = recs[0].slice
    assert pin is None or chosen == pin
    assert [(r.slice, r.host, r.fault) for r in recs] == [(chosen, h, "slice") for h in range(HOSTS)]
    reqs = deletes(fake)
    assert [pod_of(r["path"]) for r in reqs] == [r.pod for r in recs]  # one each, in host order
    assert {pod_of(r["path"]) for r in reqs} == {n for n, p in before.items()
                                                 if where(p)[0] == chosen}
    for r in reqs:
        assert r["body"]["gracePeriodSeconds"] == 0
        assert r["body"]["preconditions"] == {"uid": before[pod_of(r["path"])]["metadata"]["uid"]}
    other = {n for n, p in before.items() if where(p)[0] != chosen}
    assert other <= set(running(fake, name))  # the other slice untouched


def _status(code: int, reason: str, pod: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code,
            "details": {"name": pod, "kind": "pods"}}


def test_slice_skips_a_pod_gone_or_replaced_after_the_first(fake):
    launch(fake, "f-gone")
    hosts = sorted(((where(p)[1], n) for n, p in running(fake, "f-gone").items()
                    if where(p)[0] == 1))
    gone, replaced = hosts[1][1], hosts[2][1]
    with fault_proxy(fake.url) as (url, proxy):
        proxy.add(Rule("DELETE", f"/pods/{gone}", "status", status=404,
                       body=_status(404, "NotFound", gone, f'pods "{gone}" not found')))
        proxy.add(Rule("DELETE", f"/pods/{replaced}", "status", status=409,
                       body=_status(409, "Conflict", replaced,
                                    "Precondition failed: UID in precondition: a, "
                                    "UID in object meta: b")))
        recs = backend(url).inject("f-gone", Fault("slice"), slice=1)
    assert [r.host for r in recs] == [0, 3]  # its slice went down with the first: not an error
    assert [pod_of(r["path"]) for r in deletes(fake)] == [hosts[0][1], hosts[3][1]]

    first = min((where(p)[1], n) for n, p in running(fake, "f-gone").items()
                if where(p)[0] == 0)[1]
    with fault_proxy(fake.url) as (url, proxy):
        proxy.add(Rule("DELETE", f"/pods/{first}", "status", status=409,
                       body=_status(409, "Conflict", first, "Precondition failed")))
        with pytest.raises(ConflictError, match=f"pod {first} was replaced before it could be"):
            backend(url).inject("f-gone", Fault("slice"), slice=0)


def test_head_deletes_the_head_pod(fake):
    b = launch(fake, "f-head")
    (head,) = running(fake, "f-head", "pathways-head").values()
    (rec,) = b.inject("f-head", Fault("head"))
    assert (rec.pod, rec.slice, rec.host, rec.fault) == (head["metadata"]["name"], None, None,
                                                         "head")
    (req,) = deletes(fake)
    assert pod_of(req["path"]) == rec.pod
    assert req["body"]["gracePeriodSeconds"] == 0
    assert req["body"]["preconditions"] == {"uid": head["metadata"]["uid"]}


def test_hang_is_refused_before_any_request(fake):
    b = launch(fake, "f-hang")
    assert "SIGSTOP" in b.fault_support(Fault("hang"))
    with pytest.raises(UsageError) as err:
        b.inject("f-hang", Fault("hang", hang_for=5.0), slice=0, host=0)
    assert "--fault kill" in err.value.message and "local backend" in err.value.message
    assert "\n" not in err.value.message
    assert fake.requests() == []  # nothing read, nothing deleted
    assert all(b.fault_support(Fault(k)) is None for k in ("kill", "term", "slice", "head"))


@pytest.mark.parametrize("kind", ["kill", "term", "slice", "head"])
def test_dry_run_deletes_nothing(fake, kind):
    name = f"f-dry-{kind}"
    b = launch(fake, name, termination_grace_period=11)
    recs = b.inject(name, Fault(kind), seed=1, dry_run=True)
    assert recs and all(r.dry_run and r.fault == kind for r in recs)
    assert len(recs) == {"slice": HOSTS}.get(kind, 1)
    assert kind != "term" or recs[0].grace == 11.0
    assert deletes(fake) == []
    assert len(running(fake, name)) == SLICES * HOSTS


@pytest.mark.parametrize(("kind", "pins", "says"), [
    ("kill", {"slice": SLICES}, f"--slice {SLICES} is out of range"),
    ("term", {"host": HOSTS}, f"--host {HOSTS} is out of range"),
    ("slice", {"slice": -1}, "--slice -1 is out of range"),
    ("slice", {"slice": 0, "host": 0}, "--fault slice takes every host"),
    ("head", {"slice": 0}, "--fault head takes no --slice or --host"),
    ("head", {"host": 1}, "--fault head takes no --slice or --host"),
])
def test_bad_pins_are_usage_errors_and_delete_nothing(fake, kind, pins, says):
    if "f-pins" not in {w.name for w in backend(fake.url).list()}:
        launch(fake, "f-pins")
    fake.requests(clear=True)
    with pytest.raises(UsageError) as err:
        backend(fake.url).inject("f-pins", Fault(kind), **pins)
    assert says in err.value.message and err.value.hint
    assert deletes(fake) == []


def test_a_missing_workload_is_not_found(fake):
    for kind in ("kill", "term", "slice", "head"):
        with pytest.raises(NotFoundError, match="JobSet 'nope' not found"):
            backend(fake.url).inject("nope", Fault(kind))
    assert deletes(fake) == []
