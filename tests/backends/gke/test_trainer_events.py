"""``GKEBackend.trainer_events`` against the fake API server: the head's log, and whether it
reaches the run's start (a tail, or a log the kubelet rotated, says it does not).

The events-file source (gs://) is covered end to end by ``test_events_gcs.py``.
"""

from __future__ import annotations

import datetime as dt

import fake_cluster as gke
import pytest

from elastix.backends.base import HEAD_LOG
from elastix.backends.gke.backend import GKEBackend
from elastix.backends.gke.training import LIST_TAIL
from elastix.clients.kube import api_client_from_kubeconfig
from elastix.errors import NotFoundError
from elastix.measure.events import events_of


@pytest.fixture
def fake(tmp_path, monkeypatch):
    with gke.serving(tmp_path, monkeypatch, gke.QUIET) as f:
        yield f


@pytest.fixture
def backend(fake):
    api, where = api_client_from_kubeconfig(str(fake.kubeconfig), None)
    with api:
        yield GKEBackend(api, "default", where)


def _steps(first: int, n: int) -> list[str]:
    """``n`` step lines from step ``first``, each with a time of its own, a second apart."""
    t0 = dt.datetime(2026, 11, 29, 9, 49, 30, tzinfo=dt.timezone.utc)
    return [f"{(t0 + dt.timedelta(seconds=k)).strftime('%Y-%m-%dT%H:%M:%S.000Z')} completed "
            f"step: {first + k}, seconds: 0.500, live slice count: 2" for k in range(n)]


def _head(fake, lines: list[str]) -> dict:
    head = gke.head_logging(fake, lines)
    return {"pod": head["metadata"]["name"], "container": head["spec"]["containers"][0]["name"]}


def test_a_full_read_is_the_heads_whole_log_from_its_start(fake, backend):
    _head(fake, _steps(1, 5))
    got = backend.trainer_events("demo")
    assert got is not None and got.source == HEAD_LOG and got.from_start
    assert got.records is None and sum("completed step" in x for x in got.lines) == 5
    events, source = events_of(got)
    assert source == "log" and [e.data["step"] for e in events if e.name == "step"] == [1, 2, 3,
                                                                                         4, 5]


def test_a_tail_does_not_claim_the_start_and_a_cheap_read_does(fake, backend):
    _head(fake, _steps(1, LIST_TAIL + 10))
    tail = backend.trainer_events("demo", tail=True)
    assert tail is not None and len(tail.lines) == LIST_TAIL and not tail.from_start
    whole = backend.trainer_events("demo", cheap=True)
    assert whole is not None and whole.from_start and len(whole.lines) > LIST_TAIL


def test_after_a_rotation_the_log_does_not_reach_the_start(fake, backend):
    where = _head(fake, _steps(1, 5))
    assert backend.trainer_events("demo").from_start
    fake.admin("rotate_log", where)
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
    stamp = later.strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
    fake.admin("log", {**where, "timestamps": True,
                       "lines": [f"{stamp} {x}" for x in _steps(6, 2)]})
    for got in (backend.trainer_events("demo"), backend.trainer_events("demo", cheap=True)):
        assert got is not None and got.source == HEAD_LOG and not got.from_start


def test_a_wrong_name_is_not_found(fake, backend):
    with pytest.raises(NotFoundError):
        backend.trainer_events("nothing")
