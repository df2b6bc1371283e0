"""A small Docker Engine API client: ping, build (streamed JSON) and push.

It speaks the Engine's HTTP API directly over a unix socket or TCP, so elastix needs neither the
``docker`` CLI nor the ``docker`` Python package, and never parses human-readable output.
Only the few endpoints elastix uses are implemented (``/_ping``, ``/build``, ``/images/…/push``).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from elastix.errors import BackendError, UsageError

DEFAULT_HOST = "unix:///var/run/docker.sock"
PING_TIMEOUT = 3.0
STREAM_TIMEOUT = 3600.0  # a cold build of the JAX stack can take many minutes

NO_ENGINE_HINT = (
    "start a Docker engine here, or point DOCKER_HOST at a remote one (tcp://host:2375 or "
    "unix:///path/docker.sock); or run `elastix image build --dry-run --context-dir DIR` and "
    "build DIR elsewhere, e.g. with Cloud Build: `gcloud builds submit DIR --tag TAG`"
)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


@dataclass(frozen=True)
class EngineAddress:
    """Where the Docker engine listens, parsed from ``DOCKER_HOST``."""

    url: str
    scheme: str  # "unix" or "tcp"
    target: str  # socket path, or host:port

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> EngineAddress:
        """The engine address from ``DOCKER_HOST`` (default: the local unix socket).

        Raises:
            UsageError: a scheme elastix cannot speak (ssh, TLS) or a malformed address.
        """
        env = os.environ if env is None else env
        url = env.get("DOCKER_HOST") or DEFAULT_HOST
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme == "unix" and parsed.path:
            return cls(url, "unix", parsed.path)
        if parsed.scheme in ("tcp", "http") and parsed.hostname and parsed.port:
            if env.get("DOCKER_TLS_VERIFY"):
                raise UsageError(
                    f"DOCKER_HOST={url} with DOCKER_TLS_VERIFY: TLS engines are not supported",
                    hint="use an unencrypted engine on a trusted network, or an SSH tunnel to "
                    "a unix socket (ssh -L /tmp/docker.sock:/var/run/docker.sock host)",
                )
            return cls(url, "tcp", f"{parsed.hostname}:{parsed.port}")
        raise UsageError(
            f"DOCKER_HOST={url!r} is not an address elastix can use",
            hint="use unix:///path/to/docker.sock or tcp://host:port",
        )


class DockerEngine:
    """A client of one Docker engine. Construct with :meth:`connect` to check it is there."""

    def __init__(self, address: EngineAddress) -> None:
        self.address = address

    @classmethod
    def connect(cls, env: dict[str, str] | None = None) -> DockerEngine:
        """Find the engine and ping it.

        Raises:
            BackendError: nothing answers at the address; the hint names the alternatives.
        """
        engine = cls(EngineAddress.from_env(env))
        try:
            engine.ping()
        except (OSError, http.client.HTTPException) as err:
            reason = getattr(err, "strerror", None) or str(err) or type(err).__name__
            raise BackendError(
                f"no Docker engine is reachable at {engine.address.url} ({reason})",
                hint=NO_ENGINE_HINT,
            ) from err
        return engine

    def _conn(self, timeout: float) -> http.client.HTTPConnection:
        if self.address.scheme == "unix":
            return _UnixConnection(self.address.target, timeout)
        host, port = self.address.target.rsplit(":", 1)
        return http.client.HTTPConnection(host, int(port), timeout=timeout)

    def ping(self) -> None:
        """GET /_ping; raises OSError or HTTPException when the engine does not answer OK."""
        conn = self._conn(PING_TIMEOUT)
        try:
            conn.request("GET", "/_ping")
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                raise http.client.HTTPException(f"/_ping answered {resp.status} {body[:80]!r}")
        finally:
            conn.close()

    def _stream(self, method: str, path: str, body: bytes | None,
                headers: dict[str, str]) -> Iterator[dict]:
        conn = self._conn(STREAM_TIMEOUT)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            if resp.status >= 400:
                detail = resp.read().decode("utf-8", "replace").strip()
                try:
                    detail = json.loads(detail).get("message", detail)
                except (ValueError, AttributeError):
                    pass
                raise BackendError(f"Docker engine: {method} {path.split('?')[0]} answered "
                                   f"{resp.status}: {detail}")
            while True:
                line = resp.readline()
                if not line:
                    return
                line = line.strip()
                if line:
                    try:
                        yield json.loads(line)
                    except ValueError:
                        yield {"stream": line.decode("utf-8", "replace") + "\n"}
        except (OSError, http.client.HTTPException) as err:
            raise BackendError(f"lost the Docker engine at {self.address.url}: {err}") from err
        finally:
            conn.close()

    def build(self, context_tar: bytes, tag: str, buildargs: dict[str, str],
              on_line: Callable[[str], None], platform: str | None = None) -> str:
        """Build an image from a tar build context; return the image id.

        Args:
            context_tar: the build context as an uncompressed tar (Dockerfile at its root).
            tag: the image reference to tag the result with.
            buildargs: ``--build-arg`` values.
            on_line: called with every line of build output.
            platform: ``os/arch[/variant]`` to build for, else the engine's own platform
                (the ``platform`` query parameter of ``POST /build``, Engine API v1.32+:
                https://docs.docker.com/reference/api/engine/version/v1.57/operations/ImageBuild/).

        Raises:
            BackendError: the build failed (the engine's error message is kept).
        """
        params = {"t": tag, "buildargs": json.dumps(buildargs), "rm": "1", "forcerm": "1"}
        if platform:
            params["platform"] = platform
        query = urllib.parse.urlencode(params)
        headers = {"Content-Type": "application/x-tar"}
        image_id = ""
        for msg in self._stream("POST", f"/build?{query}", context_tar, headers):
            if "error" in msg:
                raise BackendError(f"image build failed: {str(msg['error']).strip()}",
                                   hint="fix the step above and build again")
            if "stream" in msg:
                for part in str(msg["stream"]).splitlines():
                    on_line(part)
            aux = msg.get("aux")
            if isinstance(aux, dict) and aux.get("ID"):
                image_id = aux["ID"]
        if not image_id:
            raise BackendError("image build ended without an image id",
                               hint="the Docker engine's output above may say why")
        return image_id

    def push(self, tag: str, auth: dict[str, str] | None,
             on_line: Callable[[str], None]) -> str:
        """Push ``tag``; return the pushed digest (``sha256:…``).

        Raises:
            BackendError: the engine or the registry refused the push.
        """
        repo, _, version = _split_tag(tag)
        query = urllib.parse.urlencode({"tag": version})
        encoded = base64.urlsafe_b64encode(json.dumps(auth or {}).encode()).decode()
        headers = {"X-Registry-Auth": encoded}
        digest = ""
        path = f"/images/{urllib.parse.quote(repo, safe='/:')}/push?{query}"
        for msg in self._stream("POST", path, b"", headers):
            if "error" in msg:
                raise BackendError(
                    f"push of {tag} failed: {str(msg['error']).strip()}",
                    hint="check you may push to that repository (for Artifact Registry: "
                    "`gcloud auth application-default login`, and the repository must exist)",
                )
            if msg.get("status"):
                on_line(" ".join(str(msg[k]) for k in ("id", "status") if msg.get(k)))
            aux = msg.get("aux")
            if isinstance(aux, dict) and aux.get("Digest"):
                digest = aux["Digest"]
        return digest


def _split_tag(ref: str) -> tuple[str, str, str]:
    """``registry/repo:tag`` → (``registry/repo``, ``:``, ``tag``); tag defaults to latest."""
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > slash:
        return ref[:colon], ":", ref[colon + 1:]
    return ref, ":", "latest"
