"""End to end: the README's GKE path against a cluster that schedules.

``elastix cluster create`` talks to the fake GKE API, whose node pools become Nodes of the fake
Kubernetes API server (served over TLS, found through the cluster lookup as on GKE); it installs
JobSet there; ``elastix workload create`` with the README's flags (defaults otherwise) must get
every pod Running on those Nodes; ``elastix chaos kill-worker`` kills one and its replacement
must run. Each side is checked against the other, not against its own assumptions: the head
pool ``cluster create`` makes must be the one ``workload create`` selects, and big enough.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from fake_cluster import start_fake, stop, wait_for
from fake_gke import FakeGke

PROJECT, ZONE, CLUSTER = "my-proj-1", "us-central1-a", "demo-cluster"
SLICES, HOSTS = 3, 4  # README: --tpu-type v5litepod-16 --num-slices 3; v5litepod-16 = 4 hosts
TARGET = ["--cluster", CLUSTER, "--project", PROJECT, "--location", ZONE]


def _jobset_release(path: Path) -> Path:
    """A JobSet release manifest (tests/provision's builder: the real v0.12.0 CRD inside)."""
    src = Path(__file__).resolve().parents[2] / "provision" / "jobset_manifest.py"
    spec = importlib.util.spec_from_file_location("jobset_manifest_e2e", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.write(path, mod.manifest())


@pytest.fixture
def world(tmp_path):
    kube = start_fake(tmp_path, {"start_delay": 0.02, "log_interval": 0.2}, crd=False, tls=True)
    try:
        with FakeGke(kube=kube, ca_pem=kube.ca_pem) as gke:
            env = gke.cli_env(tmp_path)
            yield kube, gke, env
    finally:
        stop(kube)


def _elastix(env: dict, *args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "elastix", *args], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, f"elastix {' '.join(args)} -> {out.returncode}\n{out.stdout}" \
                                f"\n{out.stderr}"
    return out


def _running(kube, selector: str = "jobset.sigs.k8s.io/jobset-name=demo") -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in kube.pods(selector)
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}


def test_cluster_create_then_workload_runs_and_survives_a_kill(world, tmp_path):
    kube, gke, env = world
    _elastix(env, "cluster", "create", CLUSTER, "--project", PROJECT, "--zone", ZONE,
             "--tpu-type", "v5litepod-16", "--num-slices", str(SLICES),
             "--jobset-manifest", str(_jobset_release(tmp_path / "jobset.yaml")))
    nodes = kube.get("/api/v1/nodes")["items"]
    assert len(nodes) == 1 + SLICES * HOSTS  # the head pool's node and every TPU host
    assert [m for m, _, _ in gke.requests if m == "POST"].count("POST") >= 1 + SLICES

    _elastix(env, "workload", "create", "demo", "--tpu-type", "v5litepod-16",
             "--num-slices", str(SLICES), "--elastic-slices", str(SLICES),
             "--max-slice-restarts", "10", "--docker-image", "img:1",
             "--command", "elastix-train --preset qwen3-0.6b --checkpoint-dir gs://bucket/run1",
             "--events-path", "gs://bucket/run1/events.jsonl", "--no-fit-check", *TARGET)
    wait_for(lambda: len(_running(kube)) == 1 + SLICES * HOSTS, timeout=30,
             what=f"every pod Running; FailedScheduling: {kube.events('FailedScheduling')[:1]}")
    placed = {p["spec"]["nodeName"] for p in _running(kube).values()}
    assert placed <= {n["metadata"]["name"] for n in nodes}  # bound to the pools' Nodes

    workers = "jobset.sigs.k8s.io/replicatedjob-name=worker"
    before = _running(kube, workers)
    _elastix(env, "chaos", "kill-worker", "demo", "--slice", "1", *TARGET)
    killed = wait_for(lambda: set(before) - set(_running(kube, workers)), what="a worker killed")
    (gone,) = killed
    index = before[gone]["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
    job = before[gone]["metadata"]["labels"]["batch.kubernetes.io/job-name"]

    def replacement() -> list[str]:
        return [n for n, p in _running(kube, workers).items() if n not in before
                and p["metadata"]["labels"]["batch.kubernetes.io/job-name"] == job
                and p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == index]

    wait_for(replacement, timeout=30, what="the killed worker's replacement Running")
