"""429 and 503 from the Kubernetes API server: reads and deletes sent again within a bound,
honouring Retry-After; a create sent again only when the API server itself refused it, so never
made twice; the error that ends it says throttled or unavailable, with the Retry-After. The
fake API server behind the fault proxy (answers as the API server's: Status body, Retry-After
header), through the official client; the waits are recorded, not slept."""

from __future__ import annotations

import pytest
from fake_cluster import HEAD_ACCESS_KINDS
from fault_proxy import Rule, fault_proxy, k8s_refusal

from elastix.backends.gke.backend import GKEBackend
from elastix.clients.kube import Busy
from elastix.clients.retry import RetryPolicy
from elastix.workload import render
from elastix.workload.spec import build_spec

JOBSETS = r"/jobsets"
NONE = {k: [] for k in HEAD_ACCESS_KINDS}


def manifest(name: str = "demo") -> dict:
    return render.render(build_spec(None, {
        "name": name, "tpu_type": "v5litepod-16", "num_slices": 2, "docker_image": "img:1",
        "command": "python train.py", "project": "p", "cluster": "c", "location": "l"}))


class Clock:
    """A clock that moves only when the policy sleeps: waits recorded, none slept."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def backend(url: str, clock: Clock, **policy) -> GKEBackend:
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = url
    return GKEBackend(client.ApiClient(cfg), "default", f"fake ({url})",
                      retry=RetryPolicy(sleep=clock.sleep, clock=lambda: clock.now, **policy))


def fates(proxy, method: str, path: str = JOBSETS) -> list[str]:
    return [s.fate for s in proxy.matching(method, path)]


def test_a_throttled_read_waits_as_asked_and_succeeds(fake_cluster):
    clock = Clock()
    with fault_proxy(fake_cluster.url) as (url, proxy):
        b = backend(url, clock)
        b.submit(manifest(), preflight=False)
        proxy.add(k8s_refusal("GET", r"/jobsets/demo$", 429, count=2, retry_after=2))
        assert b.get_jobset("demo")["metadata"]["name"] == "demo"
    assert fates(proxy, "GET", r"/jobsets/demo$") == ["status 429", "status 429", "forwarded"]
    assert clock.slept == [2, 2]  # Retry-After, not the backoff


def test_an_unavailable_delete_is_sent_again_and_deletes(fake_cluster):
    clock = Clock()
    with fault_proxy(fake_cluster.url) as (url, proxy):
        b = backend(url, clock)
        b.submit(manifest(), preflight=False)
        proxy.add(k8s_refusal("DELETE", r"/jobsets/demo$", 503, count=1, retry_after=None))
        b.delete("demo")
        assert not b.exists("demo")
    assert fates(proxy, "DELETE", r"/jobsets/demo$") == ["status 503", "forwarded"]
    assert clock.slept == [1.0]  # no Retry-After: the first backoff step
    assert fake_cluster.head_access() == NONE


def _refused(fake_cluster, rule: Rule, call) -> tuple[Busy, object, Clock]:
    """``call(backend)`` through a proxy that applies ``rule``: the ``Busy`` it must raise, the
    proxy (what it did to each request) and the clock (what the retries slept)."""
    clock = Clock()
    with fault_proxy(fake_cluster.url) as (url, proxy):
        proxy.add(rule)
        with pytest.raises(Busy) as err:
            call(backend(url, clock))
    return err.value, proxy, clock


def test_a_create_the_api_server_refused_is_sent_again_and_made_once(fake_cluster):
    clock = Clock()
    with fault_proxy(fake_cluster.url) as (url, proxy):
        proxy.add(k8s_refusal("POST", JOBSETS, 429, count=1, retry_after=1))
        b = backend(url, clock)
        assert b.submit(manifest(), preflight=False) == "demo"
    assert fates(proxy, "POST") == ["status 429", "forwarded"]
    assert [w.name for w in b.list()] == ["demo"]
    assert clock.slept == [1]


def test_a_create_refused_by_something_else_is_not_sent_again(fake_cluster):
    """A 503 without the API server's Status (a proxy, a load balancer) may have come after the
    API server made the JobSet: sending it again could report "already exists" for the user's
    own workload. Not sent again, and the error says why. No JobSet is seen, but it may still
    be being made: the head's objects stay, and the hint names the command that removes them
    (test_head_access.py: a create cut before any answer)."""
    rule = Rule("POST", JOBSETS, "status", status=503)
    err, proxy, clock = _refused(fake_cluster, rule,
                                 lambda b: b.submit(manifest(), preflight=False))
    assert fates(proxy, "POST") == ["status 503"] and clock.slept == []
    assert "unavailable (503 Service Unavailable) while creating workload demo" in err.message
    assert "not sent again" in err.message
    assert "`elastix workload delete demo` removes them" in err.hint
    assert fake_cluster.head_access() == {k: ["demo-head"] for k in NONE}


def test_the_bound_is_attempts(fake_cluster):
    rule = k8s_refusal("GET", JOBSETS, 429, count=100, retry_after=1)
    err, proxy, clock = _refused(fake_cluster, rule, GKEBackend.list)
    assert len(fates(proxy, "GET")) == 5 and clock.slept == [1, 1, 1, 1]
    assert err.message.startswith("the Kubernetes API server is throttling requests "
                                  "(429 Too Many Requests) while listing workloads")
    assert "it asked to retry after 1 s; still 429 after 5 attempts in 4 s" in err.message
    assert "CRD" not in err.message and "try again" in err.hint


def test_the_bound_is_time(fake_cluster):
    rule = k8s_refusal("GET", JOBSETS, 503, count=100, retry_after=10)
    err, proxy, clock = _refused(fake_cluster, rule, GKEBackend.list)
    assert clock.slept == [10, 10, 10]  # a 4th wait would end 40 s after the start (> 30 s)
    assert len(fates(proxy, "GET")) == 4
    assert "unavailable (503 Service Unavailable) while listing workloads" in err.message


def test_a_retry_after_longer_than_the_bound_is_not_waited_for(fake_cluster):
    rule = k8s_refusal("GET", JOBSETS, 429, count=1, retry_after=120)
    err, proxy, clock = _refused(fake_cluster, rule, GKEBackend.list)
    assert clock.slept == [] and len(fates(proxy, "GET")) == 1
    assert "it asked to retry after 120 s (longer than elastix waits)" in err.message
