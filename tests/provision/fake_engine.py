"""A fake Docker engine on a unix socket: the few Engine API endpoints elastix uses.

It answers ``GET /_ping``, ``POST /build`` (reads the tar context, streams JSON lines) and
``POST /images/<name>/push`` (streams JSON lines), and records every request so tests can assert
what elastix sent. ``fail_build``/``fail_push`` make it stream an ``error`` line, as a real
engine does when a step fails.
"""

from __future__ import annotations

import io
import json
import socketserver
import tarfile
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    files: dict[str, bytes] = field(default_factory=dict)


class FakeEngine:
    """Serve the Engine API on ``socket_path`` in a thread; use as a context manager."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.requests: list[Recorded] = []
        self.fail_build: str | None = None
        self.fail_push: str | None = None
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # unix sockets have no client address
                pass

            def _record(self) -> Recorded:
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                rec = Recorded(self.command, url.path, query, dict(self.headers.items()))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if body and self.headers.get("Content-Type") == "application/x-tar":
                    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
                        for m in tar.getmembers():
                            rec.files[m.name] = tar.extractfile(m).read()
                engine.requests.append(rec)
                return rec

            def _stream(self, messages: list[dict]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                for msg in messages:
                    self.wfile.write(json.dumps(msg).encode() + b"\r\n")
                    self.wfile.flush()

            def do_GET(self) -> None:
                self._record()
                if self.path == "/_ping":
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.end_headers()
                    self.wfile.write(b"OK")
                else:
                    self.send_error(404)

            def do_POST(self) -> None:
                rec = self._record()
                if rec.path == "/build":
                    if "Dockerfile" not in rec.files:
                        self.send_response(400)
                        self.end_headers()
                        self.wfile.write(b'{"message": "Cannot locate specified Dockerfile"}')
                        return
                    msgs = [{"stream": "Step 1/12 : ARG BASE_IMAGE\n"},
                            {"stream": " ---> Running in 0123\n"}]
                    if engine.fail_build:
                        msgs.append({"errorDetail": {"message": engine.fail_build},
                                     "error": engine.fail_build})
                    else:
                        msgs += [{"aux": {"ID": "sha256:" + "ab" * 32}},
                                 {"stream": "Successfully built abababababab\n"}]
                    self._stream(msgs)
                elif rec.path.startswith("/images/") and rec.path.endswith("/push"):
                    msgs = [{"status": "Preparing", "id": "5f70bf18a086"}]
                    if engine.fail_push:
                        msgs.append({"errorDetail": {"message": engine.fail_push},
                                     "error": engine.fail_push})
                    else:
                        msgs += [{"status": "Pushed", "id": "5f70bf18a086"},
                                 {"aux": {"Tag": rec.query.get("tag"), "Digest": "sha256:" +
                                          "cd" * 32, "Size": 1234}}]
                    self._stream(msgs)
                else:
                    self.send_error(404)

        self._server = socketserver.ThreadingUnixStreamServer(socket_path, Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeEngine:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
