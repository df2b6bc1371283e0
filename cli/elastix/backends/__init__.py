"""The backends by name, each imported only when a command uses it (as torchx's schedulers).

``elastix --help`` and client dry runs must not pay for ``kubernetes`` or the local
supervisor, so the registry maps a name to a module path, not to a class.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from typing import TYPE_CHECKING

from elastix.errors import UsageError

if TYPE_CHECKING:
    from elastix.backends.base import Backend

@dataclasses.dataclass(frozen=True)
class Target:
    """Where a command acts: which backend and, for GKE, which cluster and namespace.

    Here rather than in ``base`` so that declaring the command options stays cheap.
    """

    backend: str | None = None  # None: choose (gke when a cluster is configured, else local)
    context: str | None = None
    kubeconfig: str | None = None
    namespace: str | None = "default"  # None only before a spec supplies it (workload create)
    cluster: str | None = None
    project: str | None = None
    location: str | None = None
    state_dir: str | None = None  # local backend: where workload state lives


# name -> (module, class)
BACKENDS = {
    "gke": ("elastix.backends.gke.backend", "GKEBackend"),
    "local": ("elastix.backends.local.backend", "LocalBackend"),
}


def choose_backend(target: Target) -> str:
    """The backend a command uses: ``--backend``, else gke when a cluster is named or a
    kubeconfig exists, else local.

    Raises:
        UsageError: ``--backend`` names no known backend.
    """
    if target.backend:
        if target.backend not in BACKENDS:
            raise UsageError(f"unknown backend {target.backend!r}",
                             hint="use --backend gke or local")
        return target.backend
    if target.cluster or target.context:
        return "gke"
    kubeconfig = target.kubeconfig or os.path.expanduser("~/.kube/config")
    if any(os.path.exists(p) for p in kubeconfig.split(os.pathsep) if p):
        return "gke"
    return "local"


def backend_class(name: str) -> type[Backend]:
    """The class of backend ``name`` (imports its module)."""
    module, cls = BACKENDS[name]
    return getattr(importlib.import_module(module), cls)


def get_backend(target: Target) -> Backend:
    """Build the backend a target describes."""
    return backend_class(choose_backend(target)).from_target(target)
