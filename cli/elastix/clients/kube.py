"""Kubernetes client construction and error translation for the GKE backend.

The user's kubeconfig is only ever *read*: clients are built from their own ``Configuration``
objects (never the library's global default), and nothing is written back. ``kubernetes`` and
``urllib3`` are imported inside functions so that ``elastix --help`` stays light.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from elastix.errors import BackendError, ConflictError, ElastixError, ManifestError, NotFoundError

JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
JOBSET_PLURAL = "jobsets"
JOBSET_INSTALL_HINT = (
    "install JobSet: `elastix cluster create` installs it when missing, or apply "
    "https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml "
    "(server-side)"
)


# Typed errors for the outcomes callers branch on (``logs -f`` reconnects on a cut or a quiet
# stream, waits for a container to start; ``exists`` must not read "no JobSet API" as "no
# workload"). Each subclasses the type raised before it existed, so messages and exit codes stay.


class StreamCut(BackendError):
    """The connection dropped in the middle of a request or a streamed answer."""


class ApiTimeout(BackendError):
    """The API server did not answer, or a stream stayed silent, within the timeout."""


class ApiUnavailable(NotFoundError):
    """The JobSet API is not served by the cluster (404 on the API path: no CRD)."""


class ContainerWaiting(BackendError):
    """A pod's log was asked for before its container started (400 "... waiting to start")."""


_UNREACHABLE_HINT = ("is the cluster running and the context right? (--context, --kubeconfig, "
                     "or --cluster/--project/--location)")

# The API server's wording (kubelet log endpoint) for a container that has not started yet.
_WAITING = "waiting to start"


def api_client_from_kubeconfig(kubeconfig: str | None, context: str | None) -> tuple[Any, str]:
    """An ``ApiClient`` for a kubeconfig context, and a label for messages (context @ server).

    Args:
        kubeconfig: path (or ``os.pathsep``-separated paths); None for ``$KUBECONFIG`` or
            ``~/.kube/config``.
        context: context name; None for the current context.
    """
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    cfg = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, context=context,
                                client_configuration=cfg, persist_config=False)
    except ConfigException as err:
        raise BackendError(f"cannot use kubeconfig: {err}",
                           hint="pass --kubeconfig FILE and --context NAME, or --cluster/--project/"
                                "--location to look the cluster up") from None
    except FileNotFoundError as err:
        raise BackendError(f"kubeconfig not found: {err.filename}",
                           hint="pass --kubeconfig FILE, or --cluster/--project/--location") from None
    ctx = context
    if ctx is None:
        with contextlib.suppress(Exception):
            _, current = config.list_kube_config_contexts(config_file=kubeconfig)
            ctx = current["name"]
    return client.ApiClient(cfg), f"context {ctx or '?'} ({cfg.host})"


def api_path(api_version: str, plural: str, name: str | None = None,
             namespace: str | None = None, sub: str | None = None) -> str:
    """The API path of a collection or object (and subresource), for any group and version.

    Args:
        api_version: ``v1`` (the core group, under ``/api``) or ``group/version`` (under
            ``/apis``), as in a manifest's ``apiVersion``.
        plural: the resource's plural, e.g. ``pods``, ``jobsets``.
        name: the object; None for the collection.
        namespace: None for a cluster-scoped resource.
        sub: a subresource, e.g. ``log``.
    """
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"{prefix}{scope}/{plural}" + "".join(f"/{x}" for x in (name, sub) if x)


class Http:
    """Raw JSON requests through a ``kubernetes.client.ApiClient`` (auth, TLS, proxies).

    The typed API classes (``CoreV1Api``...) import hundreds of pydantic models (about 0.7 s),
    and elastix reads plain JSON anyway, so requests go to explicit API paths.
    """

    def __init__(self, api_client: Any) -> None:
        self.api = api_client

    def request(self, method: str, path: str, query: dict | None = None, body: Any = None,
                stream: bool = False, timeout: Any = (10.0, 60.0),
                content_type: str = "application/json") -> Any:
        """JSON of the answer (or, with ``stream``, the open urllib3 response).

        ``content_type`` is the body's: e.g. ``application/apply-patch+yaml`` for server-side
        apply (the client still sends the dict as JSON, which is YAML).

        Raises:
            kubernetes.client.exceptions.ApiException: a non-2xx answer.
        """
        from kubernetes.client.exceptions import ApiException

        q = [(k, _q(v)) for k, v in (query or {}).items() if v is not None]
        headers = {"Accept": "application/json, */*"}  # pod logs answer text/plain
        if body is not None:
            headers["Content-Type"] = content_type
        params = self.api.param_serialize(method=method, resource_path=path, query_params=q,
                                          header_params=headers, body=body,
                                          auth_settings=["BearerToken"])
        resp = self.api.call_api(*params, _request_timeout=timeout)
        if not 200 <= resp.status <= 299:
            resp.read()
            raise ApiException.from_response(http_resp=resp, body=None, data=None)
        if stream:
            return resp.response
        resp.read()
        return json.loads(resp.data or b"null")


def close_stream(resp: Any) -> None:
    """Drop a response that may be unread: returning it to the pool would hand the next request
    a connection still busy with this stream."""
    resp.close()
    resp.release_conn()


