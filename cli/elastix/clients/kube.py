"""Kubernetes client construction and error translation for the GKE backend.

The user's kubeconfig is only ever *read*: clients are built from their own ``Configuration``
objects (never the library's global default), and nothing is written back. ``kubernetes`` and
``urllib3`` are imported inside functions so that ``elastix --help`` stays light.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from elastix.clients.retry import Retried, RetryPolicy, is_api_server_status
from elastix.errors import (
    BackendError,
    ConflictError,
    ElastixError,
    ManifestError,
    NotFoundError,
    UsageError,
    load_user_yaml,
    read_user_text,
    shown,
)

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


class Busy(BackendError):
    """429 or 503 that retries did not get past. ``not_processed``: the API server's own
    refusal (a ``Status`` body), so the request was certainly not acted on."""

    def __init__(self, message: str, hint: str | None = None, *,
                 not_processed: bool = False) -> None:
        super().__init__(message, hint=hint)
        self.not_processed = not_processed


class Forbidden(BackendError):
    """The identity may not do this (403): a caller that can go without it branches on it."""


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

    paths = kubeconfig.split(os.pathsep) if kubeconfig else [os.path.expanduser("~/.kube/config")]
    present = [path for path in paths if path and os.path.exists(path)]
    if not present:
        where = kubeconfig or paths[0]
        raise UsageError(f"no kubeconfig at {where}" + ("" if kubeconfig else
                         " (no --kubeconfig, no KUBECONFIG)"),
                         hint="pass --kubeconfig FILE (or set KUBECONFIG), or "
                              "--cluster/--project/--location to look the cluster up")
    for path in present:
        check_kubeconfig(path)
    if context is not None:
        _check_context(kubeconfig, context, ", ".join(present))
    cfg = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, context=context,
                                client_configuration=cfg, persist_config=False)
    except (TypeError, AttributeError, KeyError, ValueError) as err:
        # A shape check_kubeconfig lets through that the library's loader trips on.
        raise UsageError(f"kubeconfig {kubeconfig or paths[0]!r} is not a valid kubeconfig "
                         f"({type(err).__name__}: {err})", hint=_KUBECONFIG_HINT) from None
    except ConfigException as err:
        text = str(err).removeprefix("Invalid kube-config file. ").rstrip(".")
        raise UsageError(f"cannot use kubeconfig {', '.join(present)}: {text}",
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


def _check_context(kubeconfig: str | None, context: str, where: str) -> None:
    """A ``--context`` the kubeconfig does not have, said in elastix's words with the choices."""
    from kubernetes import config

    try:
        contexts, _ = config.list_kube_config_contexts(config_file=kubeconfig)
    except Exception:  # noqa: BLE001 - the loader reports the file's own problem just after
        return
    names = [c.get("name") for c in contexts or [] if isinstance(c, dict)]
    if context not in names:
        have = ", ".join(str(n) for n in names) if names else "none"
        raise UsageError(f"--context {shown(context)} is not in kubeconfig {where} (its contexts: "
                         f"{have})", hint="pass --context with one of them, or leave it out "
                                          "for the current context")


_KUBECONFIG_HINT = ("fix the file, or pass another with --kubeconfig (the KUBECONFIG variable "
                    "names it when the flag is absent)")
# The kubeconfig's lists and what each entry must hold: kubernetes' loader indexes into them
# without checking, so a wrong shape would surface as a TypeError from deep inside it.
_KUBECONFIG_LISTS = {"clusters": "cluster", "contexts": "context", "users": "user"}


def check_kubeconfig(path: str) -> None:
    """Read a kubeconfig file as the loader will, and reject what it would crash on.

    Raises:
        UsageError: unreadable, not UTF-8, not YAML, or not shaped like a kubeconfig.
    """

    # a regular file, bounded, never opened to block (/dev/zero was read until the memory
    # ran out, a FIFO waited for a writer for ever)
    text = read_user_text(Path(path), "kubeconfig", "--kubeconfig", _KUBECONFIG_HINT,
                          limit=16 << 20)
    data = load_user_yaml(text, f"kubeconfig {path!r}", _KUBECONFIG_HINT)
    if data is None:
        return  # the loader says "file is empty" itself
    problem = None
    if not isinstance(data, dict):
        problem = f"a {type(data).__name__}, not a mapping"
    else:
        for key, inner in _KUBECONFIG_LISTS.items():
            items = data.get(key)
            if items is None:
                continue
            if not isinstance(items, list) or not all(
                    isinstance(i, dict) and isinstance(i.get(inner, {}), dict) for i in items):
                problem = (f"{shown(key)} must be a list of mappings with a name and a "
                           f"{shown(inner)}")
                break
    if problem:
        raise UsageError(f"kubeconfig {path!r} is not a kubeconfig: {problem}",
                         hint=_KUBECONFIG_HINT)


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


DEFAULT_TIMEOUT = (10.0, 20.0)
"""(connect, read) seconds of a request that names none."""


