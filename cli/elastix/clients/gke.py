"""The GKE API through ``google-cloud-container``: the one client factory and error translator,
and the cluster lookup that builds a Kubernetes client for a GKE cluster.

No gcloud, no kubeconfig: the cluster's endpoint and CA come from the GKE API (REST transport),
the bearer token from google-auth application-default credentials. ``ELASTIX_GKE_API_ENDPOINT``
points the GKE API at another server (tests run a local one).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import re
import tempfile
from collections.abc import Callable
from typing import Any

from elastix.errors import BackendError, NotFoundError, UsageError

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
ENDPOINT_ENV = "ELASTIX_GKE_API_ENDPOINT"
ADC_HINT = ("set up application-default credentials (gcloud auth application-default login, or "
            "GOOGLE_APPLICATION_CREDENTIALS=key.json)")


def credentials() -> tuple[Any, str | None]:
    """Application-default credentials with the cloud-platform scope, and their project."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        return google.auth.default(scopes=SCOPES)
    except DefaultCredentialsError as err:
        # google-auth raises with (message, cause) at times: str() of that is a tuple.
        first = err.args[0] if err.args and isinstance(err.args[0], str) else str(err)
        why = _readable(first.splitlines()[0] if first else type(err).__name__)
        named = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
        if named:  # the user's own setting: bad input, said about the variable
            raise UsageError(f"GOOGLE_APPLICATION_CREDENTIALS={named} is unusable: {why}",
                             hint="point it at a service-account key or an authorized-user "
                                  "file (`gcloud auth application-default login` writes one), "
                                  "or unset it") from None
        raise BackendError(f"no Google Cloud credentials: {why}", hint=ADC_HINT) from None


def _readable(text: str) -> str:
    """google-auth's message with its Python tuples of names as plain lists: ``expected one of
    ('a', 'b')`` reads ``expected one of a, b``."""
    return re.sub(r"\(('[^']*'(?:, )?)+\)",
                  lambda m: ", ".join(re.findall(r"'([^']*)'", m.group(0))), text)


def cluster_manager(creds: Any = None) -> Any:
    """A ``ClusterManagerClient`` on the REST transport (``ELASTIX_GKE_API_ENDPOINT`` for tests).

    Args:
        creds: google-auth credentials; None for the application-default ones.
    """
    from google.cloud import container_v1

    if creds is None:
        creds, _ = credentials()
    options = {}
    if os.environ.get(ENDPOINT_ENV):
        options["api_endpoint"] = os.environ[ENDPOINT_ENV]
    return container_v1.ClusterManagerClient(credentials=creds, transport="rest",
                                             client_options=options)


def translate(err: Exception, what: str) -> Exception:
    """A ``google.api_core`` error as an elastix error with a hint (cluster provisioning)."""
    from google.api_core import exceptions

    # The REST transport prefixes the message with "POST https://...: "; the URL adds nothing.
    msg = re.sub(r"^[A-Z]+ \S+: ", "", getattr(err, "message", None) or str(err))
    # HTTP status classes: the REST transport raises Forbidden/TooManyRequests/BadRequest/...,
    # of which the gRPC-named errors (PermissionDenied, ResourceExhausted, ...) are subclasses.
    if isinstance(err, exceptions.NotFound):
        return NotFoundError(f"not found while {what}: {msg}",
                             hint="check --project and --zone, and that the Kubernetes Engine API "
                                  "is enabled (gcloud services enable container.googleapis.com)")
    if isinstance(err, (exceptions.Forbidden, exceptions.Unauthorized)):
        return BackendError(f"permission denied while {what}: {msg}",
                            hint="the credentials need roles/container.admin on the project "
                                 "(gcloud auth application-default login)")
    if isinstance(err, exceptions.TooManyRequests):
        return BackendError(f"quota or capacity exhausted while {what}: {msg}",
                            hint="request TPU quota in the zone, try another zone, or use --spot")
    if isinstance(err, exceptions.Conflict):
        return BackendError(f"already exists while {what}: {msg}",
                            hint="run `elastix cluster describe` to see it")
    if isinstance(err, exceptions.BadRequest):
        return UsageError(f"GKE rejected the request while {what}: {msg}",
                          hint="another operation may be running on the cluster; check "
                               "`elastix cluster describe`")
    if isinstance(err, exceptions.GoogleAPICallError):
        return BackendError(f"the GKE API failed while {what}: {msg}", hint="try again later")
    return BackendError(f"cannot reach the GKE API while {what}: {err}",
                        hint="check the network (or ELASTIX_GKE_API_ENDPOINT)")


def call(what: str, fn: Callable[[], Any]) -> Any:
    """Run one GKE API call, translating its errors."""
    from google.api_core import exceptions
    from google.auth.exceptions import GoogleAuthError

    try:
        return fn()
    except (exceptions.GoogleAPICallError, GoogleAuthError, OSError) as err:
        raise translate(err, what) from err


