"""A MaxText head log on GKE: its lines carry no time, so measurement asks the API for its
(``timestamps=true``), and ``elastix logs --timestamps`` shows them as kubectl does.

The log is one MaxText really printed (``tests/fixtures/maxtext/elastic.log``: an in-process
recovery through pathwaysutils' ``elastic_retry``), served by the fake API server with the
times it was recorded with."""

from __future__ import annotations

import json
from pathlib import Path

import fake_cluster as gke
import pytest

HEAD = ("jobset.sigs.k8s.io/jobset-name=demo,"
        "jobset.sigs.k8s.io/replicatedjob-name=pathways-head")
LINES = (Path(__file__).parents[1] / "fixtures" / "maxtext" / "elastic.log").read_text().splitlines()
DETECTED = next(x for x in LINES if "Elastic event detected" in x)


@pytest.fixture
def head(tmp_path):
    f = gke.start_fake(tmp_path, {"log_interval": 0.1, "terminate_delay": 0.2})
    gke.elastix(f, *gke.CREATE)
    pod = gke.wait_for(lambda: [p for p in f.pods(HEAD)
                                if p["status"].get("phase") == "Running"], what="head")[0]
    f.admin("log", {"pod": pod["metadata"]["name"], "container": pod["spec"]["containers"][0]
                    ["name"], "lines": LINES, "timestamps": True})
    yield f
    gke.stop(f)


def test_goodput_measures_maxtext_from_the_api_times(head):
    d = json.loads(gke.elastix(head, "workload", "goodput", "demo", "-o", "json").stdout)
    assert d["source"] == "log"
    (r,) = [x for x in d["recoveries"] if x["start"] == DETECTED[:23] + "Z"]
    assert r["phases"] == {"detection": 0.0, "cleanup": 0.084, "waiting_for_slices": 10.116,
                           "restore": 2.86, "first_step": 4.576}
    assert r["steps_lost"] == 49 and r["restore_bytes"] is None
    assert r["not_in_log"] == ["restore_bytes", "lost_slices"]


def test_logs_timestamps_as_kubectl(head):
    stamped = gke.elastix(head, "logs", "demo", "--timestamps").stdout.splitlines()
    plain = gke.elastix(head, "logs", "demo").stdout.splitlines()
    ours = [x for x in stamped if "Elastic event detected" in x]
    # the fake keeps microseconds, as RFC3339Nano with three zeros
    assert ours == [DETECTED[:26] + "000Z " + DETECTED.partition(" ")[2]]
    recorded = [x.partition(" ")[2] for x in LINES]  # the fake's own trainer keeps logging
    assert [x.partition(" ")[2] for x in stamped if "fake" not in x] == recorded
    assert [x for x in plain if "fake" not in x] == recorded
    assert DETECTED.partition(" ")[2] in plain
