"""A fake GKE API (``container.googleapis.com/v1`` REST) on 127.0.0.1, in a thread of the test.

What ``google-cloud-container``'s REST transport sends for ``elastix cluster create``, ``cluster
describe`` and every ``--cluster`` lookup: ``GET/POST/DELETE`` of clusters and node pools, and
``GET`` of operations (answered DONE at once, so the CLI never sleeps its poll interval). Every
request is recorded (``requests``: method, path, JSON body). ``POST /token`` answers the OAuth
token request of a service-account key whose ``token_uri`` points here (see :meth:`adc_file`).

It also answers the one Compute Engine API read ``cluster create --reservation`` makes,
``GET /compute/v1/projects/P/zones/Z/reservations/R``, from :attr:`FakeGke.reservations`
(:meth:`add_reservation` writes the API's response shape: int64 counts as strings), and 404 with
the API's error body for any other. Point the CLI at it with ``ELASTIX_COMPUTE_API_ENDPOINT``.

With ``kube`` (a :class:`fake_cluster.FakeCluster`, served over TLS), a looked-up cluster's
``endpoint`` and CA are that fake API server's, and every node pool created becomes Nodes there
(:func:`pool_nodes`): the pools ``cluster create`` asks for are the nodes the workload meets.
"""

from __future__ import annotations

import base64
import json
import os
import re
import ssl
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from elastix.workload import platform

# Accelerator label per TPU machine family: google/pathways-job @ c0cc7594c9d03a1d96a89110008a0f2d3c9ef189
# internal/controller/pathwaysjob_controller.go L87-100 (MachineTypeToGKEAcceleratorTypeMap);
# xpk src/xpk/core/system_characteristics.py L696-859 agrees.
_ACCELERATOR = {"ct4p": "tpu-v4-podslice", "ct5p": "tpu-v5p-slice",
                "ct5lp": "tpu-v5-lite-podslice", "ct6e": "tpu-v6e-slice"}
# vCPU / GiB of TPU VMs. ct5lp-*: Cloud TPU docs "TPU v5e", VM types table
# (https://cloud.google.com/tpu/docs/v5e). The others have NO SOURCE (none found): generous
# made-up values, so that a test fails on a selector, a taint or the head pool, not on them.
_TPU_VM = {"ct5lp-hightpu-1t": (24, 48), "ct5lp-hightpu-4t": (112, 192),
           "ct5lp-hightpu-8t": (224, 384)}
