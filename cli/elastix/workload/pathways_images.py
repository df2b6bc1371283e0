"""The Pathways images (proxy, server) and their pull policy: the one place they are named.

Tag scheme: Google publishes the Pathways images per JAX version, ``…/pathways/server:jax-
<version>`` and ``…/proxy_server:jax-<version>`` (AI-Hypercomputer/pathways-utils
``pathwaysutils/experimental/shared_pathways_service/deploy_pathways_service.py`` @ 0097f1b,
``--jax_version``, default ``0.9.0``), besides ``latest`` (xpk 1.16.0's and google/pathways-job
v0.1.4's default, and elastix's).

Why the default stays ``latest``: the trainer image pins ``jax>=0.10,<0.11``, and the only pinned
tag a citable source names is ``jax-0.9.0`` (pathways-utils' default), a server built for an
older JAX than the client; no source reachable here names a ``jax-0.10.*`` tag, and none states
which client versions a server accepts. Pinning the wrong one would be a sure skew, where
``latest`` is a possible one. ``--pathways-tag`` pins both images at once (e.g. the
``jax-<version>`` tag of the trainer's JAX, checked against the registry by the user).

Pull policy: a moving tag (``latest``, or none) is pulled ``Always``, as xpk and pathways-job do,
so every pod of a start runs what the registry serves then (``IfNotPresent`` would run whatever
each node cached, a skew between nodes that no one chose). A pinned tag or a digest names one
image for good: ``IfNotPresent``, so a replacement worker starts from the node's cache and
runs the same server as the head. Only pinning closes the skew a replacement pulled after
``latest`` moved can cause.
"""

from __future__ import annotations

import re

REPOSITORY = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways"
PROXY, SERVER = "proxy_server", "server"
DEFAULT_TAG = "latest"
MOVING_TAGS = frozenset({"latest"})
TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")  # Docker's tag grammar


def image(component: str, tag: str = DEFAULT_TAG) -> str:
    """The reference of a Pathways image (``PROXY`` or ``SERVER``) at ``tag``."""
    return f"{REPOSITORY}/{component}:{tag}"


def pull_policy(ref: str) -> str:
    """``Always`` for a moving tag (or none), ``IfNotPresent`` for a pinned tag or a digest."""
    if "@" in ref:
        return "IfNotPresent"
    last = ref.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else ""
    return "Always" if not tag or tag in MOVING_TAGS else "IfNotPresent"
