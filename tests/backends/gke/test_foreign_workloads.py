"""Workloads elastix did not submit: a Pathways JobSet made by xpk, by gcluster or by a user's
YAML is read and tested as elastix's own are (docs/gke.md, "Workloads elastix did not submit").

Each JobSet is created with the official ``kubernetes`` client, never by elastix, from the
manifest its launcher renders: ``tests/fixtures/xpk-1.16.0-pathways-elastic.yaml`` (xpk 1.16.0's
``workload create-pathways --dry-run``) and ``tests/fixtures/gcluster/pathways-elastic.yaml``
(Cluster Toolkit's ``pathways_jobset.tmpl`` @ c765092, rendered for the MaxText elastic guide).
Their heads print what real MaxText printed (``tests/fixtures/maxtext/elastic.log``) after their
launcher's own wrapper line, and the same log on an elastix-made workload must give the same
numbers.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import fake_cluster as gke
import pytest
import yaml

FIXTURES = Path(__file__).parents[2] / "fixtures"
XPK = yaml.safe_load((FIXTURES / "xpk-1.16.0-pathways-elastic.yaml").read_text())
GCLUSTER = yaml.safe_load((FIXTURES / "gcluster" / "pathways-elastic.yaml").read_text())
LINES = (FIXTURES / "maxtext" / "elastic.log").read_text().splitlines()
DETECTED = next(i for i, x in enumerate(LINES) if "Elastic event detected" in x)
# What each launcher's bash -c wrapper prints before the trainer's first line.
WRAPPER = {"demo": [], "elastic-demo": ["XPK Start: Tue Dec  1 11:48:07 UTC 2026"],
           "elastic-qwen3": ['GCluster Start: Tue Dec  1 11:48:07 UTC 2026']}
JS = "jobset.sigs.k8s.io/"


def _kube(fake):
    from kubernetes import config

    return config.new_client_from_config(config_file=str(fake.kubeconfig))


def _create(fake, body: dict, namespace: str = "default") -> None:
    """Create a JobSet the way its launcher does: the API server, not elastix."""
    from kubernetes import client

    client.CustomObjectsApi(_kube(fake)).create_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", copy.deepcopy(body))


def _delete(fake, name: str, namespace: str = "default") -> None:
    from kubernetes import client

    client.CustomObjectsApi(_kube(fake)).delete_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", name)


def _head(fake, name: str) -> dict:
    return gke.wait_for(lambda: [p for p in fake.pods(f"{JS}jobset-name={name},"
                                                      f"{JS}replicatedjob-name=pathways-head")
                                 if p["status"].get("phase") == "Running"], what="head")[0]


def _log(fake, name: str, lines: list[str]) -> None:
    head = _head(fake, name)
    fake.admin("log", {"pod": head["metadata"]["name"],
                       "container": head["spec"]["containers"][0]["name"],
                       "lines": lines, "timestamps": True})


def _stamped(lines: list[str], at: dt.datetime) -> list[str]:
    """``lines`` moved in time by whole milliseconds so that the first is at ``at`` (within
    1 ms): their gaps, and the millisecond each falls in relative to the others, are kept, so
    what is measured from them rounds as from the recorded times."""
    def t(x: str) -> dt.datetime:
        return dt.datetime.fromisoformat(x.partition(" ")[0][:26] + "+00:00")

    shift = dt.timedelta(milliseconds=(at - t(lines[0])) // dt.timedelta(milliseconds=1))
    return [(t(x) + shift).strftime("%Y-%m-%dT%H:%M:%S.%fZ") + " " + x.partition(" ")[2]
            for x in lines]


def _wrapped(name: str, lines: list[str]) -> list[str]:
    stamp = lines[0].partition(" ")[0]
    return [f"{stamp} {w}" for w in WRAPPER[name]] + lines


def _all_running(fake, n: int) -> None:
    gke.wait_for(lambda: sum(p["status"].get("phase") == "Running" for p in fake.pods()) >= n,
                 timeout=60, what=f"{n} pods running")


@pytest.fixture
def world(tmp_path):
    """An elastix-made workload (demo, 2 slices), xpk's (elastic-demo, 3) and gcluster's
    (elastic-qwen3, 3), every pod running."""
    fake = gke.start_fake(tmp_path, {"log_interval": 0.2, "terminate_delay": 0.2})
    try:
        gke.elastix(fake, *gke.CREATE)
        _create(fake, XPK)
        _create(fake, GCLUSTER)
        _all_running(fake, 9 + 13 + 13)
        yield fake
    finally:
        gke.stop(fake)


def test_list_all_shows_jobsets_others_made(world):
    plain = gke.elastix(world, "workload", "list").stdout
    assert "demo" in plain and "elastic-demo" not in plain and "elastic-qwen3" not in plain
    table = gke.elastix(world, "workload", "list", "--all").stdout.splitlines()
    assert table[0].split()[:3] == ["NAME", "MADE", "BY"]
    rows = {x.split()[0]: x.split()[1:3] for x in table[1:]}
    assert rows == {"demo": ["elastix", "Running"], "elastic-demo": ["xpk", "Running"],
                    "elastic-qwen3": ["gcluster", "Running"]}
    items = json.loads(gke.elastix(world, "workload", "list", "--all", "-o", "json").stdout)
    assert {i["name"]: (i["made_by"], i["num_slices"]) for i in items} == {
        "demo": ("elastix", 2), "elastic-demo": ("xpk", 3), "elastic-qwen3": ("gcluster", 3)}
    names = gke.elastix(world, "workload", "list", "--all", "-o", "name").stdout.split()
    assert names == ["workload/demo", "workload/elastic-demo", "workload/elastic-qwen3"]


@pytest.mark.parametrize(("name", "maker", "container"), [
    ("elastic-demo", "xpk", "jax-tpu"), ("elastic-qwen3", "gcluster", "workload-container")])
def test_status_and_logs_read_the_head_from_the_jobset_labels(world, name, maker, container):
    _log(world, name, _wrapped(name, LINES))
    st = gke.elastix(world, "workload", "status", name).stdout
    assert f"made by {maker}, not elastix" in st.splitlines()[0]
    assert "training: step 299" in st
    d = json.loads(gke.elastix(world, "workload", "status", name, "-o", "json").stdout)
    assert d["num_slices"] == 3 and [len(s["pods"]) for s in d["slices"]] == [4, 4, 4]
    assert d["head"]["name"] == _head(world, name)["metadata"]["name"]
    # The fake kubelet's own "fake-trainer step" lines tick from the head's start, so any
    # number of them may come before the lines this test logged (none on a quiet machine,
    # several on a busy one): they are left out, the order of the rest is what is checked.
    out = [x for x in gke.elastix(world, "logs", name).stdout.splitlines()
           if not x.startswith("fake-trainer step ")]
    assert out[0] == f"fake {container} started on {_head(world, name)['spec']['nodeName']}"
    assert out[1] == WRAPPER[name][0]
    assert LINES[DETECTED].partition(" ")[2] in out


def test_goodput_on_xpk_and_gcluster_equals_elastix_made(world):
    got = {}
    for name in WRAPPER:
        _log(world, name, _wrapped(name, LINES))
        got[name] = json.loads(gke.elastix(world, "workload", "goodput", name, "-o",
                                           "json").stdout)
    assert got["elastic-demo"] == got["demo"] == got["elastic-qwen3"]
    (r,) = [x for x in got["demo"]["recoveries"]
            if x["start"] == LINES[DETECTED][:23] + "Z"]
    assert r["steps_lost"] == 49 and r["phases"]["waiting_for_slices"] == 10.116


def _measured_kill(fake, name: str, tmp_path: Path) -> dict:
    """``chaos kill-worker NAME --slice 1 --measure`` while the head logs MaxText's run: the
    lines up to the failure before the kill, the rest (detection on) once slice 1's pod is
    gone, each part keeping its recorded gaps."""
    now = dt.datetime.now(dt.timezone.utc)
    pre = _stamped(LINES[:DETECTED], now - dt.timedelta(seconds=60))
    _log(fake, name, _wrapped(name, pre))
    sel = f"{JS}jobset-name={name},{JS}replicatedjob-name=worker,{JS}job-index=1"
    before = {p["metadata"]["name"] for p in fake.pods(sel)}
    err = tmp_path / f"{name}.err"
    with open(err, "w") as e:
        proc = subprocess.Popen([sys.executable, "-m", "elastix", "chaos", "kill-worker", name,
                                 "--slice", "1", "--measure", "--timeout", "60s", "-o", "json"],
                                env=fake.env(), stdout=subprocess.PIPE, stderr=e, text=True)
        try:
            gke.wait_for(lambda: before - {p["metadata"]["name"] for p in fake.pods(sel)},
                         timeout=60, what="slice 1 killed")
            # a little later than now: the kill's time is taken once its delete is answered
            post = _stamped(LINES[DETECTED:], dt.datetime.now(dt.timezone.utc)
                            + dt.timedelta(seconds=0.2))
            _log(fake, name, post)
            out, _ = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err.read_text()
    return json.loads(out)


def _timeless(m: dict) -> dict:
    """A measured kill's recovery without what depends on when it ran: its times, and the
    detection (kill to the trainer's detection line, which the test logs after the kill) and
    the downtime holding it."""
    (k,) = m["kills"]
    r = k["recovery"]
    keep = {x: v for x, v in r.items() if x not in (
        "kill", "start", "cleanup_done", "slices_ready", "restored", "first_step_at",
        "prev_event", "downtime_seconds")}
    keep["phases"] = {x: v for x, v in r["phases"].items() if x != "detection"}
    return {**keep, "in_process": k["in_process"], "source": k["source"],
            "state_after": k["state_after"], "jobset_restarts": k["jobset_restarts"]}


def test_measured_kill_on_xpk_and_gcluster_equals_elastix_made(world, tmp_path):
    got = {name: _measured_kill(world, name, tmp_path) for name in WRAPPER}
    for name, m in got.items():
        (k,) = m["kills"]
        assert [x["slice"] for x in k["kills"]] == [1], name
        assert k["recovery"]["phases"]["detection"] >= 0, name
    demo = _timeless(got["demo"])
    assert _timeless(got["elastic-demo"]) == demo == _timeless(got["elastic-qwen3"])
    assert demo["steps_lost"] == 49 and demo["in_process"] and demo["source"] == "log"
    assert demo["phases"] == {"cleanup": 0.084, "waiting_for_slices": 10.116, "restore": 2.86,
                              "first_step": 4.576}  # as workload goodput reads the same log


def test_elastix_adds_nothing_to_a_workload_it_did_not_create(world, tmp_path):
    """Reads, and the one pod delete asked for: no label, annotation, RBAC object or patch."""
    before = {n: world.get(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/{n}")
              for n in ("elastic-demo", "elastic-qwen3")}
    access = world.head_access()
    world.requests(clear=True)
    for name in ("elastic-demo", "elastic-qwen3"):
        for args in (["workload", "status", name], ["logs", name], ["workload", "goodput", name],
                     ["workload", "list", "--all", "-o", "wide"]):
            gke.elastix(world, *args, check=False)
        _measured_kill(world, name, tmp_path)
    writes = [(r["method"], r["path"]) for r in world.requests()
              if r["method"] != "GET"]
    assert [m for m, _ in writes] == ["DELETE", "DELETE"]
    assert all("/pods/" in p and "-worker-1-" in p for _, p in writes)
    for n, js in before.items():
        now = world.get(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/{n}")
        assert now["metadata"].get("labels") == js["metadata"].get("labels")
        assert now["metadata"].get("annotations") == js["metadata"].get("annotations")
        assert now["spec"] == js["spec"]
    assert world.head_access() == access  # only demo's, made by its create


# --- bad input: one line, its exit code ------------------------------------------------------

def _one_error(p: subprocess.CompletedProcess, code: int) -> str:
    assert p.returncode == code, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), \
        p.stderr
    assert "Traceback" not in p.stderr
    return lines[0]


def test_a_jobset_that_is_not_pathways_is_refused_in_one_line(fake_cluster):
    plain = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
             "metadata": {"name": "plain"},
             "spec": {"replicatedJobs": [{"name": "trainer", "replicas": 2, "template": {
                 "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                     {"name": "main", "image": "img:1"}]}}}}}]}}
    _create(fake_cluster, plain)
    for args in (["workload", "status", "plain"], ["logs", "plain"],
                 ["chaos", "kill-worker", "plain", "--slice", "1"],
                 ["workload", "goodput", "plain"]):
        line = _one_error(gke.elastix(fake_cluster, *args, check=False), 2)
        assert line == ("error: JobSet plain in namespace default is not a Pathways workload: "
                        "it has no pathways-head and no worker replicated job (it has: "
                        "trainer)"), args
    assert gke.elastix(fake_cluster, "workload", "list", "--all").stdout.startswith("no gke")


def test_a_name_in_other_namespaces_is_named_with_the_flag(fake_cluster):
    from kubernetes import client

    for ns in ("team-a", "team-b"):
        client.CoreV1Api(_kube(fake_cluster)).create_namespace({"metadata": {"name": ns}})
    _create(fake_cluster, XPK, "team-a")
    line = _one_error(gke.elastix(fake_cluster, "workload", "status", "elastic-demo",
                                  check=False), 2)
    assert line == ("error: workload elastic-demo is not in namespace default: it is in "
                    "namespace team-a")
    _create(fake_cluster, XPK, "team-b")
    for args in (["workload", "status", "elastic-demo"], ["logs", "elastic-demo"],
                 ["chaos", "kill-worker", "elastic-demo", "--dry-run=server"]):
        line = _one_error(gke.elastix(fake_cluster, *args, check=False), 2)
        assert line == ("error: workload elastic-demo is not in namespace default, and "
                        "namespaces team-a, team-b each have one"), args
    gke.wait_for(lambda: [p for p in fake_cluster.pods(namespace="team-b")
                          if p["status"].get("phase") == "Running"], what="team-b's pods")
    st = gke.elastix(fake_cluster, "workload", "status", "elastic-demo", "-n", "team-b").stdout
    assert "namespace team-b" in st.splitlines()[0]


def test_a_name_that_matches_nothing_is_one_line(fake_cluster):
    line = _one_error(gke.elastix(fake_cluster, "workload", "status", "nosuch", check=False), 1)
    assert line == "error: JobSet 'nosuch' not found in namespace default: no workload of that name"


def test_a_foreign_workload_deleted_during_a_wait_ends_it_with_exit_4(fake_cluster, tmp_path):
    _create(fake_cluster, XPK)
    _all_running(fake_cluster, 13)
    proc = subprocess.Popen([sys.executable, "-m", "elastix", "workload", "wait",
                             "elastic-demo", "--for", "stepping", "--timeout", "60s"],
                            env=fake_cluster.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        gke.wait_for(lambda: any(r["path"].endswith("/jobsets/elastic-demo")
                                 for r in fake_cluster.requests()), what="the wait reading it")
        _delete(fake_cluster, "elastic-demo")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 4, out + err
    assert "Traceback" not in err and "deleted" in (out + err)


def test_each_gke_fault_and_advise_on_a_gcluster_workload(fake_cluster):
    _create(fake_cluster, GCLUSTER)
    _all_running(fake_cluster, 13)
    _log(fake_cluster, "elastic-qwen3", _wrapped("elastic-qwen3", LINES))
    assert gke.elastix(fake_cluster, "workload", "advise", "elastic-qwen3").returncode == 0
    out = gke.elastix(fake_cluster, "chaos", "kill-worker", "elastic-qwen3", "--fault", "term",
                      "--slice", "2", "--host", "1").stdout
    assert out.startswith("terminated (SIGTERM, then SIGKILL after 30 s) pod elastic-qwen3-"
                          "worker-2-1-")  # gcluster's --grace-period, from the pod
    out = gke.elastix(fake_cluster, "chaos", "kill-worker", "elastic-qwen3", "--fault", "slice",
                      "--slice", "0").stdout.splitlines()
    assert [x.split()[2].rsplit("-", 2)[0] for x in out] == ["elastic-qwen3-worker-0"] * 4
    out = gke.elastix(fake_cluster, "chaos", "kill-worker", "elastic-qwen3", "--fault",
                      "head").stdout
    assert "elastic-qwen3-pathways-head-0-0-" in out


def test_a_chaos_run_verified_against_another_launcher_s_workload(world, tmp_path):
    """``chaos run`` (a soak of one round) on xpk's workload, its losses checked against
    gcluster's (``--verify --reference``): neither made by elastix. The reference's log is the
    MaxText run whole, which itself recovered at step 250, so the verdict is that it is no
    uninterrupted reference (exit 3), as for a workload elastix made."""
    _log(world, "elastic-qwen3", _wrapped("elastic-qwen3", LINES))  # the reference, whole
    now = dt.datetime.now(dt.timezone.utc)
    _log(world, "elastic-demo", _wrapped("elastic-demo", _stamped(
        LINES[:DETECTED], now - dt.timedelta(seconds=60))))
    sel = f"{JS}jobset-name=elastic-demo,{JS}replicatedjob-name=worker"
    before = {p["metadata"]["name"] for p in world.pods(sel)}
    err = tmp_path / "run.err"
    with open(err, "w") as e:
        proc = subprocess.Popen(
            [sys.executable, "-m", "elastix", "chaos", "run", "elastic-demo", "--kills", "1",
             "--seed", "3", "--verify", "--reference", "elastic-qwen3", "--loss-tolerance",
             "0.0005", "--timeout", "60s",
             "-o", "json"], env=world.env(), stdout=subprocess.PIPE, stderr=e, text=True)
        try:
            gke.wait_for(lambda: before - {p["metadata"]["name"] for p in world.pods(sel)},
                         timeout=60, what="a worker killed")
            _log(world, "elastic-demo", _stamped(LINES[DETECTED:],
                                                 dt.datetime.now(dt.timezone.utc)))
            out, _ = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 3, err.read_text()
    report = json.loads(out)
    (kill,) = report["kills"]
    assert kill["in_process"] and kill["recovery"]["steps_lost"] == 49
    assert report["plan"]["rounds"][0]["fault"] == "kill"
    v = report["verify"]
    assert not v["ok"] and v["reference"] == "elastic-qwen3", v
    assert v["reason"] == "the reference was not uninterrupted: it restored step 200 from " \
                          "checkpoint", v


def test_logs_follow_a_gcluster_head_until_its_jobset_goes(world, tmp_path):
    """``logs -f`` on gcluster's workload: its head's ``workload-container`` (found from the
    JobSet's labels, not elastix's) followed as the fake kubelet writes it, until the JobSet is
    deleted."""
    head = _head(world, "elastic-qwen3")["metadata"]["name"]
    out = tmp_path / "follow.out"
    with open(out, "w") as o:
        proc = subprocess.Popen([sys.executable, "-m", "elastix", "logs", "elastic-qwen3", "-f"],
                                env=world.env(), stdout=o, stderr=subprocess.PIPE, text=True)
        try:
            gke.wait_for(lambda: sum(f"on pod {head}" in x for x in out.read_text()
                                     .splitlines()) >= 3, timeout=60, what="lines followed")
            _delete(world, "elastic-qwen3")
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert out.read_text().startswith("fake workload-container started on ")
