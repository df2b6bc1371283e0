"""Preflight sizes what a restore moves through the head pod (issue 37, the seed's failure).

The real ``elastix`` CLI against the fake Kubernetes API server, with its checkpoints on
fake-gcs-server listed by the real google-cloud-storage client. A committed step's size is
its objects' sizes as the server lists them; the 135 GiB object is a sparse file in the
server's filesystem backend (what it lists is its file size), so nothing that large is written.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from fake_cluster import start_fake, stop
from fake_gcs import emulator_env, fake_gcs

GIB = 2 ** 30
BUCKET = "ckpts"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"


@pytest.fixture
def world(tmp_path):
    kube = start_fake(tmp_path)
    try:
        with fake_gcs(tmp_path, (BUCKET,)) as url:
            env = dict(kube.env(), **emulator_env(url))
            env.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
            yield kube, env, tmp_path / "fs" / BUCKET
    finally:
        stop(kube)


def _put(env: dict, name: str, data: bytes = b"x") -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    os.environ["STORAGE_EMULATOR_HOST"] = env["STORAGE_EMULATOR_HOST"]
    try:
        client = storage.Client(project="t", credentials=AnonymousCredentials())
        client.bucket(BUCKET).blob(name).upload_from_string(data)
    finally:
        del os.environ["STORAGE_EMULATOR_HOST"]


def _step(env: dict, root, step: str, gib: int, *files: str) -> None:
    """A checkpoint step ``step`` (``run/N``) in the bucket: a ``d/shard`` of ``gib`` GiB (sparse,
    on the emulator's disk at ``root``) and ``files`` beside it."""
    for f in ("d/shard", *files):
        _put(env, f"{step}/{f}")
    with open(root / step / "d" / "shard", "r+b") as f:
        f.truncate(gib * GIB)


def _create(env: dict, command: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "elastix", "workload", "create", "big", "--tpu-type",
         "v5litepod-16", "--num-slices", "1", "--docker-image", "img:1", "--command", command,
         "--proxy-memory", "100Gi", "--no-fit-check", *extra], env=env, capture_output=True,
        text=True, timeout=120)  # the fit check (its own tests) compiles for the slices


def test_a_135_gib_step_is_refused_with_both_fixes_and_passes_with_persistence(world):
    kube, env, root = world
    _step(env, root, "run1/100", 135, "manifest.ocdbt", "commit_success.txt")
    _step(env, root, "run1/200", 500, "manifest.ocdbt")  # a newer step that never committed
    cmd = f"elastix-train --preset tiny --checkpoint-dir gs://{BUCKET}/run1"
    out = _create(env, cmd)
    assert out.returncode == 2, out.stderr
    said = " ".join(out.stderr.split())
    assert "a restore moves 135.0 GiB through jax-tpu" in said, said
    assert f"the newest committed step 100 under gs://{BUCKET}/run1" in said
    assert "against its 93.1 GiB memory limit" in said  # the default --head-memory 100G
    # Refused at the limit itself (the seed's OOM), not at a margin of elastix's own.
    assert "--pathways-persistence" in said and "--proxy-memory above 135.0 GiB" in said
    assert "--head-memory above 135.0 GiB" in said
    assert "Traceback" not in out.stderr
    assert kube.get(JOBSETS)["items"] == []  # nothing was submitted

    out = _create(env, cmd, "--pathways-persistence")
    assert out.returncode == 0, out.stderr
    assert [j["metadata"]["name"] for j in kube.get(JOBSETS)["items"]] == ["big"]


def test_a_first_run_is_sized_from_its_model_and_the_seeds_run_is_refused(world):
    """No checkpoint yet: MaxText's Qwen3-4B on 3 slices moves 3 replicas of ~45 GiB, the
    seed's 135 GiB; on one slice it fits; an unknown model is said once, not refused."""
    kube, env, _ = world
    mt = (f"python3 -m MaxText.train MaxText/configs/base.yml run_name=r1 "
          f"base_output_directory=gs://{BUCKET}/out model_name=qwen3-4b")
    out = _create(env, mt, "--num-slices", "3")
    assert out.returncode == 2, out.stderr
    said = " ".join(out.stderr.split())
    assert "a restore moves 134.1 GiB through pathways-proxy" in said, said
    assert "x 3 slices" in said
    assert "MaxText model_name=qwen3-4b" in said
    out = _create(env, mt.replace("qwen3-4b", "my-own-model"))
    assert out.returncode == 0, out.stderr
    assert " ".join(out.stderr.split()).count("cannot size the trainer's state") == 1
    out = subprocess.run([sys.executable, "-m", "elastix", "workload", "delete", "big"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    out = _create(env, mt)
    assert out.returncode == 0, out.stderr


def test_near_the_limit_is_a_warning_and_skip_preflight_skips(world):
    kube, env, root = world
    _step(env, root, "run2/7", 60, "commit_success.txt")
    cmd = f"elastix-train --checkpoint-dir=gs://{BUCKET}/run2/"
    out = _create(env, cmd)
    assert out.returncode == 0, out.stderr
    said = " ".join(out.stderr.split())
    assert "64% of it, near the limit" in said, said  # 60 GiB of the head's 93.1 GiB
    assert kube.get(JOBSETS)["items"]
    out = _create(env, cmd, "--num-slices", "2", "--replace", "--skip-preflight")
    assert out.returncode == 0, out.stderr
    assert "restore moves" not in out.stderr


def test_cloud_storage_out_of_reach_is_a_notice_at_once_not_a_retry(world):
    """CI's loopback-only network made the first version wait out the client's default retry
    (120 s) on every create with a gs:// checkpoint directory: the listing is made once, and a
    refused connection is one notice; the workload is created."""
    import socket

    kube, env, _ = world
    with socket.socket() as s:  # a port nothing listens on: connections are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(env, STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{port}")
    out = subprocess.run(
        [sys.executable, "-m", "elastix", "workload", "create", "big", "--tpu-type",
         "v5litepod-16", "--num-slices", "1", "--docker-image", "img:1", "--command",
         f"elastix-train --checkpoint-dir gs://{BUCKET}/run9", "--proxy-memory", "100Gi",
         "--no-fit-check"],
        env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    said = " ".join(out.stderr.split())
    assert f"preflight could not list gs://{BUCKET}/run9 to size a restore" in said, said
    assert kube.get(JOBSETS)["items"]
