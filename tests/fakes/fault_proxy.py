"""A fault-injecting HTTP proxy in front of a storage server (fake-gcs-server), on 127.0.0.1.

Requests are forwarded to the upstream as they come, except those a rule matches: a rule
(method, path regex) answers with an HTTP status (429, 500, 503 ...; with ``k8s_refusal``, as
the Kubernetes API server does, Status body and Retry-After), resets the connection (before
forwarding, or after: "lose"), or stalls before forwarding (for some seconds, or until the test
sets an event), for its next ``count`` matches.
Every request is recorded with its fate and times, so a test can say which request failed and
when.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import re
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclasses.dataclass
class Rule:
    """What to do to the next ``count`` requests matching ``method`` and ``path``."""

    method: str
    path: str  # a regex searched in the request path (with its query)
    action: str  # "status", "reset", "stall", or "lose" (forward, then reset: acted, no answer)
    status: int = 503
    seconds: float = 0.0  # for "stall": wait this long, then forward
    count: int = 1
    body: dict | None = None  # for "status": the JSON answered (default: a GCS-shaped error)
    headers: dict = dataclasses.field(default_factory=dict)  # for "status": extra headers
    until: threading.Event | None = None  # for "stall": instead of seconds, until this is set


def k8s_refusal(method: str, path: str, status: int = 429, count: int = 1,
                retry_after: int | None = 1, message: str | None = None) -> Rule:
    """A rule answering as the Kubernetes API server turns a request away before acting on it:
    a ``Status`` body (reason TooManyRequests for 429, ServiceUnavailable for 503) and, with
    ``retry_after``, the ``Retry-After`` header and ``details.retryAfterSeconds`` (a 429 of
    the API server's Priority and Fairness filter carries both)."""
    reason = {429: "TooManyRequests", 503: "ServiceUnavailable"}.get(status, "InternalError")
    text = message or {429: "Too many requests, please try again later.",
                       503: "the server is currently unable to handle the request"}.get(
        status, "injected")
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": text, "reason": reason, "code": status}
    headers = {}
    if retry_after is not None:
        body["details"] = {"retryAfterSeconds": retry_after}
        headers["Retry-After"] = str(retry_after)
    return Rule(method, path, "status", status=status, count=count, body=body, headers=headers)


@dataclasses.dataclass
class Seen:
    method: str
    path: str
    fate: str  # "forwarded", "status 503", "reset", "stalled"
    start: float
    end: float = 0.0  # 0 while in progress (a stall sets when it will end up front)
    done: bool = False  # answered (or forwarded after its stall)
    range: str = ""  # the request's Range header ("" when it has none)


class FaultProxy:
    """The proxy's rules and record (thread-safe)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urllib.parse.urlsplit(upstream)
        self.rules: list[Rule] = []
        self.seen: list[Seen] = []
        self._lock = threading.Lock()

    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def _take(self, method: str, path: str) -> Rule | None:
        with self._lock:
            for rule in self.rules:
                if rule.count > 0 and rule.method == method and re.search(rule.path, path):
                    rule.count -= 1
                    return rule
        return None

    def _record(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)

    def matching(self, method: str, path: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.method == method and re.search(path, s.path)]


def _handler(proxy: FaultProxy):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # keep the test output clean
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                out = b""
                while True:
                    size = int(self.rfile.readline().strip().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _serve(self) -> None:
            seen = Seen(self.command, self.path, "forwarded", time.monotonic(),
                        range=self.headers.get("Range", ""))
            body = self._body()
            rule = proxy._take(self.command, self.path)
            proxy._record(seen)  # now, so a test sees a request still hanging (end stays 0)
            try:
                if rule is not None and rule.action == "lose":
                    seen.fate = "lost"  # the upstream acts on it; its answer never arrives
                    self._forward(body, answer=False)
                if rule is not None and rule.action in ("reset", "lose"):
                    seen.fate = "lost" if rule.action == "lose" else "reset"
                    # SO_LINGER 0: close() sends RST, the client sees a reset connection.
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                    self.close_connection = True
                    return
                if rule is not None and rule.action == "status":
                    seen.fate = f"status {rule.status}"
                    payload = (json.dumps(rule.body).encode() if rule.body is not None else
                               b'{"error": {"code": %d, "message": "injected"}}' % rule.status)
                    self.send_response(rule.status)
                    self.send_header("Content-Type", "application/json")
                    for k, v in rule.headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if rule is not None and rule.action == "stall":
                    seen.fate = "stalled"
                    if rule.until is not None:
                        rule.until.wait()
                    else:
                        seen.end = seen.start + rule.seconds  # when it will stop hanging
                        time.sleep(rule.seconds)
                self._forward(body)
            finally:
                seen.end, seen.done = time.monotonic(), True

        def _forward(self, body: bytes, answer: bool = True) -> None:
            up = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port,
                                            timeout=60)
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("host", "transfer-encoding", "content-length",
                                            "connection")}
            headers["Content-Length"] = str(len(body))
            up.request(self.command, self.path, body=body, headers=headers)
            resp = up.getresponse()
            data = resp.read()
            if not answer:
                up.close()
                return
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            up.close()

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve

    return Handler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # an upstream gone at teardown, or a client that hung up: not the test's output


@contextlib.contextmanager
def fault_proxy(upstream: str) -> Iterator[tuple[str, FaultProxy]]:
    """Run a proxy to ``upstream`` on a free loopback port; yield (its URL, its rules)."""
    proxy = FaultProxy(upstream)
    server = _QuietServer(("127.0.0.1", 0), _handler(proxy))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", proxy
    finally:
        server.shutdown()
        server.server_close()
