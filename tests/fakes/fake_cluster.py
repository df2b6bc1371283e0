"""Helpers for the GKE tests: a fake Kubernetes API server process on 127.0.0.1, a kubeconfig
pointing at it, and the CLI run against it. (A module of its own: conftest modules of different
test folders share one import name, so tests must not import from them.)"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import ssl
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from polling import wait_until

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "fakes" / "fake_k8s.py"
JOBSET_CRD = ROOT / "templates" / "jobset-crd-v0.12.0.yaml"  # the vendored JobSet CRD
# The head pod's ServiceAccount, Role and RoleBinding (elastix.workload.rbac), by API prefix.
HEAD_ACCESS_KINDS = {"serviceaccounts": "/api/v1", "roles": "/apis/rbac.authorization.k8s.io/v1",
                     "rolebindings": "/apis/rbac.authorization.k8s.io/v1"}


def wait_for(pred, timeout: float = 20.0, what: str = "condition"):
    """Poll ``pred`` until it returns a truthy value; fail the test after ``timeout``."""
    return wait_until(pred, timeout, what, interval=0.02)


def interrupt(proc: subprocess.Popen, stderr, timeout: float = 120.0,
              then: Callable[[], object] | None = None) -> int:
    """Ctrl-C ``proc`` (a CLI started with ``FakeCluster.env``) and return its exit code. One
    that has not exited after ``timeout`` is made to print its threads' stacks (SIGABRT, which
    ``PYTHONFAULTHANDLER`` turns into a dump) and the test fails with them: a hang after
    Ctrl-C says where it hangs. ``stderr()`` returns what the process wrote on stderr; ``then``
    is called once the SIGINT is sent (to let go of a request the Ctrl-C must land during)."""
    import signal
    import time

    proc.send_signal(signal.SIGINT)
    if then is not None:
        then()
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        time.sleep(0.5)  # the reader threads take the dump's last lines
        raise AssertionError(f"still running {timeout:.0f} s after Ctrl-C; its stacks:\n"
                             + stderr()[-6000:]) from None


class FakeCluster:
    """A running fake API server: its URL, a kubeconfig for it, and its admin endpoints."""

    def __init__(self, proc: subprocess.Popen, port: int, kubeconfig: Path,
                 ca_pem: bytes | None = None) -> None:
        self.proc, self.port, self.kubeconfig, self.ca_pem = proc, port, kubeconfig, ca_pem
        self.url = f"{'https' if ca_pem else 'http'}://127.0.0.1:{port}"
        self._ctx = ssl.create_default_context(cadata=ca_pem.decode()) if ca_pem else None

    def post(self, path: str, body: dict) -> dict:
        req = urllib.request.Request(f"{self.url}{path}", data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10, context=self._ctx) as r:
            return json.loads(r.read())

    def admin(self, path: str, body: dict) -> dict:
        return self.post(f"/_fake/{path}", body)

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=10, context=self._ctx) as r:
            return json.loads(r.read())

    def add_nodes(self, *nodes: dict) -> None:
        """Register Nodes (see ``fake_gke.node``): from now on the scheduler model places pods."""
        for n in nodes:
            self.post("/api/v1/nodes", n)

    def events(self, reason: str, namespace: str = "default") -> list[str]:
        """Messages of the events with this reason (e.g. FailedScheduling)."""
        items = self.get(f"/api/v1/namespaces/{namespace}/events")["items"]
        return [e["message"] for e in items if e.get("reason") == reason]

    def pods(self, selector: str = "", namespace: str = "default") -> list[dict]:
        q = f"?labelSelector={urllib.parse.quote(selector)}" if selector else ""
        return self.get(f"/api/v1/namespaces/{namespace}/pods{q}")["items"]

    def head_access(self, namespace: str = "default") -> dict[str, list[str]]:
        """Names of the ServiceAccounts, Roles and RoleBindings elastix made, by plural."""
        sel = "?labelSelector=app.kubernetes.io/managed-by%3Delastix"
        return {k: sorted(o["metadata"]["name"] for o in self.get(
            f"{prefix}/namespaces/{namespace}/{k}{sel}")["items"])
            for k, prefix in HEAD_ACCESS_KINDS.items()}

    def head_account(self, workload: str, rules: list[dict] | None = None,
                     namespace: str = "default") -> str:
        """Make the head's ServiceAccount, Role (``rules``: instead of elastix's) and
        RoleBinding (``elastix.workload.rbac``) and a token of that account, whose requests the
        fake then authorizes by them (``k8s_rbac``); the token."""
        from elastix.workload import rbac

        for api_version, plural, body in rbac.objects(workload, namespace):
            if plural == "roles" and rules is not None:
                body = {**body, "rules": rules}
            prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            self.post(f"{prefix}/namespaces/{namespace}/{plural}", body)
        token = f"token-of-{rbac.service_account(workload)}"
        self.admin("service_account_token", {"token": token, "namespace": namespace,
                                             "name": rbac.service_account(workload)})
        return token

    def install_kueue(self, visibility: bool = True, queues: bool = True) -> None:
        """Kueue's kinds served (``k8s_kueue``) and, with ``queues``, what ``cluster create
        --kueue`` applies for 2 × v5litepod-16 (``elastix.provision.kueue_install``)."""
        from elastix.provision import cluster, kueue_install

        self.admin("kueue", {"installed": True, "visibility": visibility})
        if not queues:
            return
        cfg = cluster.validate("my-proj-1", "us-central1-a", "c", tpu_type="v5litepod-16",
                               num_slices=2)
        for step in kueue_install.object_steps(cfg):
            self.post(step.path.rsplit("/", 1)[0], step.body)

    def kueue_workload(self, jobset: str, status: dict, namespace: str = "default") -> dict:
        """Set the status of the Kueue Workload of a JobSet (Admitted True resumes it)."""
        return self.admin("kueue_workload", {"jobset": jobset, "namespace": namespace,
                                             "status": status})

    def requests(self, clear: bool = False) -> list[dict]:
        """The API requests the fake has served (method, path, query); ``clear`` empties the log."""
        if clear:
            return self.admin("requests", {"clear": True})
        return self.get("/_fake/requests")

    def env(self) -> dict:
        # PYTHONFAULTHANDLER: a CLI that hangs can be made to print every thread's stack
        # (``interrupt``).
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig), COLUMNS="200",
                   PYTHONFAULTHANDLER="1")
        env.pop("ELASTIX_BACKEND", None)
        return env


def write_kubeconfig(path: Path, server: str, ca: str | None = None) -> Path:
    cluster = {"server": server}
    if ca:
        cluster["certificate-authority"] = ca
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "fake",
           "clusters": [{"name": "fake", "cluster": cluster}],
           "users": [{"name": "tester", "user": {"token": "fake-token"}}],
           "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester"}}]}
    path.write_text(json.dumps(cfg))
    return path


def self_signed(directory: Path) -> bytes:
    """Write a certificate for 127.0.0.1 (cert.pem, key.pem) into ``directory``; its PEM."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-gke")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    pem = cert.public_bytes(serialization.Encoding.PEM)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cert.pem").write_bytes(pem)
    (directory / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return pem


def start_fake(tmp: Path, config: dict | None = None, crd: bool = True,
               extra: list[str] | None = None, tls: bool = False) -> FakeCluster:
    """Start the fake API server (``tls``: HTTPS with a fresh self-signed CA, as GKE serves)."""
    port_file = tmp / "port"
    cmd = [sys.executable, str(FAKE), "--port-file", str(port_file)]
    ca_pem = self_signed(tmp / "tls") if tls else None
    if tls:
        cmd += ["--tls-dir", str(tmp / "tls")]
    if crd:
        cmd += ["--jobset-crd", str(JOBSET_CRD)]
    if config:
        cmd += ["--config", json.dumps(config)]
    cmd += extra or []
    log = open(tmp / "fake.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        # A bound for a broken server, not a wait: on a loaded machine its Python start-up alone
        # has taken over 20 s.
        wait_for(lambda: port_file.exists() or proc.poll() is not None, timeout=180,
                 what="fake API server")
        if proc.poll() is not None:
            raise AssertionError(f"fake API server exited: {(tmp / 'fake.log').read_text()}")
    except BaseException:
        proc.kill()
        raise
    port = int(port_file.read_text())
    scheme, ca = ("https", str(tmp / "tls" / "cert.pem")) if tls else ("http", None)
    return FakeCluster(proc, port, write_kubeconfig(tmp / "kubeconfig",
                                                    f"{scheme}://127.0.0.1:{port}", ca), ca_pem)


def stop(fake: FakeCluster) -> None:
    fake.proc.terminate()
    try:
        fake.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        fake.proc.kill()
        fake.proc.wait()



def elastix(fake: FakeCluster, *args: str, timeout: float = 60, check: bool = True):
    """Run the real ``elastix`` CLI as a subprocess against the fake cluster."""
    proc = subprocess.run([sys.executable, "-m", "elastix", *args], env=fake.env(),
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"elastix {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n"
                             f"{proc.stderr}")
    return proc


CREATE = ["workload", "create", "demo", "--tpu-type", "v5litepod-16", "--num-slices", "2",
          "--elastic-slices", "2", "--docker-image", "img:1", "--command", "python train.py"]
HEAD = ("jobset.sigs.k8s.io/jobset-name=demo,"
        "jobset.sigs.k8s.io/replicatedjob-name=pathways-head")
"""The selector of the ``CREATE`` workload's head pod."""
QUIET = {"log_interval": 30.0, "terminate_delay": 0.2}
"""A fake whose own "fake-trainer step" log lines are rare (a test's own lines are the log)."""


@contextlib.contextmanager
def serving(tmp: Path, monkeypatch, config: dict | None = None) -> Iterator[FakeCluster]:
    """The fake API server (``config``) for the block, the in-process CLI pointed at it (its
    kubeconfig, no ``ELASTIX_BACKEND``)."""
    fake = start_fake(tmp, config)
    try:
        monkeypatch.setenv("KUBECONFIG", str(fake.kubeconfig))
        monkeypatch.delenv("ELASTIX_BACKEND", raising=False)
        yield fake
    finally:
        stop(fake)


def head_logging(fake: FakeCluster, lines: list[str]) -> dict:
    """Create the ``CREATE`` workload with the in-process CLI and have its head pod's log be
    ``lines``; the head pod, once Running."""
    from elastix.main import main

    assert main(CREATE) == 0
    head = wait_for(lambda: [p for p in fake.pods(HEAD)
                             if p["status"].get("phase") == "Running"], what="head")[0]
    fake.admin("log", {"pod": head["metadata"]["name"],
                       "container": head["spec"]["containers"][0]["name"], "lines": lines})
    return head
