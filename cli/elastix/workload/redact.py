"""What a diagnostics bundle must never carry: the values of a workload's own environment.

``--env NAME=VALUE`` (and any ``env`` a user's YAML sets) is where tokens and keys go, and a
bundle (``elastix workload inspect``) is made to be attached to a ticket or a CI run. So the
value of every variable that is not the platform's (:data:`PLATFORM`) is replaced by
:data:`HIDDEN` in the manifest, the name kept, and scrubbed from every string of the bundle too
(a head that echoes its environment, an error message quoting it). The platform's variables,
the ones elastix, xpk and Cluster Toolkit render for Pathways themselves (``JAX_PLATFORMS=
proxy``, ``MEGASCALE_NUM_SLICES``...), are no one's secret and say how the workload is wired:
they stay. References (``valueFrom``: a Secret's or a ConfigMap's name and key) stay: they say
where a value comes from, not what it is. Secrets themselves are never read.
"""

from __future__ import annotations

import copy
from typing import Any

HIDDEN = "<hidden by elastix>"

PLATFORM = frozenset({
    # elastix's own rendering (elastix.workload.render: main_env, worker_env, the RM's env)
    "PATHWAYS_HEAD", "JAX_PLATFORMS", "XCLOUD_ENVIRONMENT", "JAX_BACKEND_TARGET",
    "REPLICATED_JOB_NAME", "JOBSET_NAME", "HOST_ADDRESS", "TPU_SKIP_MDS_QUERY",
    "TPU_MIN_LOG_LEVEL", "TF_CPP_MIN_LOG_LEVEL", "MEGASCALE_GRPC_ENABLE_XOR_TRACER",
    "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID", "MEGASCALE_COORDINATOR_ADDRESS",
    # xpk 1.16's Pathways JobSet (shared/reference/xpk-1.16.0-pathways-elastic.yaml) sets the
    # same names; Cluster Toolkit's pathways_jobset.tmpl (tests/fixtures/gcluster) adds:
    "ABSL_FLAGS",
})
"""Environment variables the Pathways JobSet renderers set themselves; with every
``ELASTIX_*`` (elastix.protocol.envvars), their values are shown."""

MIN_SCRUBBED = 3
"""Values shorter than this are hidden in the manifest but not scrubbed from text: ``1`` or
``on`` would blot out every number and word that happens to contain it, and a secret that
short is no secret."""


def _containers(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Every container and init container of every replicated job's pod template."""
    out: list[dict[str, Any]] = []
    for rj in ((manifest.get("spec") or {}).get("replicatedJobs") or []):
        pod = (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get(
            "spec") or {}
        for key in ("initContainers", "containers"):
            out += [c for c in pod.get(key) or [] if isinstance(c, dict)]
    return out


def _own(entry: Any) -> bool:
    """An ``env`` entry with a literal value that is the workload's own, not the platform's."""
    if not isinstance(entry, dict) or entry.get("value") in (None, ""):
        return False
    name = str(entry.get("name", ""))
    return name not in PLATFORM and not name.startswith("ELASTIX_")


def env_values(manifest: dict[str, Any]) -> list[str]:
    """The literal values of the workload's own environment variables, longest first."""
    values = {str(e["value"]) for c in _containers(manifest) for e in c.get("env") or []
              if _own(e)}
    return sorted(values, key=len, reverse=True)


def hide_env(manifest: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``manifest`` with the value of each of the workload's own environment
    variables replaced by :data:`HIDDEN`."""
    out = copy.deepcopy(manifest)
    for c in _containers(out):
        for e in c.get("env") or []:
            if _own(e):
                e["value"] = HIDDEN
    return out


def scrub(data: Any, values: list[str]) -> Any:
    """``data`` (JSON-like) with each of ``values`` (at least :data:`MIN_SCRUBBED` long)
    replaced by :data:`HIDDEN` in every string, keys included."""
    values = [v for v in values if len(v) >= MIN_SCRUBBED]
    if not values:
        return data

    def one(x: Any) -> Any:
        if isinstance(x, str):
            for v in values:
                x = x.replace(v, HIDDEN)
            return x
        if isinstance(x, dict):
            return {one(k): one(v) for k, v in x.items()}
        if isinstance(x, list):
            return [one(v) for v in x]
        return x

    return one(data)