def _q(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


class Translator:
    """Turns client exceptions into elastix errors with a one-line message and a hint."""

    def __init__(self, where: str) -> None:
        self.where = where  # "context gke_x (https://1.2.3.4)": which credential, which server

    @contextlib.contextmanager
    def __call__(self, what: str, name: str | None = None, kind: str = "workload",
                 namespace: str | None = None, invalid: type = ManifestError) -> Iterator[None]:
        """Translate errors raised in the block.

        Args:
            what: what was being done ("creating workload x"), for the message.
            name, kind, namespace: the object concerned, for 404 messages.
            invalid: the error type for 400/422 answers (a rejected manifest by default).
        """
        try:
            yield
        except ElastixError:
            raise
        except Exception as err:  # noqa: BLE001 - sorted below, re-raised if unknown
            raise self.translate(err, what, name, kind, namespace, invalid) from err

    def translate(self, err: Exception, what: str, name: str | None = None,
                  kind: str = "workload", namespace: str | None = None,
                  invalid: type = ManifestError) -> Exception:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import (
            ConnectTimeoutError,
            HTTPError,
            IncompleteRead,
            MaxRetryError,
            NewConnectionError,
            ProtocolError,
            ReadTimeoutError,
            SSLError,
        )

        if isinstance(err, ApiException):
            return self._api(err, what, kind, namespace, invalid)
        if isinstance(err, MaxRetryError) and err.reason is not None:
            return self.translate(err.reason, what, name, kind, namespace, invalid)
        if isinstance(err, (NewConnectionError, ConnectionRefusedError)):
            # NewConnectionError subclasses ConnectTimeoutError: test it first.
            return BackendError(f"cannot reach the Kubernetes API server while {what} "
                                f"({self.where})", hint=_UNREACHABLE_HINT)
        if isinstance(err, (ReadTimeoutError, ConnectTimeoutError, TimeoutError)):
            return ApiTimeout(f"timed out {what} ({self.where})",
                              hint="the API server is slow or unreachable; try again, or check "
                                   "the cluster's control plane")
        if isinstance(err, SSLError):
            return BackendError(f"TLS failed while {what} ({self.where}): {err}",
                                hint="the server's certificate does not match the cluster CA in "
                                     "the kubeconfig; refresh the cluster credentials")
        if isinstance(err, (ProtocolError, IncompleteRead, ConnectionResetError)):
            return StreamCut(f"the connection was cut while {what} ({self.where})",
                             hint="run the command again")
        if isinstance(err, (HTTPError, ConnectionError)):
            return BackendError(f"cannot reach the Kubernetes API server while {what} "
                                f"({self.where}): {err}", hint=_UNREACHABLE_HINT)
        return err

    def _api(self, err: Any, what: str, kind: str, namespace: str | None,
             invalid: type) -> Exception:
        body = _status_body(err.body)
        msg = body.get("message") or (err.reason or "").strip() or str(err.status)
        code = err.status
        if code == 401:
            return BackendError(f"the API server rejected the credentials of {self.where} "
                                f"(401 Unauthorized) while {what}",
                                hint="refresh the credentials (for GKE: gcloud auth "
                                     "application-default login, or the kubeconfig user's token)")
        if code == 403:
            return BackendError(f"permission denied while {what}: {msg}",
                                hint=f"the identity of {self.where} needs RBAC permission for "
                                     "this (on GKE: roles/container.developer)")
        if code == 404:
            details = body.get("details") or {}
            if body.get("reason") == "NotFound" and details.get("name"):
                if details.get("kind") == "namespaces":
                    return NotFoundError(f"namespace {details['name']!r} does not exist",
                                         hint="pick another namespace with -n")
                where = f" in namespace {namespace}" if namespace else ""
                return NotFoundError(f"no {kind} named {details['name']!r}{where}",
                                     hint="list them with: elastix workload list"
                                          + (f" -n {namespace}" if namespace else ""))
            return ApiUnavailable(f"the JobSet API is not available on {self.where} (the JobSet "
                                  f"CRD is not installed?) while {what}",
                                  hint=JOBSET_INSTALL_HINT)
        if code == 409:
            return ConflictError(f"conflict while {what}: {msg}",
                                 hint="the object changed or already exists; try again")
        if code in (400, 422):
            causes = [c.get("message", "") for c in (body.get("details") or {}).get("causes", [])]
            text = msg if not causes else f"{msg} ({'; '.join(causes)})"
            if _WAITING in msg:
                return ContainerWaiting(f"{text} (while {what})")
            if invalid is not ManifestError:
                return invalid(f"{text} (while {what})")
            return ManifestError(f"the API server rejected the request while {what}: {text}",
                                 hint="check the manifest with: elastix workload create "
                                      "--dry-run=server")
        if code == 410:
            return BackendError(f"the watch expired while {what}", hint="run the command again")
        if code == 429:
            return BackendError(f"the API server is throttling requests while {what}",
                                hint="wait a moment and try again")
        if code >= 500:
            return BackendError(f"the API server failed ({code}) while {what}: {msg}",
                                hint="a control-plane problem (upgrade, overload); try again later")
        return BackendError(f"the API server answered {code} while {what}: {msg}")


def _status_body(body: Any) -> dict:
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            parsed = json.loads(body)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}
