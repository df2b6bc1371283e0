"""On GKE, measurement reads the trainer's events from the gs:// URI given at create time.

Real parts: the fake API server process, fake-gcs-server, google-cloud-storage over HTTP, the
real CLI as a subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path

from fake_cluster import CREATE, elastix
from fake_gcs import fake_gcs

FIXTURE = Path(__file__).resolve().parents[2] / "measure" / "fixtures" / "real_run2.events.jsonl"
URI = "gs://runs/demo/events.jsonl"


def test_goodput_reads_events_from_gcs(fake_cluster, tmp_path, monkeypatch):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    with fake_gcs(tmp_path, buckets=("runs",)) as url:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
        r = elastix(fake_cluster, *CREATE, "--events-path", URI)
        assert r.returncode == 0, r.stderr
        # Before the trainer wrote anything: no object yet, so goodput falls back to the head log.
        r = elastix(fake_cluster, "workload", "goodput", "demo", "-o", "json", check=False)
        if r.returncode == 0:
            assert not json.loads(r.stdout)["source"].startswith("events")
        else:
            assert "no trainer events found" in r.stderr
        client = storage.Client(project="t", credentials=AnonymousCredentials())
        client.bucket("runs").blob("demo/events.jsonl").upload_from_filename(str(FIXTURE))
        from_gcs = json.loads(elastix(fake_cluster, "workload", "goodput", "demo",
                                      "-o", "json").stdout)
        local = json.loads(elastix(fake_cluster, "workload", "goodput", "--events",
                                   str(FIXTURE), "-o", "json").stdout)
    assert from_gcs.pop("source").startswith("events")
    local.pop("source")
    assert from_gcs == local
    assert from_gcs["last_step"] == 400


def test_events_path_must_be_a_gcs_object(fake_cluster):
    r = elastix(fake_cluster, *CREATE, "--events-path", "/tmp/events.jsonl", check=False)
    assert r.returncode == 2
    assert "events_path: '/tmp/events.jsonl' is not a gs:// object URI" in r.stderr