class Http:
    """Raw JSON requests through a ``kubernetes.client.ApiClient`` (auth, TLS, proxies).

    The typed API classes (``CoreV1Api``...) import hundreds of pydantic models (about 0.7 s),
    and elastix reads plain JSON anyway, so requests go to explicit API paths.
    """

    def __init__(self, api_client: Any, retry: RetryPolicy | None = None) -> None:
        from urllib3.util.retry import Retry

        self.api = api_client
        self.retry = retry or RetryPolicy()  # 429/503 answers: elastix.clients.retry
        # urllib3 retries a timed-out GET three times by default: a server that accepts and
        # never answers would hold a command silent for 4 x the read timeout. One attempt each,
        # so every request is bounded by the timeout it is given (and the error can say which).
        pool = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
        if pool is not None:
            pool.connection_pool_kw["retries"] = Retry(total=None, connect=1, read=0, status=0,
                                                       redirect=3, raise_on_status=False)
            pool.clear()  # pools made before this would keep the old policy

    def request(self, method: str, path: str, query: dict | None = None, body: Any = None,
                stream: bool = False, timeout: Any = DEFAULT_TIMEOUT,
                content_type: str = "application/json") -> Any:
        """JSON of the answer (or, with ``stream``, the open urllib3 response).

        ``content_type`` is the body's: e.g. ``application/apply-patch+yaml`` for server-side
        apply (the client still sends the dict as JSON, which is YAML).

        ``timeout`` is (connect, read) seconds or one number for both; None takes the default,
        so no request waits unbounded.

        A 429 or 503 answer is sent again within :attr:`retry`'s bound when that is safe
        (:mod:`elastix.clients.retry`); the error that ends it carries a
        :class:`~elastix.clients.retry.Retried` as ``elastix_retried``, for the message.

        Raises:
            kubernetes.client.exceptions.ApiException: a non-2xx answer.
            NoAnswer: the server did not connect or answer within the timeout.
        """
        from kubernetes.client.exceptions import ApiException

        started, record = self.retry.clock(), Retried()
        while True:
            try:
                return self._once(method, path, query, body, stream, timeout, content_type)
            except ApiException as err:
                delay = self.retry.wait(method, content_type, err, record.attempts, started,
                                        record)
                if delay is None:
                    err.elastix_retried = record
                    err.elastix_request = (method, path)  # what a 404 was about
                    raise
            self.retry.sleep(delay)
            record.attempts += 1
            record.waited += delay

    def _once(self, method: str, path: str, query: dict | None, body: Any, stream: bool,
              timeout: Any, content_type: str) -> Any:
        """One attempt of :meth:`request`."""
        from kubernetes.client.exceptions import ApiException

        timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        q = [(k, _q(v)) for k, v in (query or {}).items() if v is not None]
        headers = {"Accept": "application/json, */*"}  # pod logs answer text/plain
        if body is not None:
            headers["Content-Type"] = content_type
        params = self.api.param_serialize(method=method, resource_path=path, query_params=q,
                                          header_params=headers, body=body,
                                          auth_settings=["BearerToken"])
        try:
            resp = self.api.call_api(*params, _request_timeout=timeout)
        except Exception as err:  # noqa: BLE001 - timeouts get their seconds, the rest goes on
            silent = _silence(err, timeout)
            if silent is None:
                raise
            raise silent from err
        if not 200 <= resp.status <= 299:
            resp.read()
            raise ApiException.from_response(http_resp=resp, body=None, data=None)
        if stream:
            return resp.response
        resp.read()
        return json.loads(resp.data or b"null")


class NoAnswer(TimeoutError):
    """Raised by :meth:`Http.request`: the server stayed silent for ``seconds`` (then
    :class:`Translator` says while doing what)."""

    def __init__(self, seconds: float | None, connecting: bool, handshake: bool = False) -> None:
        super().__init__(f"no answer in {seconds} s")
        self.seconds = seconds
        self.connecting = connecting
        self.handshake = handshake


