"""The head's watch on its worker pods, against the fake API server over HTTP with the
official client: it makes PathwaysHealth probe at once, never decides a slice's fate itself, and
never fails the run (no permission, no cluster, broken streams)."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import pytest
import yaml
from fake_cluster import start_fake, stop, wait_for
from fault_proxy import Rule, fault_proxy
from pathways_standin import StandinProbe

from elastix.backends.gke.backend import GKEBackend
from elastix.clients.kube import api_client_from_kubeconfig
from elastix_trainer.elastic import podwatch
from elastix_trainer.elastic.health import PathwaysHealth
from elastix_trainer.elastic.podwatch import PodWatch

REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "xpk-1.16.0-pathways-elastic.yaml"
NAME, SLICES, HOSTS = "elastic-demo", 3, 4  # the xpk reference: 3 x v5litepod-16
FOREVER = 3600.0  # a poll that never fires in a test: only the watch can make it probe


@pytest.fixture
def cluster(tmp_path):
    """The fake cluster running the reference JobSet, every worker pod Ready."""
    fake = start_fake(tmp_path, {"recreate_delay": 0.3})
    api, where = api_client_from_kubeconfig(str(fake.kubeconfig), None)
    backend = GKEBackend(api, "default", where)
    backend.submit(yaml.safe_load(REFERENCE.read_text()), preflight=False)
    probe = StandinProbe(fake.url, NAME, HOSTS)
    wait_for(lambda: probe.up() == set(range(SLICES)), what="every slice Ready")
    yield fake, api, backend, probe
    stop(fake)


def health(probe, poll: float = FOREVER) -> PathwaysHealth:
    return PathwaysHealth({i: [] for i in range(SLICES)}, poll=poll, active=probe,
                          pod_watch=False)


def watch_lines(caplog) -> list[str]:
    """What the pod watch logged (it promises one line per outage)."""
    return [r.getMessage() for r in caplog.records if "pod watch" in r.getMessage()]


@contextlib.contextmanager
def watched(api, active, poll: float = FOREVER, on_health=None, **kw):
    """A PathwaysHealth probing with ``active`` and a watch nudging it; both closed after.
    ``on_health`` sees the health source before the watch starts."""
    h = health(active, poll)
    if on_health is not None:
        on_health(h)
    w = PodWatch(api, "default", NAME, h.nudge, backoff=(0.05, 0.2), **kw).start()
    try:
        yield h, w
    finally:
        w.close()
        h.close()


def test_a_deleted_pod_and_its_ready_replacement_each_probe_at_once(cluster):
    _, api, backend, probe = cluster
    with watched(api, probe) as (h, w):
        wait_for(lambda: w.state == "watching", what="the watch")
        assert h.live_slices() == frozenset(range(SLICES))
        backend.kill_worker(NAME, slice=1, host=2)
        # No error reached the health source and its poll never fires: the deletion's event
        # made it probe every slice, and the probe (not the event) found slice 1 down.
        wait_for(lambda: 1 not in h.live_slices(), what="slice 1 dropped")
        # The replacement turning Ready makes it re-probe the down slice at once.
        wait_for(lambda: h.live_slices() == frozenset(range(SLICES)), what="slice 1 back")
        assert all(len(c) == SLICES or c == {1} for c in probe.calls[1:])


def test_a_pod_event_alone_never_marks_a_slice_lost(cluster):
    """Pathways still answers for slice 1 (a benign reschedule): the event only made it ask."""
    _, api, backend, probe = cluster
    views: list[frozenset[int]] = []  # the view each time the probe is asked

    def active(slices: dict) -> set[int]:
        if hs:  # not while PathwaysHealth is being built
            views.append(hs[0].live_slices())
        return probe(slices)

    hs: list[PathwaysHealth] = []
    with watched(api, active, on_health=hs.append) as (h, w):
        wait_for(lambda: w.state == "watching", what="the watch")
        probe.pathways_says_up.add(1)
        asked = len(probe.calls)
        backend.kill_worker(NAME, slice=1, host=0)
        wait_for(lambda: len(probe.calls) > asked, what="a probe after the pod event")
        assert h.live_slices() == frozenset(range(SLICES))
        assert views and all(v == frozenset(range(SLICES)) for v in views), views


def test_a_403_is_one_line_and_the_poll_carries_on(cluster, caplog):
    fake, _, _, probe = cluster
    caplog.set_level(logging.INFO, logger="elastix_trainer")
    with fault_proxy(fake.url) as (url, proxy):
        proxy.add(Rule("GET", r"/pods", "status", status=403, count=1000))
        with watched(_client(url), probe, poll=0.05) as (h, w):
            wait_for(lambda: w.state == "off", what="the watch giving up")
            lines = watch_lines(caplog)
            assert len(lines) == 1, lines
            assert "HTTP 403" in lines[0] and "get, list and watch on pods" in lines[0]
            assert len(proxy.matching("GET", r"/pods")) == 1  # gave up: no retry loop
            # The probe still polls: a slice the probe finds down comes back on the poll.
            probe.pathways_says_up.clear()
            h.probe()
            wait_for(lambda: h.live_slices() == frozenset(range(SLICES)), what="the poll")


def test_a_reset_connection_is_one_line_then_it_reconnects(cluster, caplog):
    fake, _, backend, probe = cluster
    caplog.set_level(logging.INFO, logger="elastix_trainer")
    with fault_proxy(fake.url) as (url, proxy):
        # urllib3 retries a reset three times by itself: the fourth reaches the watch.
        proxy.add(Rule("GET", r"/pods", "reset", count=4))
        # Through the proxy a watch is answered when it ends: keep each one short.
        w = PodWatch(_client(url), "default", NAME, lambda s, gone: None, timeout_seconds=1,
                     backoff=(0.05, 0.2)).start()
        try:
            wait_for(lambda: w.connects >= 1, what="a watch after four resets")
            lines = watch_lines(caplog)
            assert len(lines) == 1 and "interrupted" in lines[0], lines
            assert [s.fate for s in proxy.matching("GET", r"/pods")][:5] == ["reset"] * 4 + ["forwarded"]
        finally:
            w.close()


def test_a_watch_the_server_ends_reconnects_and_still_hints(cluster):
    _, api, backend, probe = cluster
    with watched(api, probe, timeout_seconds=1) as (h, w):
        wait_for(lambda: w.connects >= 2, what="a second watch request")
        backend.kill_worker(NAME, slice=2, host=1)
        wait_for(lambda: 2 not in h.live_slices(), what="slice 2 dropped after a reconnect")


def test_a_relist_after_a_gap_hints_what_the_watch_missed(cluster):
    """While no watch ran (a broken stream), a pod went away and its replacement came up: the
    re-list says so once; a re-list that finds nothing new says nothing."""
    _, api, backend, probe = cluster
    hints: list[tuple] = []
    w = PodWatch(api, "default", NAME, lambda s, gone: hints.append((s, gone)))
    w._list()  # the baseline: no hint
    w._list()
    assert hints == []
    backend.kill_worker(NAME, slice=0, host=1)  # the pod is gone when this returns
    wait_for(lambda: probe.up() == set(range(SLICES)), what="slice 0's replacement Ready")
    w._list()
    assert hints == [(None, True)]  # a Ready pod went away: every slice is worth a probe


def test_outside_a_pod_there_is_no_watch_and_one_line(monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="elastix_trainer")
    monkeypatch.setenv("ELASTIX_WORKLOAD", NAME)
    monkeypatch.delenv("ELASTIX_POD_WATCH", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert podwatch.start_from_env(lambda s, gone: None) is None
    lines = watch_lines(caplog)
    assert len(lines) == 1 and "no in-cluster Kubernetes config" in lines[0], lines
    monkeypatch.setenv("ELASTIX_POD_WATCH", "0")
    assert podwatch.start_from_env(lambda s, gone: None) is None
    assert len(watch_lines(caplog)) == 1


def _client(url: str):
    """An official-client ApiClient for ``url`` (the fault proxy in front of the fake)."""
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = url
    return client.ApiClient(cfg)
