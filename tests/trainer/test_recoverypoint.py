"""The head's recovery point on its JobSet, against the fake API server over HTTP with the
official client and the head's own service-account token, authorized by the Role elastix makes
(the fake applies RBAC to that token: ``k8s_rbac``). Events reach it as in a run: emitted on an
``EventLog`` it listens to."""

from __future__ import annotations

import json
import logging
import shutil
import socket
from pathlib import Path

import pytest
import yaml
from fake_cluster import elastix, start_fake, stop, wait_for
from fault_proxy import Rule, fault_proxy

from elastix.backends.gke.backend import GKEBackend
from elastix.clients.kube import api_client_from_kubeconfig
from elastix.protocol import eventspec, recovery, timefmt
from elastix.workload import labels, rbac
from elastix_trainer.obs.events import EventLog
from elastix_trainer.obs.recoverypoint import RecoveryPointPublisher, attach_from_env

REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "xpk-1.16.0-pathways-elastic.yaml"
NAME = "elastic-demo"
JOBSET = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/{NAME}"


def _submit(fake) -> GKEBackend:
    api, where = api_client_from_kubeconfig(str(fake.kubeconfig), None)
    backend = GKEBackend(api, "default", where)
    manifest = yaml.safe_load(REFERENCE.read_text())
    manifest["metadata"].setdefault("labels", {})[labels.WORKLOAD] = NAME  # listed as elastix's
    backend.submit(manifest, preflight=False)
    return backend


@pytest.fixture
def cluster(tmp_path):
    """The fake cluster running the reference JobSet."""
    fake = start_fake(tmp_path)
    backend = _submit(fake)
    yield fake, backend
    stop(fake)


def _client(url: str, token: str):
    """The official client as the head's token makes it (a bearer token; any URL)."""
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = url
    cfg.api_key = {"authorization": token}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(cfg)


def _annotations(fake) -> dict[str, str]:
    md = fake.get(JOBSET)["metadata"]
    return {k: v for k, v in (md.get("annotations") or {}).items() if k in recovery.ANNOTATIONS}


def _step(events: EventLog, n: int) -> dict:
    return events.emit(eventspec.STEP, step=n, seconds=0.1, loss=2.0, live_slices=2,
                       tflops_per_device=0.0, global_batch=8)


def _commit(events: EventLog, n: int) -> dict:
    return events.emit(eventspec.CHECKPOINT_COMMITTED, step=n, seconds=0.2, bytes=1000,
                       blocking_seconds=0.01)


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "recovery point" in r.getMessage()]


def test_each_commit_is_published_and_the_steps_at_risk_at_most_every_interval(cluster):
    fake, _ = cluster
    token = fake.head_account(NAME)  # elastix's own Role: patch on this JobSet, by name
    now = [1000.0]
    events = EventLog(None)
    pub = RecoveryPointPublisher(_client(fake.url, token), "default", NAME, every=30.0,
                                 clock=lambda: now[0]).attach(events)
    try:
        for n in range(1, 6):
            _step(events, n)
        assert pub.patches == 0 and _annotations(fake) == {}  # nothing committed yet
        first = _commit(events, 5)
        want = {recovery.LAST_COMMITTED_STEP: "5", recovery.STEPS_AT_RISK: "0",
                recovery.LAST_COMMITTED_TIME: timefmt.iso_ms(timefmt.parse(first["ts"]))}
        wait_for(lambda: _annotations(fake) == want, what="the first commit on the JobSet")

        for n in range(6, 9):  # within the interval: the steps at risk wait
            _step(events, n)
        second = _commit(events, 8)  # a commit does not
        wait_for(lambda: _annotations(fake).get(recovery.LAST_COMMITTED_STEP) == "8",
                 what="the second commit")
        assert _annotations(fake)[recovery.LAST_COMMITTED_TIME] == timefmt.iso_ms(
            timefmt.parse(second["ts"]))
        assert pub.patches == 2

        now[0] += 30.0  # the interval is over: the next step's count goes out
        _step(events, 9)
        wait_for(lambda: _annotations(fake).get(recovery.STEPS_AT_RISK) == "1",
                 what="the steps at risk")
        _step(events, 10)  # within the new interval: held back ...
        _step(events, 11)
        _commit(events, 11)  # ... until the next commit, which carries the count too
        wait_for(lambda: _annotations(fake).get(recovery.LAST_COMMITTED_STEP) == "11",
                 what="the third commit")
        assert _annotations(fake)[recovery.STEPS_AT_RISK] == "0"
        patches = [r for r in fake.requests() if r["method"] == "PATCH"]
        assert len(patches) == pub.patches == 4, patches
        assert pub.state == "running"
    finally:
        pub.close()


