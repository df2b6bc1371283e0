"""Look a GKE cluster up with ``google-cloud-container`` and build a Kubernetes client for it.

No gcloud, no kubeconfig: the cluster's endpoint and CA come from the GKE API (REST transport),
the bearer token from google-auth application-default credentials. ``ELASTIX_GKE_API_ENDPOINT``
points the GKE API at another server (tests run a local one).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import tempfile
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
        raise BackendError(f"no Google Cloud credentials: {str(err).splitlines()[0]}",
                           hint=ADC_HINT) from None


def get_cluster(project: str, location: str, cluster: str, creds: Any = None) -> Any:
    """The ``container_v1.Cluster`` (endpoint, CA, ...) named by project/location/cluster."""
    from google.api_core import exceptions as gexc
    from google.auth.exceptions import RefreshError, TransportError
    from google.cloud import container_v1

    if creds is None:
        creds, _ = credentials()
    options = {}
    if os.environ.get(ENDPOINT_ENV):
        options["api_endpoint"] = os.environ[ENDPOINT_ENV]
    client = container_v1.ClusterManagerClient(credentials=creds, transport="rest",
                                               client_options=options)
    name = f"projects/{project}/locations/{location}/clusters/{cluster}"
    try:
        return client.get_cluster(name=name, timeout=30.0)
    except gexc.NotFound:
        raise NotFoundError(f"no GKE cluster {cluster!r} in project {project!r}, location "
                            f"{location!r}",
                            hint="check --cluster/--project/--location (a zonal cluster needs "
                                 "its zone, e.g. us-central1-a)") from None
    except (gexc.Unauthenticated, gexc.Unauthorized, RefreshError) as err:
        raise BackendError(f"Google Cloud rejected the application-default credentials: {err}",
                           hint=ADC_HINT) from None
    except (gexc.PermissionDenied, gexc.Forbidden) as err:
        raise BackendError(f"permission denied reading cluster {name}: {err.message}",
                           hint="the credentials need container.clusters.get "
                                "(roles/container.clusterViewer)") from None
    except gexc.GoogleAPICallError as err:
        raise BackendError(f"the GKE API failed looking up {name}: {err}",
                           hint="try again; check the project and location") from None
    except (TransportError, OSError) as err:
        raise BackendError(f"cannot reach the GKE API: {err}",
                           hint="check the network (or ELASTIX_GKE_API_ENDPOINT)") from None


def api_client_for_cluster(project: str | None, location: str | None,
                           cluster: str) -> tuple[Any, str]:
    """An authenticated ``ApiClient`` for a GKE cluster, and a label for messages."""
    import google.auth.transport.requests
    from google.auth.exceptions import RefreshError
    from kubernetes import client

    creds, adc_project = credentials()
    project = project or adc_project
    if not project or not location:
        raise UsageError("--cluster needs --project and --location",
                         hint="e.g. --cluster c --project my-proj --location us-central1")
    gke = get_cluster(project, location, cluster, creds)
    cfg = client.Configuration()
    cfg.host = f"https://{gke.endpoint}"
    cfg.ssl_ca_cert = _ca_file(gke.master_auth.cluster_ca_certificate)

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
    return client.ApiClient(cfg), where


def _ca_file(ca_b64: str) -> str | None:
    """Write the cluster CA to a private temporary file, removed when the process exits."""
    if not ca_b64:
        return None
    fd, path = tempfile.mkstemp(prefix="elastix-ca-", suffix=".pem")
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(ca_b64))
    atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
