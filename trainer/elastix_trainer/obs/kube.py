"""The head pod's own access to the Kubernetes API, shared by what calls it from the head: the
pod watch (``elastix_trainer.elastic.podwatch``) and the recovery point
(``elastix_trainer.obs.recoverypoint``).

In-cluster access is the official client's loader: the pod's service-account token and CA under
``/var/run/secrets/kubernetes.io/serviceaccount/``, the API server's address from the
``KUBERNETES_SERVICE_HOST``/``_PORT`` variables Kubernetes sets in every pod, and the pod's
namespace in the ``namespace`` file beside the token ("Accessing the Kubernetes API from a Pod",
https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/). The workload's JobSet is
named by ``ELASTIX_WORKLOAD`` (the rendered JobSet sets it to its own name).

Neither caller may fail or slow the run for the API's sake: when access is not possible each
says so in one line and does without.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from elastix.protocol import envvars
from elastix_trainer.obs.events import log

ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where Kubernetes mounts the pod's service-account token, CA and namespace."""


@dataclasses.dataclass(frozen=True)
class InCluster:
    """What a head-side caller needs: a client, the pod's namespace, the workload's name."""

    api: Any
    """A ``kubernetes.client.ApiClient`` with the pod's credentials."""
    namespace: str
    workload: str
    """The workload's (and its JobSet's) name."""


def in_cluster(what: str, without: str, account_dir: str | None = None,
               quiet_outside_pod: bool = False) -> InCluster | None:
    """The head's API access, or None after one line ``elastix: <what> off (why): <without>``.

    Args:
        what: the feature, as its lines name it (``pod watch``).
        without: what the run does without it.
        account_dir: the service-account mount (default :data:`ACCOUNT_DIR`).
        quiet_outside_pod: no line when ``KUBERNETES_SERVICE_HOST`` is unset (not in a pod at
            all: a local run, where the feature has nothing to do).
    """
    if quiet_outside_pod and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    account_dir = account_dir or ACCOUNT_DIR
    workload = os.environ.get(envvars.WORKLOAD)
    if not workload:
        log.info("elastix: %s off (%s is not set): %s", what, envvars.WORKLOAD, without)
        return None
    try:
        from kubernetes import client
        from kubernetes.config.incluster_config import InClusterConfigLoader

        cfg = client.Configuration()
        InClusterConfigLoader(token_filename=os.path.join(account_dir, "token"),
                              cert_filename=os.path.join(account_dir, "ca.crt"),
                              try_refresh_token=True).load_and_set(cfg)
        with open(os.path.join(account_dir, "namespace"), encoding="utf-8") as f:
            namespace = f.read().strip()
    except Exception as err:  # noqa: BLE001 - ConfigException, OSError: not in a pod
        log.info("elastix: %s off (no in-cluster Kubernetes config: %s): %s", what, err, without)
        return None
    return InCluster(client.ApiClient(cfg), namespace, workload)


def denied(err: BaseException) -> bool:
    """A 401 or 403 from the API server: the pod's account may not do this; retrying will not
    change that, so the caller says which grant is missing, once, and stops."""
    return getattr(err, "status", None) in (401, 403)