@pytest.mark.parametrize("rules", [rbac.POD_READER_RULES, rbac.rules("another-workload")],
                         ids=["no-patch-verb", "another-jobsets-name"])
def test_a_role_without_the_grant_is_one_warning_and_training_goes_on(cluster, caplog, rules):
    fake, _ = cluster
    caplog.set_level(logging.INFO, logger="elastix_trainer")
    token = fake.head_account(NAME, rules=rules)
    events = EventLog(None)
    pub = RecoveryPointPublisher(_client(fake.url, token), "default", NAME).attach(events)
    try:
        _step(events, 1)
        _commit(events, 1)
        wait_for(lambda: pub.state == "off", what="the publisher giving up")
        for n in range(2, 50):  # every later event returns at once, and nothing is sent
            _step(events, n)
            if n % 10 == 0:
                _commit(events, n)
        assert pub.patches == 1 and len(events.of(eventspec.STEP)) == 49
        lines = _lines(caplog)
        assert len(lines) == 1, lines
        assert "HTTP 403" in lines[0] and "patch on jobsets.jobset.x-k8s.io" in lines[0]
        assert [r.levelname for r in caplog.records if "recovery point" in r.getMessage()] == [
            "WARNING"]
        assert _annotations(fake) == {}
    finally:
        pub.close()


def test_a_stalled_api_server_never_holds_the_caller(cluster):
    fake, _ = cluster
    token = fake.head_account(NAME)
    with fault_proxy(fake.url) as (url, proxy):
        proxy.add(Rule("PATCH", r"/jobsets/", "stall", seconds=60.0, count=1))
        events = EventLog(None)
        pub = RecoveryPointPublisher(_client(url, token), "default", NAME).attach(events)
        try:
            _commit(events, 1)
            wait_for(lambda: proxy.matching("PATCH", r"/jobsets/"), what="the patch stalled")
            for n in range(2, 200):  # the API holds the patch; the events go on regardless
                _step(events, n)
                if n % 50 == 0:
                    _commit(events, n)
            [held] = proxy.matching("PATCH", r"/jobsets/")
            assert not held.done  # all of the above ran while the API server held the patch
            assert pub.tracker.point() == recovery.RecoveryPoint(150, pub.tracker.committed, 49)
        finally:
            pub.close(wait=0)


def test_an_unreachable_api_server_is_one_line_and_retried(caplog):
    caplog.set_level(logging.INFO, logger="elastix_trainer")
    events = EventLog(None)
    with socket.socket() as s:  # a port nothing listens on once closed: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pub = RecoveryPointPublisher(_client(f"http://127.0.0.1:{port}", "t"), "default", NAME,
                                 backoff=(0.01, 0.05)).attach(events)
    try:
        _commit(events, 1)
        wait_for(lambda: pub.patches >= 3, what="retries")
        _step(events, 2)  # the caller is not held by the retries
        lines = _lines(caplog)
        assert len(lines) == 1 and "retrying with backoff" in lines[0], lines
        assert pub.state == "running"
    finally:
        pub.close(wait=0)


