"""A plan written by ``chaos run --dry-run -o yaml`` runs with ``chaos run NAME --plan FILE``
(issue 50), on the local backend (real processes, real SIGKILL) and on GKE (the fake API
server over HTTP): the faults made are the plan's, and the report carries the plan.

The local trainer is tests/measure/event_controller.py (JAX-free); the GKE head's log is a
recorded run's lines, its recovery written once the fault was seen.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import xml.etree.ElementTree as ET

import fake_cluster as gke
import measure_helpers
import pytest
import yaml
from measure_helpers import recorded_run, to_log
from test_measure_live_driver import _cli, _create, _wait_steps

from elastix.backends.local.backend import LocalBackend

SCHEDULE = "- {at: 0s, fault: kill, slice: 1, host: 0}\n- {at: 0s, fault: slice, slice: 0}\n"


def _faults(report: dict) -> list[list[tuple]]:
    return [[(k["fault"], k["slice"], k["host"]) for k in m["kills"]] for m in report["kills"]]


def test_a_dry_runs_plan_runs_on_the_local_backend_and_again_the_same(live_env, tmp_path):
    backend = LocalBackend(live_env["ELASTIX_STATE_DIR"])
    sched = tmp_path / "s.yaml"
    sched.write_text(SCHEDULE)
    _create(live_env, "planned")
    try:
        _wait_steps(backend, "planned", 8)
        p = _cli(live_env, "chaos", "run", "planned", "--schedule", str(sched), "--seed", "5",
                 "--dry-run", "-o", "yaml")
        plan_file = tmp_path / "p.yaml"
        plan_file.write_text(p.stdout)
        plan = yaml.safe_load(p.stdout)
        assert [r.get("slice") for r in plan["rounds"]] == [1, 0] and plan["seed"] == 5
        runs = []
        for n in (1, 2):
            junit = tmp_path / f"c{n}.xml"
            p = _cli(live_env, "chaos", "run", "planned", "--plan", str(plan_file), "-o",
                     "json", "--timeout", "60s", "--junit", str(junit), check=False)
            assert p.returncode == 0, p.stderr
            d = json.loads(p.stdout)
            assert d["plan"] == plan and d["stopped"] == "all 2 kills done"
            assert [k["planned_seconds"] for k in d["kills"]] == [0.0, 0.0]
            props = {x.get("name"): x.get("value") for x in ET.parse(junit).iter("property")}
            assert json.loads(props["plan"]) == plan
            assert props["kill.2.target"] == "slice 0"
            runs.append(_faults(d))
        # the same plan, the same faults: a host of slice 1, then slice 0's hosts (one may
        # have gone down with its slice mate before its own signal)
        first, second = runs
        assert first[0] == second[0] == [("kill", 1, 0)]
        assert {s for _, s, _ in first[1]} == {s for _, s, _ in second[1]} == {0}
        assert all(f == "slice" for f, _, _ in first[1] + second[1])
    finally:
        _cli(live_env, "workload", "delete", "planned", "--wait", check=False)


HEAD = ("jobset.sigs.k8s.io/jobset-name=demo,"
        "jobset.sigs.k8s.io/replicatedjob-name=pathways-head")
WORKERS = "jobset.sigs.k8s.io/jobset-name=demo,jobset.sigs.k8s.io/replicatedjob-name=worker"


@pytest.fixture
def fake(tmp_path):
    f = gke.start_fake(tmp_path, {"log_interval": 30.0, "terminate_delay": 0.2})
    yield f
    gke.stop(f)


def _records(t0: dt.datetime) -> list[dict]:
    """The recorded run (one recovery, docs/events.md), its times counted from ``t0``."""
    was = measure_helpers.T0
    measure_helpers.T0 = t0
    try:
        return recorded_run()[0]
    finally:
        measure_helpers.T0 = was


def test_a_dry_runs_plan_runs_on_gke_through_the_fake_api_server(fake, tmp_path):
    gke.elastix(fake, *gke.CREATE)
    head = gke.wait_for(lambda: [p for p in fake.pods(HEAD)
                                 if p["status"].get("phase") == "Running"], what="head")[0]
    where = {"pod": head["metadata"]["name"], "container": head["spec"]["containers"][0]["name"]}
    gke.wait_for(lambda: len([p for p in fake.pods(WORKERS)
                              if p["status"].get("phase") == "Running"]) == 8, what="workers")
    before = {p["metadata"]["uid"] for p in fake.pods(WORKERS)}
    # stepping after a committed checkpoint, up to now: the recorded run before its fault
    now = dt.datetime.now(dt.timezone.utc)
    recs = _records(now - dt.timedelta(seconds=9))
    cut = next(i for i, r in enumerate(recs) if r["event"] == "elastic_detected")
    fake.admin("log", {**where, "lines": to_log(recs[:cut])})

    def recover() -> None:  # the trainer's recovery, logged once a worker pod was deleted
        def hit() -> bool:
            pods = fake.pods(WORKERS)
            live = {p["metadata"]["uid"] for p in pods
                    if not p["metadata"].get("deletionTimestamp")}
            return not before <= live

        gke.wait_for(hit, timeout=60, what="a worker pod deleted")
        seen = dt.datetime.now(dt.timezone.utc)
        after = _records(seen - dt.timedelta(seconds=9.7))[cut:]
        fake.admin("log", {**where, "lines": to_log(after)[2:]})

    sched = tmp_path / "s.yaml"
    sched.write_text("- {at: 0s, fault: kill, slice: 1, host: 2}\n")
    p = gke.elastix(fake, "chaos", "run", "demo", "--schedule", str(sched), "--dry-run",
                    "-o", "yaml")
    plan_file = tmp_path / "p.yaml"
    plan_file.write_text(p.stdout)
    t = threading.Thread(target=recover, daemon=True)
    t.start()
    p = gke.elastix(fake, "chaos", "run", "demo", "--plan", str(plan_file), "-o", "json",
                    "--timeout", "60s", check=False, timeout=120)
    t.join(5)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["plan"] == yaml.safe_load(plan_file.read_text())
    assert _faults(d) == [[("kill", 1, 2)]]
    (k,) = d["kills"]
    assert k["recovery"]["complete"] and k["source"].startswith("log"), k
