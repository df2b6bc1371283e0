"""The whole GKE journey with the real CLI as subprocesses against the fake API server:
create -> list/status -> logs -f -> kill-worker -> replacement pod -> head restart -> delete."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

from fake_cluster import CREATE, elastix, interrupt, wait_for

JS = "jobset.sigs.k8s.io/"
HEAD = f"{JS}jobset-name=demo,{JS}replicatedjob-name=pathways-head"


def _running(fake, selector):
    return [p for p in fake.pods(selector) if p["status"].get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")]


class Follower:
    """``elastix logs -f`` in the background; its stdout and stderr lines arrive on queues."""

    def __init__(self, fake, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "elastix", "logs", "demo", "-f", *args],
                                     env=fake.env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.out: list[str] = []
        self.err: list[str] = []
        for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._pump, args=(stream, sink), daemon=True).start()

    @staticmethod
    def _pump(stream, sink) -> None:
        for line in stream:
            sink.append(line.rstrip("\n"))

    def stop(self) -> int:
        return interrupt(self.proc, lambda: "\n".join(self.err))


def test_journey(fake_cluster):
    fake = fake_cluster
    out = elastix(fake, *CREATE, "--max-restarts", "1").stderr
    assert "created" in out and "demo" in out
    again = elastix(fake, *CREATE, check=False)
    assert again.returncode == 2  # bad input: the name is taken
    assert "already exists" in again.stderr and "--replace" in again.stderr
    assert "Traceback" not in again.stderr

    wait_for(lambda: len(_running(fake, f"{JS}jobset-name=demo")) == 9, what="9 pods running")
    listed = elastix(fake, "workload", "list").stdout
    assert "demo" in listed and "Running" in listed and "2/2" in listed
    st = json.loads(elastix(fake, "workload", "status", "demo", "-o", "json").stdout)
    assert st["state"] == "Running" and st["num_slices"] == 2
    assert [len(s["pods"]) for s in st["slices"]] == [4, 4]
    assert st["head"]["phase"] == "Running"
    table = elastix(fake, "workload", "status", "demo").stdout
    assert "SLICE" in table and "4/4" in table

    # logs -f on the head: lines arrive while it runs
    old_head = _running(fake, HEAD)[0]["metadata"]["name"]
    follower = Follower(fake)
    try:
        wait_for(lambda: any(f"on pod {old_head}" in x for x in follower.out), what="head log")

        # kill a worker: its replacement appears (same slice and host, new pod)
        kill = elastix(fake, "chaos", "kill-worker", "demo", "--slice", "1", "--host", "2",
                       "-o", "json").stdout
        rec = json.loads(kill)
        assert (rec["slice"], rec["host"], rec["dry_run"]) == (1, 2, False)
        assert rec["time"].endswith("Z") and len(rec["time"]) == len("2026-01-01T00:00:00.000Z")
        sel = f"{JS}jobset-name=demo,{JS}job-index=1,batch.kubernetes.io/job-completion-index=2"
        repl = wait_for(lambda: [p for p in _running(fake, sel)
                                 if p["metadata"]["name"] != rec["pod"]], what="replacement")
        assert repl[0]["metadata"]["labels"][f"{JS}restart-attempt"] == "0"  # no JobSet restart
        st = json.loads(elastix(fake, "workload", "status", "demo", "-o", "json").stdout)
        assert st["slices"][1]["job_failures"] == 1 and st["jobset_restarts"] == 0

        # kill the head: the JobSet restarts and logs -f follows the new head, saying so
        # (a plain API call, as kubectl delete --force sends it: no kubectl, no ~/.kube/cache)
        import urllib.request

        req = urllib.request.Request(
            f"{fake.url}/api/v1/namespaces/default/pods/{old_head}?gracePeriodSeconds=0",
            method="DELETE")
        assert urllib.request.urlopen(req, timeout=10).status == 200
        new_head = wait_for(lambda: [p["metadata"]["name"] for p in _running(fake, HEAD)
                                     if p["metadata"]["name"] != old_head], what="new head")[0]
        wait_for(lambda: any(f"on pod {new_head}" in x for x in follower.out),
                 what="new head's log")
        # said on stderr before the new head's first line reaches stdout; two pipes, read by
        # two threads: under load the stderr line may be read later, so it is waited for too
        wait_for(lambda: any("replaced by" in x and new_head in x for x in follower.err),
                 what=f"'replaced by {new_head}' on stderr")
    finally:
        rc = follower.stop()
    assert rc == 130

    st = json.loads(elastix(fake, "workload", "status", "demo", "-o", "json").stdout)
    assert st["jobset_restarts"] == 1
    elastix(fake, "workload", "delete", "demo", "--wait")
    assert fake.pods(f"{JS}jobset-name=demo") == []
    gone = elastix(fake, "workload", "status", "demo", check=False)
    assert gone.returncode == 1 and "JobSet 'demo' not found" in gone.stderr


def test_logs_reconnects_after_a_cut_stream_without_repeating_lines(fake_cluster):
    fake = fake_cluster
    elastix(fake, *CREATE)
    head = wait_for(lambda: _running(fake, HEAD), what="head")[0]["metadata"]["name"]
    follower = Follower(fake)
    try:
        wait_for(lambda: len([x for x in follower.out if "step" in x]) >= 2, what="log lines")
        fake.admin("cut", {"pod": head})
        wait_for(lambda: any("was cut; reconnecting" in x for x in follower.err), what="notice")
        n = len(follower.out)
        wait_for(lambda: len(follower.out) >= n + 3, what="lines after the reconnection")
    finally:
        follower.stop()
    steps = [x for x in follower.out if "fake-trainer step" in x]
    numbers = [int(x.split()[2]) for x in steps]
    assert numbers == sorted(set(numbers)), "a line was repeated or reordered after reconnecting"
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))), "a line was lost"


def test_status_explains_a_stuck_workload(tmp_path):
    from fake_cluster import start_fake, stop

    fake = start_fake(tmp_path, {"unschedulable": {"cloud.google.com/gke-tpu-topology": "4x4"}})
    try:
        elastix(fake, *CREATE)
        wait_for(lambda: _running(fake, HEAD), what="head")
        st = json.loads(elastix(fake, "workload", "status", "demo", "-o", "json").stdout)
        assert all(s["state"] == "Pending" for s in st["slices"])
        assert len(st["reasons"]) == 1
        assert st["reasons"][0].startswith("8 worker pods Pending")
        assert "Unschedulable" in st["reasons"][0] and "gke-tpu-topology=4x4" in st["reasons"][0]
        text = elastix(fake, "workload", "status", "demo").stdout
        assert "why it is not running" in text and "8 worker pods Pending" in text
        dry = elastix(fake, "chaos", "kill-worker", "demo", check=False)
        assert dry.returncode == 1 and "no running worker pod" in dry.stderr
    finally:
        stop(fake)


def test_kill_worker_random_is_reproducible_and_dry_run_kills_nothing(fake_cluster):
    fake = fake_cluster
    elastix(fake, *CREATE)
    wait_for(lambda: len(_running(fake, f"{JS}jobset-name=demo")) == 9, what="pods")
    before = {p["metadata"]["name"] for p in fake.pods(f"{JS}jobset-name=demo")}
    # --dry-run=server reads the pods to name the one the seed picks; --dry-run is offline
    a = json.loads(elastix(fake, "chaos", "kill-worker", "demo", "--seed", "7",
                           "--dry-run=server", "-o", "json").stdout)
    b = json.loads(elastix(fake, "chaos", "kill-worker", "demo", "--seed", "7",
                           "--dry-run=server", "-o", "json").stdout)
    assert a["pod"] == b["pod"] and a["dry_run"] is True
    assert {p["metadata"]["name"] for p in fake.pods(f"{JS}jobset-name=demo")} == before
    text = elastix(fake, "chaos", "kill-worker", "demo", "--seed", "7").stdout
    assert text.startswith(f"killed pod {a['pod']} (slice {a['slice']}, host {a['host']})")
    assert a["pod"] not in {p["metadata"]["name"] for p in fake.pods(f"{JS}jobset-name=demo")}
    bad = elastix(fake, "chaos", "kill-worker", "demo", "--slice", "5", check=False)
    assert bad.returncode == 2 and "out of range" in bad.stderr
    bad = elastix(fake, "chaos", "kill-worker", "demo", "--slice", "0", "--host", "4",
                  check=False)
    assert bad.returncode == 2 and "--host 4 is out of range: demo has 4 hosts per slice " \
        "(0-3)" in bad.stderr


def test_list_shows_only_elastix_workloads(fake_cluster):
    """A JobSet someone else created in the same namespace is not an elastix workload."""
    import urllib.request

    import yaml

    fake = fake_cluster
    elastix(fake, *CREATE)
    manifest = yaml.safe_load(elastix(fake, *CREATE, "--dry-run").stdout)
    manifest["metadata"]["name"] = "not-ours"
    manifest["metadata"]["labels"] = {"team": "other"}
    req = urllib.request.Request(
        f"{fake.url}/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets", method="POST",
        data=json.dumps(manifest).encode(), headers={"Content-Type": "application/json"})
    assert urllib.request.urlopen(req, timeout=10).status == 201
    names = [w["name"] for w in json.loads(elastix(fake, "workload", "list", "-o", "json").stdout)]
    assert names == ["demo"]
