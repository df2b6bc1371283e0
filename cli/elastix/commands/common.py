"""Options shared by every command that talks to a backend, and the backend factory."""

from __future__ import annotations

import dataclasses
import os

import typer

from elastix.errors import UsageError

BACKENDS = ("gke", "local")


@dataclasses.dataclass
class Target:
    """Where a command acts: which backend and, for GKE, which cluster and namespace."""

    backend: str | None = None  # None: choose (gke when a cluster is configured, else local)
    context: str | None = None
    kubeconfig: str | None = None
    namespace: str = "default"
    cluster: str | None = None
    project: str | None = None
    location: str | None = None
    state_dir: str | None = None  # local backend: where workload state lives


def target(backend: str | None, context: str | None, kubeconfig: str | None, namespace: str,
           cluster: str | None, project: str | None, location: str | None,
           state_dir: str | None) -> Target:
    """The ``Target`` of a command from its shared options (every backend command uses this)."""
    return Target(backend=backend, context=context, kubeconfig=kubeconfig, namespace=namespace,
                  cluster=cluster, project=project, location=location, state_dir=state_dir)


BackendOpt = typer.Option(None, "--backend", help="gke or local (default: gke when a cluster is "
                          "configured, else local).", envvar="ELASTIX_BACKEND")
ContextOpt = typer.Option(None, "--context", help="kubeconfig context (default: current).")
KubeconfigOpt = typer.Option(None, "--kubeconfig", help="kubeconfig file.", envvar="KUBECONFIG")
NamespaceOpt = typer.Option("default", "--namespace", "-n", help="Kubernetes namespace.")
ClusterOpt = typer.Option(None, "--cluster", help="GKE cluster name (looked up with the GKE API).")
ProjectOpt = typer.Option(None, "--project", help="Google Cloud project of the cluster.")
LocationOpt = typer.Option(None, "--location", "--zone", help="Cluster location (region or zone).")
StateDirOpt = typer.Option(None, "--state-dir", help="Local backend: state directory.",
                           envvar="ELASTIX_STATE_DIR")


def choose_backend(t: Target) -> str:
    """The backend a command uses when ``--backend`` is not given.

    GKE when a cluster is named or a kubeconfig exists; otherwise the local backend.
    """
    if t.backend:
        if t.backend not in BACKENDS:
            raise UsageError(f"unknown backend {t.backend!r}", hint="use --backend gke or local")
        return t.backend
    if t.cluster or t.context:
        return "gke"
    kubeconfig = t.kubeconfig or os.path.expanduser("~/.kube/config")
    if any(os.path.exists(p) for p in kubeconfig.split(os.pathsep) if p):
        return "gke"
    return "local"


def get_backend(t: Target):  # -> elastix.backends.base.Backend
    """Build the backend for a target. Imports the backend module lazily."""
    kind = choose_backend(t)
    if kind == "gke":
        from elastix.backends.gke.backend import GKEBackend

        return GKEBackend.from_target(t)
    from elastix.backends.local.backend import LocalBackend

    return LocalBackend.from_target(t)
