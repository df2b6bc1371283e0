"""`workload wait` and `delete --ignore-not-found` on GKE: the real CLI against the fake API
server over HTTP, the trainer's events in fake-gcs-server (read with google-cloud-storage)."""

from __future__ import annotations

import json

from fake_cluster import CREATE, elastix
from fake_gcs import fake_gcs

URI = "gs://runs/demo/events.jsonl"


def _events(*names: str) -> str:
    lines, step = [], 0
    for i, name in enumerate(names):
        rec = {"ts": f"2026-11-29T09:50:{i:02d}.000000Z", "event": name, "pid": 7}
        if name == "run_start":
            rec.update(num_slices=2, devices=8, config={})
        elif name == "step":
            step += 1
            rec.update(step=step, seconds=0.5, loss=1.0, live_slices=2)
        elif name == "snapshot_taken":
            rec.update(step=step, seconds=0.01, bytes=10)
        lines.append(json.dumps(rec))
    return "\n".join(lines) + "\n"


def test_wait_on_gke_running_stepping_deleted(fake_cluster, tmp_path, monkeypatch):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    fake = fake_cluster
    with fake_gcs(tmp_path, buckets=("runs",)) as url:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
        elastix(fake, *CREATE, "--events-path", URI)
        elastix(fake, "workload", "wait", "demo", "--for", "running", "--timeout", "60s")
        blob = storage.Client(project="t", credentials=AnonymousCredentials()).bucket(
            "runs").blob("demo/events.jsonl")
        # steps but no save yet: not stepping; the wait times out with its own code
        blob.upload_from_string(_events("run_start", "step", "step"))
        p = elastix(fake, "workload", "wait", "demo", "--for", "stepping", "--timeout", "2s",
                    check=False)
        assert p.returncode == 6 and "to be stepping (it is Running)" in p.stderr, p.stderr
        blob.upload_from_string(_events("run_start", "step", "snapshot_taken", "step"))
        elastix(fake, "workload", "wait", "demo", "--for", "stepping", "--timeout", "30s")
        elastix(fake, "workload", "delete", "demo")
        elastix(fake, "workload", "wait", "demo", "--for", "deleted", "--timeout", "60s")
    p = elastix(fake, "workload", "delete", "demo", check=False)
    assert p.returncode == 1
    p = elastix(fake, "workload", "delete", "demo", "--ignore-not-found")
    assert "not found, nothing to delete" in p.stderr
    p = elastix(fake, "workload", "wait", "demo", "--for", "stepping", check=False)
    assert p.returncode == 1 and "Traceback" not in p.stderr
