"""GKE ``status`` marks the slices the trainer declared lost, reading its events from gs://
with ranged reads: each refresh asks only for what was appended since the last.

Real parts: the fake API server process running the workload, fake-gcs-server behind the
recording proxy (``fault_proxy``, which logs each request's Range header),
google-cloud-storage over HTTP, the GKE backend (one instance across refreshes, as
``status --watch``) and the real CLI.
"""

from __future__ import annotations

import json

import pytest
from fake_cluster import CREATE, elastix, wait_for
from fake_gcs import fake_gcs
from fault_proxy import fault_proxy

from elastix.backends.gke.backend import GKEBackend
from elastix.clients.gcs import JsonlTail
from elastix.clients.kube import api_client_from_kubeconfig

URI = "gs://runs/demo/events.jsonl"
OBJECT = "/download/storage/v1/b/runs/o/demo%2Fevents.jsonl"


def _ev(event: str, **kw) -> bytes:
    return json.dumps({"ts": "2026-12-01T10:00:00Z", "event": event, "pid": 7, **kw}).encode() \
        + b"\n"


def _steps(first: int, n: int) -> bytes:
    return b"".join(_ev("step", step=s, seconds=0.5, loss=1.0, live_slices=2)
                    for s in range(first, first + n))


DETECTED = _ev("elastic_detected", recovery=1, kind="slice_lost", last_step=30,
               error="DATA_LOSS: slice(s) [1] of the mesh are down", live_slices=1,
               lost_slices=[1])
READY = _ev("elastic_slices_ready", recovery=1, live_slices=2, required_slices=2)


@pytest.fixture
def world(fake_cluster, tmp_path, monkeypatch):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    with fake_gcs(tmp_path, buckets=("runs",)) as url, fault_proxy(url) as (purl, proxy):
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", purl)
        elastix(fake_cluster, *CREATE, "--events-path", URI)
        wait_for(lambda: any(p["status"].get("phase") == "Running"
                             for p in fake_cluster.pods("jobset.sigs.k8s.io/replicatedjob-name"
                                                        "=pathways-head")), what="the head")
        blob = storage.Client(project="t", credentials=AnonymousCredentials()) \
            .bucket("runs").blob("demo/events.jsonl")
        api, where = api_client_from_kubeconfig(str(fake_cluster.kubeconfig), None)
        yield fake_cluster, GKEBackend(api, "default", where), blob.upload_from_string, proxy


def _reads(proxy) -> list[str]:
    """The Range header of each read of the events object ("" for a whole-object read)."""
    return [s.range for s in proxy.seen if s.method == "GET" and s.path.startswith(OBJECT)]


def _lost(status) -> dict[int, str]:
    return {s.index: s.lost for s in status.slices if s.lost}


def test_status_marks_the_lost_slice_reading_only_new_bytes(world):
    fake, backend, upload, proxy = world
    assert _lost(backend.status("demo")) == {}  # no object yet: nothing lost, no error
    first = _ev("run_start", num_slices=2) + _steps(1, 30) + DETECTED[:40]  # a torn last line
    upload(first)
    proxy.seen.clear()
    assert _lost(backend.status("demo")) == {}  # the detection is not complete yet
    assert _reads(proxy) == [""]  # the first read of the object is the whole object
    second = first + DETECTED[40:] + _steps(31, 50)
    upload(second)
    proxy.seen.clear()
    st = backend.status("demo")
    assert list(_lost(st)) == [1] and "the trainer declared it lost" in _lost(st)[1]
    assert [s.state for s in st.slices] == ["Ready", "Lost"]
    # Only the new bytes (and the few already read before them, to tell it is the same file).
    assert _reads(proxy) == [f"bytes={len(first) - JsonlTail.OVERLAP}-"]
    proxy.seen.clear()
    out = elastix(fake, "workload", "status", "demo").stdout
    assert "slice 1 is lost: the trainer declared it lost" in " ".join(out.split())
    upload(second + READY + _steps(81, 5))
    proxy.seen.clear()
    assert _lost(backend.status("demo")) == {}  # recovered
    assert _reads(proxy) == [f"bytes={len(second) - JsonlTail.OVERLAP}-"]


@pytest.mark.parametrize("replacement", ["shorter", "other"])
def test_a_rewritten_events_object_is_read_again_from_its_start(world, replacement):
    _, backend, upload, proxy = world
    old = _ev("run_start", num_slices=2) + _steps(1, 40) + DETECTED
    upload(old)
    assert list(_lost(backend.status("demo"))) == [1]
    # A restarted head writes a new file: shorter (HTTP 416 on the old offset), or as long
    # with other bytes where the old ones were.
    new = _ev("run_start", num_slices=2) + _steps(1, 3)
    if replacement == "other":
        new += _steps(4, 60)
        assert len(new) > len(old)
    upload(new)
    proxy.seen.clear()
    assert _lost(backend.status("demo")) == {}
    reads = _reads(proxy)
    assert reads[0] == f"bytes={len(old) - JsonlTail.OVERLAP}-" and reads[1:] == [""]
    upload(new + DETECTED)
    proxy.seen.clear()
    assert list(_lost(backend.status("demo"))) == [1]
    assert _reads(proxy) == [f"bytes={len(new) - JsonlTail.OVERLAP}-"]


def test_unreadable_events_are_a_note_not_a_failed_status(world):
    _, backend, upload, proxy = world
    from fault_proxy import Rule

    upload(_ev("run_start", num_slices=2) + DETECTED)
    proxy.add(Rule("GET", r"/download/storage/v1/b/runs/o/", "status", status=403, count=5))
    st = backend.status("demo")
    assert _lost(st) == {} and st.state == "Running"
    assert any(r.startswith("slices the trainer lost are not shown: no permission to read "
                            f"{URI}") for r in st.reasons), st.reasons