def _in_a_pod(fake, tmp_path: Path, monkeypatch) -> Path:
    """This process as the head pod: its service-account mount (a token of the account
    elastix's Role is bound to, the fake's CA), the API server's address and the workload."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(fake.head_account(NAME))
    shutil.copy(tmp_path / "tls" / "cert.pem", account / "ca.crt")
    (account / "namespace").write_text("default")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(fake.port))
    monkeypatch.setenv("ELASTIX_WORKLOAD", NAME)
    return account


def test_in_a_pod_the_head_publishes_and_status_shows_it(tmp_path, monkeypatch):
    """The whole path of a GKE head: in-cluster config from its mounted token and CA (over
    TLS), the namespace file, ``ELASTIX_WORKLOAD``; then ``workload status`` reads it back."""
    fake = start_fake(tmp_path, tls=True)
    try:
        _submit(fake)
        account = _in_a_pod(fake, tmp_path, monkeypatch)
        events = EventLog(None)
        pub = attach_from_env(events, account_dir=str(account))
        assert pub is not None
        for n in range(1, 13):
            _step(events, n)
        commit = _commit(events, 12)
        wait_for(lambda: _annotations(fake).get(recovery.LAST_COMMITTED_STEP) == "12",
                 what="the commit on the JobSet")
        pub.close()

        when = timefmt.parse(commit["ts"])
        status = elastix(fake, "workload", "status", NAME, "-o", "json")
        point = yaml.safe_load(status.stdout)["recovery_point"]
        assert point == {"step": 12, "committed": timefmt.iso_ms(when), "steps_at_risk": 0}
        listed = yaml.safe_load(elastix(fake, "workload", "list", "-o", "json").stdout)
        assert [w["recovery_point"]["step"] for w in listed] == [12]
        header, row = elastix(fake, "workload", "list").stdout.splitlines()[:2]
        at = header.index("SAVED")  # the column's text starts under its header
        assert row[at:].split()[0] == "12", (header, row)
        human = elastix(fake, "workload", "status", NAME).stdout
        assert f"recovery point: step 12 (committed {when:%H:%M:%S}Z, 0 steps at risk)" in human
    finally:
        stop(fake)


def test_a_real_run_publishes_each_commit_of_its_checkpoint_writer(tmp_path, monkeypatch):
    """``elastix-train``'s own run (``program.run``, a tiny model on CPU): its checkpoint
    writer's commits reach the JobSet in order, each with its own time, the last one with no
    step at risk. (Two commits closer together than one patch are written as one, the newer:
    only the newest value is ever sent, so whether step 4's is seen is the machine's.)"""
    from kubernetes import client, watch
    from trainer_helpers import make_cfg

    from elastix_trainer import program
    from elastix_trainer.obs import kube

    fake = start_fake(tmp_path, tls=True)
    try:
        _submit(fake)
        monkeypatch.setattr(kube, "ACCOUNT_DIR", str(_in_a_pod(fake, tmp_path, monkeypatch)))
        api, _ = api_client_from_kubeconfig(str(fake.kubeconfig), None)
        objects = client.CustomObjectsApi(api)
        rv = objects.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "default",
                                                  "jobsets", NAME)["metadata"]["resourceVersion"]
        cfg = make_cfg(steps=8, checkpoint_period=4, checkpoint_dir=str(tmp_path / "ckpt"),
                       events_file=str(tmp_path / "events.jsonl"))
        assert program.run(cfg) == 0

        # Every change of the JobSet since the run began, in order (a watch misses none).
        seen = []
        for ev in watch.Watch().stream(objects.list_namespaced_custom_object,
                                       "jobset.x-k8s.io", "v1alpha2", "default", "jobsets",
                                       resource_version=rv, timeout_seconds=1):
            notes = ev["object"]["metadata"].get("annotations") or {}
            point = recovery.RecoveryPoint.from_annotations(notes)
            if point is not None and point not in seen:
                seen.append(point)
        records = [json.loads(ln) for ln in (tmp_path / "events.jsonl").read_text().splitlines()]
        commits = [r for r in records if r["event"] == "checkpoint_committed"]
        assert [c["step"] for c in commits] == [4, 8]
        times = {c["step"]: timefmt.parse(timefmt.iso_ms(timefmt.parse(c["ts"])))
                 for c in commits}  # as the annotation carries them: to the millisecond
        assert seen and all(p.committed == times[p.step] for p in seen), seen
        assert [p.step for p in seen] == sorted(p.step for p in seen)
        assert seen[-1] == recovery.RecoveryPoint(8, times[8], 0)
    finally:
        stop(fake)


def test_outside_a_pod_there_is_no_publisher_and_no_line(monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="elastix_trainer")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("ELASTIX_WORKLOAD", NAME)
    assert attach_from_env(EventLog(None)) is None
    assert _lines(caplog) == []