_TPU_VM_UNSOURCED = (200, 400)
# Single-host pools have no placement policy to read the topology from: the chips of the host.
_SINGLE_HOST_TOPOLOGY = {1: "1x1", 4: "2x2", 8: "2x4"}
# GKE taints TPU slice nodes google.com/tpu=present:NoSchedule ("About TPUs in GKE",
# https://cloud.google.com/kubernetes-engine/docs/concepts/tpus#how_tpus_work, as quoted by
# skypilot-org/skypilot sky/provision/kubernetes/instance.py); the Pathways templates tolerate it.
TPU_TAINT = {"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}


def pool_nodes(cluster: str, pool: dict) -> list[dict]:
    """The Nodes GKE would register for a node pool (REST JSON, as ``cluster create`` sent it)."""
    machine = (pool.get("config") or {}).get("machineType", "e2-medium")
    count = int(pool.get("initialNodeCount") or 0)
    labels = {platform.NODEPOOL_LABEL: pool["name"], **((pool.get("config") or {}).get("labels") or {})}
    taints: list[dict] = []
    tpu = re.match(r"^(ct\w+?)-\w+-(\d+)t$", machine)
    if tpu:
        chips = int(tpu.group(2))
        topology = (pool.get("placementPolicy") or {}).get("tpuTopology") or \
            _SINGLE_HOST_TOPOLOGY.get(chips, "")
        labels.update({platform.ACCELERATOR_LABEL: _ACCELERATOR.get(tpu.group(1), "unknown"),
                       platform.TOPOLOGY_LABEL: topology})
        cpu, gib = _TPU_VM.get(machine, _TPU_VM_UNSOURCED)
        capacity = platform.Resources(float(cpu), float(gib * 2**30))
        extra = {platform.TPU_RESOURCE: str(chips)}
        taints.append(dict(TPU_TAINT))
    else:
        capacity = platform.machine_capacity(machine) or platform.Resources(2.0, 4.0 * 2**30)
        extra = {}
    alloc = platform.allocatable(capacity)
    out = []
    for i in range(count):
        name = f"gke-{cluster}-{pool['name']}-{i}"
        out.append(node(name, {**labels, "kubernetes.io/hostname": name,
                               "node.kubernetes.io/instance-type": machine},
                        {"cpu": f"{alloc.cpu:.3f}", "memory": str(int(alloc.memory)), **extra},
                        taints))
    return out


def node(name: str, labels: dict, allocatable: dict, taints: list[dict] | None = None) -> dict:
    """A Ready Node object with these labels, allocatable resources and taints."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints or []},
            "status": {"allocatable": {**allocatable, "pods": "110"},
                       "capacity": {**allocatable, "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


class FakeGke:
    """The fake GKE API server; ``url`` once started."""

    def __init__(self, kube: Any = None, ca_pem: bytes | None = None) -> None:
        self.kube, self.ca_pem = kube, ca_pem
        self.requests: list[tuple[str, str, Any]] = []
        self.clusters: dict[str, dict] = {}
        self.reservations: dict[tuple[str, str, str], dict] = {}  # (project, zone, name)
        self.lock = threading.Lock()
        self.ops = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeGke:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def adc_file(self, path: Path) -> Path:
        """A service-account key (application-default credentials) whose tokens come from here."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
        path.write_text(json.dumps({
            "type": "service_account", "project_id": "proj", "private_key_id": "k1",
            "private_key": pem, "client_email": "elastix-test@proj.iam.gserviceaccount.com",
            "client_id": "1", "token_uri": f"{self.url}/token"}))
        return path

    def add_reservation(self, project: str, zone: str, name: str, machine_type: str, count: int,
                        in_use: int = 0, status: str = "READY") -> dict:
        """A specific reservation of ``count`` VMs, as ``reservations.get`` returns it (Compute
        Engine API v1 ``Reservation``: ``specificReservation {count, inUseCount,
        instanceProperties {machineType}}``, ``status``; int64 fields are JSON strings)."""
        base = f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}"
        res = {"kind": "compute#reservation", "id": str(1000 + len(self.reservations)),
               "creationTimestamp": "2026-12-01T00:00:00.000-08:00", "name": name,
               "selfLink": f"{base}/reservations/{name}", "zone": base,
               "specificReservation": {"instanceProperties": {"machineType": machine_type},
                                       "count": str(count), "inUseCount": str(in_use),
                                       "assuredCount": str(count)},
               "specificReservationRequired": True, "status": status,
               "shareSettings": {"shareType": "LOCAL"}}
        self.reservations[(project, zone, name)] = res
        return res

    def mutations(self) -> list[tuple[str, str]]:
        """The requests that would change something (every method but GET; not the token)."""
        return [(m, p) for m, p, _ in self.requests if m != "GET" and p != "/token"]

    def cli_env(self, tmp_path: Path) -> dict[str, str]:
        """The environment of a real ``elastix`` subprocess aimed at this GKE: its endpoint, a
        key whose tokens come from here, and no kubeconfig, so ``--cluster`` is looked up here."""
        env = dict(os.environ, COLUMNS="200", ELASTIX_GKE_API_ENDPOINT=self.url,
                   ELASTIX_COMPUTE_API_ENDPOINT=self.url,
                   GOOGLE_APPLICATION_CREDENTIALS=str(self.adc_file(tmp_path / "adc.json")),
                   KUBECONFIG=str(tmp_path / "no-kubeconfig"))
        env.pop("ELASTIX_BACKEND", None)
        return env

    # --- behaviour --------------------------------------------------------------------------

    def answer(self, method: str, path: str, body: Any) -> tuple[int, dict]:
        with self.lock:
            self.requests.append((method, path, body))
            if path == "/token":
                return 200, {"access_token": "ya29.fake", "expires_in": 3600,
                             "token_type": "Bearer"}
            r = re.match(r"^/compute/v1/projects/([^/]+)/zones/([^/]+)/reservations/([^/]+)$",
                         path)
            if r and method == "GET":
                if r.groups() in self.reservations:
                    return 200, self.reservations[r.groups()]
                what = f"projects/{r[1]}/zones/{r[2]}/reservations/{r[3]}"
                return 404, {"error": {"code": 404, "message": f"The resource '{what}' was not "
                                       "found", "errors": [{"message": f"The resource '{what}' "
                                                            "was not found", "domain": "global",
                                                            "reason": "notFound"}]}}
            m = re.match(r"^/v1/projects/[^/]+/locations/[^/]+/(clusters|operations)"
                         r"(?:/([^/:]+))?(?:/nodePools(?:/([^/]+))?)?$", path)
            if not m:
                return 404, _error(404, "NOT_FOUND", f"no route {path}")
            kind, name, pool = m.groups()
            if kind == "operations":
                return 200, {"name": name, "status": "DONE"}
            if method == "POST" and name is None:
                return self._create_cluster(body["cluster"])
            if name not in self.clusters:
                return 404, _error(404, "NOT_FOUND", f"Not found: cluster {name}.")
            if method == "GET":
                return 200, self._described(self.clusters[name])
            if method == "POST" and pool is None and "nodePools" in path:
                return self._create_pool(name, body["nodePool"])
            if method == "DELETE" and pool is None:
                del self.clusters[name]
                return 200, self._op("DELETE_CLUSTER")
            return 400, _error(400, "INVALID_ARGUMENT", f"{method} {path} is not faked")

    def _op(self, kind: str) -> dict:
        self.ops += 1
        return {"name": f"operation-{self.ops}", "status": "DONE", "operationType": kind}

    def _create_cluster(self, cluster: dict) -> tuple[int, dict]:
        if cluster["name"] in self.clusters:
            return 409, _error(409, "ALREADY_EXISTS", f"Already exists: {cluster['name']}.")
        self.clusters[cluster["name"]] = {**cluster, "nodePools": []}
        for pool in cluster.get("nodePools") or []:
            self._create_pool(cluster["name"], pool)
        return 200, self._op("CREATE_CLUSTER")

    def _create_pool(self, cluster: str, pool: dict) -> tuple[int, dict]:
        pools = self.clusters[cluster]["nodePools"]
        if any(p["name"] == pool["name"] for p in pools):
            return 409, _error(409, "ALREADY_EXISTS", f"Already exists: {pool['name']}.")
        pools.append({**pool, "status": "RUNNING"})
        if self.kube is not None:
            for n in pool_nodes(cluster, pool):
                _post(self.kube.url, "/api/v1/nodes", n, self.ca_pem)
        return 200, self._op("CREATE_NODE_POOL")

    def _described(self, cluster: dict) -> dict:
        out = {**cluster, "status": "RUNNING"}
        if self.kube is not None:
            out["endpoint"] = self.kube.url.split("://", 1)[1]
            if self.ca_pem:
                out["masterAuth"] = {"clusterCaCertificate": base64.b64encode(self.ca_pem).decode()}
        return out


def _error(code: int, status: str, message: str) -> dict:
    return {"error": {"code": code, "status": status, "message": message}}


def _post(base: str, path: str, body: dict, ca_pem: bytes | None) -> dict:
    ctx = ssl.create_default_context(cadata=ca_pem.decode()) if ca_pem else None
    req = urllib.request.Request(f"{base}{path}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
        return json.loads(r.read())


def _handler(fake: FakeGke) -> type:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")  # the token request is form-encoded
            code, out = fake.answer(self.command, self.path.split("?", 1)[0], body)
            data = json.dumps(out).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = do_PUT = _serve

        def log_message(self, *args: Any) -> None:
            pass

    return Handler