def lookup_cluster(project: str, location: str, cluster: str, creds: Any = None) -> Any:
    """The ``container_v1.Cluster`` (endpoint, CA, ...) named by project/location/cluster.

    Its errors say "looking up" and name the read-only role: this is the path of every workload
    command given ``--cluster``, not of provisioning (see :func:`translate`).
    """
    from google.api_core import exceptions
    from google.auth.exceptions import RefreshError, TransportError

    client = cluster_manager(creds)
    name = f"projects/{project}/locations/{location}/clusters/{cluster}"
    try:
        return client.get_cluster(name=name, timeout=30.0)
    except exceptions.NotFound:
        raise NotFoundError(f"no GKE cluster {cluster!r} in project {project!r}, location "
                            f"{location!r}",
                            hint="check --cluster/--project/--location (a zonal cluster needs "
                                 "its zone, e.g. us-central1-a)") from None
    except (exceptions.Unauthenticated, exceptions.Unauthorized, RefreshError) as err:
        raise BackendError(f"Google Cloud rejected the application-default credentials: {err}",
                           hint=ADC_HINT) from None
    except (exceptions.PermissionDenied, exceptions.Forbidden) as err:
        raise BackendError(f"permission denied reading cluster {name}: {err.message}",
                           hint="the credentials need container.clusters.get "
                                "(roles/container.clusterViewer)") from None
    except exceptions.GoogleAPICallError as err:
        raise BackendError(f"the GKE API failed looking up {name}: {err}",
                           hint="try again; check the project and location") from None
    except (TransportError, OSError) as err:
        raise BackendError(f"cannot reach the GKE API: {err}",
                           hint="check the network (or ELASTIX_GKE_API_ENDPOINT)") from None


def api_client_for_cluster(project: str | None, location: str | None,
                           cluster: str) -> tuple[Any, str]:
    """An authenticated ``ApiClient`` for a GKE cluster, and a label for messages."""
    api, where, _ = cluster_and_api_client(project, location, cluster)
    return api, where


def cluster_and_api_client(project: str | None, location: str | None,
                           cluster: str) -> tuple[Any, str, Any]:
    """An authenticated ``ApiClient`` for a GKE cluster, a label for messages, and the
    ``container_v1.Cluster`` the lookup returned (its node pools serve preflight, no extra
    request)."""
    import google.auth.transport.requests
    from google.auth.exceptions import RefreshError
    from kubernetes import client

    creds, adc_project = credentials()
    project = project or adc_project
    if not project or not location:
        raise UsageError("--cluster needs --project and --location",
                         hint="e.g. --cluster c --project my-proj --location us-central1")
    found = lookup_cluster(project, location, cluster, creds)
    cfg = client.Configuration()
    cfg.host = f"https://{found.endpoint}"
    cfg.ssl_ca_cert = _ca_file(found.master_auth.cluster_ca_certificate)

    def refresh(conf: Any) -> None:
        if not creds.valid:
            try:
                creds.refresh(google.auth.transport.requests.Request())
            except RefreshError as err:
                raise BackendError(f"cannot refresh the Google Cloud token: {err}",
                                   hint=ADC_HINT) from None
        conf.api_key = {"authorization": creds.token}

    cfg.api_key_prefix = {"authorization": "Bearer"}
    cfg.refresh_api_key_hook = refresh
    refresh(cfg)
    where = f"GKE cluster {project}/{location}/{cluster} ({cfg.host})"
    return client.ApiClient(cfg), where, found


def _ca_file(ca_b64: str) -> str | None:
    """The cluster CA as a file the ``kubernetes`` client can read: one per certificate, named
    by its digest, in this user's private cache directory (0700), written once and reused, so
    nothing is left per command, not even by a command that was SIGKILLed. Where that
    directory cannot be used (not this user's, or open to others, or not writable), a private
    temporary file removed when the process exits, as before."""
    if not ca_b64:
        return None
    pem = base64.b64decode(ca_b64)
    try:
        return _cached_ca(pem)
    except OSError:
        pass
    fd, path = tempfile.mkstemp(prefix="elastix-ca-", suffix=".pem")
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    atexit.register(_remove, path)
    return path


def _cached_ca(pem: bytes) -> str:
    """``pem`` in ``<user cache>/elastix/ca/<sha256>.pem``, made (atomically) if missing or
    not that certificate.

    Raises:
        OSError: the directory is another user's or open to others, or cannot be written.
    """
    import hashlib
    import stat

    import platformdirs

    d = os.path.join(platformdirs.user_cache_dir("elastix"), "ca")
    os.makedirs(d, mode=0o700, exist_ok=True)
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise OSError(f"{d} is not a private directory of this user's")
    path = os.path.join(d, hashlib.sha256(pem).hexdigest()[:32] + ".pem")
    with contextlib.suppress(OSError):
        with open(path, "rb") as f:
            if f.read() == pem:
                return path
    fd, tmp = tempfile.mkstemp(prefix=".ca-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