def _silence(err: Exception, timeout: Any) -> NoAnswer | None:
    """A :class:`NoAnswer` for a connect or read timeout (possibly inside a MaxRetryError).

    A TLS handshake that never completes is reported by urllib3 as a *read* timeout, but under
    the connect timeout (the socket's timeout until the connection is up; urllib3 2.x
    ``connectionpool._raise_timeout`` names it: ``(read timeout=10.0)``). The bound that
    actually ran out is taken from there, so a server that accepts and never answers TLS is
    not said to have been waited on for the read timeout.
    """
    from urllib3.exceptions import ConnectTimeoutError, MaxRetryError, NewConnectionError, ReadTimeoutError

    reason = err.reason if isinstance(err, MaxRetryError) else err
    connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
    if isinstance(reason, ReadTimeoutError):
        m = re.search(r"read timeout=([0-9.]+)\)", str(reason))
        ran_out = float(m.group(1)) if m else read
        if connect != read and connect is not None and ran_out == float(connect):
            return NoAnswer(connect, connecting=True, handshake=True)
        return NoAnswer(read, connecting=False)
    if isinstance(reason, ConnectTimeoutError) and not isinstance(reason, NewConnectionError):
        return NoAnswer(connect, connecting=True)
    return None


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
        if isinstance(err, NoAnswer):
            seconds = f" in {err.seconds:g} s" if err.seconds else ""
            doing = ("complete the TLS handshake" if err.handshake else
                     "accept a connection" if err.connecting else "answer")
            return ApiTimeout(f"timed out {what}: the Kubernetes API server did not {doing}"
                              f"{seconds} ({self.where})",
                              hint="the API server is overloaded or unreachable; check the "
                                   "cluster's control plane (or --context), then try again")
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
            return Forbidden(f"permission denied while {what}: {msg}",
                                hint=f"the identity of {self.where} needs RBAC permission for "
                                     "this (on GKE: roles/container.developer)")
        if code == 404:
            return self._not_found(err, body, msg, what, kind, namespace)
        if code == 409:
            return ConflictError(f"conflict while {what}: {msg}",
                                 hint="the object changed or already exists; try again")
        if code in (400, 422):
            # A 422's message already lists its causes (NewInvalid): add only the ones it lacks.
            causes = [c.get("message", "") for c in (body.get("details") or {}).get("causes", [])
                      if c.get("message") and c.get("message") not in msg]
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
        if code in (429, 503):
            return self._busy(err, code, msg, what)
        if code >= 500:
            return BackendError(f"the API server failed ({code}) while {what}: {msg}",
                                hint="a control-plane problem (upgrade, overload); try again later")
        return BackendError(f"the API server answered {code} while {what}: {msg}")


    def _not_found(self, err: Any, body: dict, msg: str, what: str, kind: str,
                   namespace: str | None) -> NotFoundError:
        """A 404, saying what was not found: an object the API server named (kind, name,
        namespace), or, with no object named, the JobSet API itself (the CRD is not installed)
        when the request was for JobSets, else the path asked for."""
        details = body.get("details") or {}
        where = f" in namespace {namespace}" if namespace else ""
        if body.get("reason") == "NotFound" and details.get("name"):
            name, plural = details["name"], details.get("kind") or ""
            if plural == "namespaces":
                return NotFoundError(f"namespace {name!r} does not exist",
                                     hint="pick another namespace with -n")
            listing = "elastix workload list --all" + (f" -n {namespace}" if namespace else "")
            if plural == JOBSET_PLURAL or (not plural and kind == "workload"):
                return NotFoundError(f"JobSet {name!r} not found{where}: no workload of that "
                                     "name", hint=f"list them with: {listing}")
            label = _KINDS.get(plural) or plural.removesuffix("s") or kind
            return NotFoundError(f"{label} {name!r} not found{where} (while {what})",
                                 hint=f"it may have just been deleted or replaced; see the "
                                      f"workloads with: {listing}")
        method, path = getattr(err, "elastix_request", ("", ""))
        if not path or f"/apis/{JOBSET_GROUP}/" in path:
            return ApiUnavailable(f"the JobSet API is not available on {self.where} (the JobSet "
                                  f"CRD is not installed?) while {what}",
                                  hint=JOBSET_INSTALL_HINT)
        return NotFoundError(f"not found while {what}: the API server has no {path} ({msg})",
                             hint="it may have just been deleted; run the command again")

    def _busy(self, err: Any, code: int, msg: str, what: str) -> Busy:
        """429 (throttled) or 503 (unavailable), with what the retries did."""
        tried: Retried = getattr(err, "elastix_retried", None) or Retried()
        after = (f"; it asked to retry after {tried.retry_after:g} s"
                 if tried.retry_after is not None else "")
        if tried.over_budget:
            after += " (longer than elastix waits)" if tried.attempts == 1 else ""
        if tried.attempts > 1:
            after += f"; still {code} after {tried.attempts} attempts in {tried.waited:g} s"
        if not tried.sendable:
            after += " (not sent again: the answer did not come from the API server itself)"
        if code == 429:
            return Busy(f"the Kubernetes API server is throttling requests (429 Too Many "
                        f"Requests) while {what} ({self.where}){after}",
                        hint="the control plane is overloaded (too many clients or requests); "
                             "try again in a minute", not_processed=is_api_server_status(err))
        return Busy(f"the Kubernetes API server is unavailable (503 Service Unavailable) while "
                    f"{what} ({self.where}): {msg}{after}",
                    hint="the control plane may be restarting, upgrading or overloaded (on GKE: "
                         "gcloud container operations list); try again in a few minutes",
                    not_processed=is_api_server_status(err))


# How a 404's Status names a kind (its plural) and how a message names it.
_KINDS = {"pods": "pod", "jobs": "Job", "events": "event", "nodes": "node",
          "serviceaccounts": "ServiceAccount", "roles": "Role", "rolebindings": "RoleBinding",
          JOBSET_PLURAL: "JobSet"}


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
