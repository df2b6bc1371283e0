"""Fixtures for cluster tests: the fake Kubernetes API server as a real process."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

FAKE_K8S = Path(__file__).resolve().parents[1] / "fakes" / "fake_k8s.py"


@pytest.fixture
def fake_k8s(tmp_path):
    """Start ``tests/fakes/fake_k8s.py`` on a free loopback port; yield its base URL."""
    port_file = tmp_path / "k8s.port"
    log = open(tmp_path / "fake_k8s.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, str(FAKE_K8S), "--port-file", str(port_file)],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():  # the server writes the file atomically once listening
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("fake_k8s did not start: "
                                   + (tmp_path / "fake_k8s.log").read_text())
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port_file.read_text().strip()}"
    finally:
        proc.kill()
        proc.wait(timeout=10)
        log.close()


@pytest.fixture
def k8s_api(fake_k8s):
    """An official ``ApiClient`` pointed at the fake API server."""
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = fake_k8s
    api = client.ApiClient(cfg)
    yield api
    api.close()
