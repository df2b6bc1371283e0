"""Preflight through ``--cluster`` counts the Nodes the cluster reports, not the pools' size.

``elastix cluster create`` against the fake GKE API, whose pools become Nodes of the fake
Kubernetes API server (TLS, found through the cluster lookup as on GKE); then a TPU host goes
away (as a resize or a repair does) while the pool still says how many it was created with.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import pytest
from fake_cluster import start_fake, stop
from fake_gke import FakeGke

PROJECT, ZONE, CLUSTER = "my-proj-1", "us-central1-a", "demo-cluster"
TARGET = ["--cluster", CLUSTER, "--project", PROJECT, "--location", ZONE]
WORKLOAD = ["workload", "create", "demo", "--tpu-type", "v5litepod-16", "--num-slices", "2",
            "--docker-image", "img:1", "--command", "python train.py", *TARGET]


@pytest.fixture
def world(tmp_path):
    kube = start_fake(tmp_path, {"start_delay": 0.02}, tls=True)
    try:
        with FakeGke(kube=kube, ca_pem=kube.ca_pem) as gke:
            env = gke.cli_env(tmp_path)
            yield kube, env
    finally:
        stop(kube)


def _elastix(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "elastix", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def _delete_node(kube, name: str) -> None:
    req = urllib.request.Request(f"{kube.url}/api/v1/nodes/{name}", method="DELETE")
    urllib.request.urlopen(req, timeout=10, context=kube._ctx).read()


def test_a_host_gone_from_a_pool_is_seen_and_the_roles_note_is_printed(world):
    kube, env = world
    out = _elastix(env, "cluster", "create", CLUSTER, "--project", PROJECT, "--zone", ZONE,
                   "--tpu-type", "v5litepod-16", "--num-slices", "2", "--skip-jobset")
    assert out.returncode == 0, out.stderr
    _delete_node(kube, f"gke-{CLUSTER}-tpu-slice-1-3")
    out = _elastix(env, *WORKLOAD)
    assert out.returncode == 2, out.stderr
    line = " ".join(out.stderr.split())
    assert "the cluster has room for 1 (nodes per pool: tpu-slice-0: 4, tpu-slice-1: 3)" in line
    assert "pass --num-slices 1" in line
    out = _elastix(env, *[a if a != "2" else "1" for a in WORKLOAD])
    assert out.returncode == 0, out.stderr
    note = " ".join(out.stderr.split())
    assert "note: preflight did not check the IAM roles of the nodes' service account (the " \
           "Compute Engine default service account)" in note
    assert "gs://cloud-pathways-staging" in note
