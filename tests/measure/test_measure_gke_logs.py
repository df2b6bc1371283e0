"""Goodput on GKE from the head's log lines, through the real CLI and the fake API server.

The GKE backend cannot reach the events file here, so measurement reads the head pod's log; the
numbers must equal those from the same run's events.jsonl.
"""

from __future__ import annotations

import json

import fake_cluster as gke
import pytest
from measure_helpers import recorded_run, to_jsonl, to_log

from elastix.main import main

HEAD = ("jobset.sigs.k8s.io/jobset-name=demo,"
        "jobset.sigs.k8s.io/replicatedjob-name=pathways-head")


@pytest.fixture
def fake(tmp_path):
    f = gke.start_fake(tmp_path, {"log_interval": 0.1, "terminate_delay": 0.2})
    yield f
    gke.stop(f)


def test_goodput_from_gke_head_log_equals_events(fake, tmp_path, capsys):
    gke.elastix(fake, *gke.CREATE)
    head = gke.wait_for(lambda: [p for p in fake.pods(HEAD)
                                 if p["status"].get("phase") == "Running"], what="head")[0]
    container = head["spec"]["containers"][0]["name"]
    recs, _ = recorded_run()
    fake.admin("log", {"pod": head["metadata"]["name"], "container": container,
                       "lines": to_log(recs)})
    p = gke.elastix(fake, "workload", "goodput", "demo", "-o", "json")
    from_gke = json.loads(p.stdout)
    assert from_gke.pop("source") == "log"
    ev = tmp_path / "events.jsonl"
    ev.write_text(to_jsonl(recs))
    assert main(["workload", "goodput", "--events", str(ev), "-o", "json"]) == 0
    from_events = json.loads(capsys.readouterr().out)
    from_events.pop("source")
    assert from_gke == from_events
    assert from_gke["recoveries"][0]["steps_lost"] == 4
