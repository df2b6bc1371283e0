"""Reading a rendered JobSet: its replicated jobs and their pod specs, tolerant of a user's
template that leaves parts out (a missing part reads as absent, never as a KeyError)."""

from __future__ import annotations

from typing import Any


def replicated_job(manifest: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The replicated job called ``name`` (``labels.HEAD_JOB``, ``labels.WORKER_JOB``), or None."""
    return next((rj for rj in (manifest.get("spec") or {}).get("replicatedJobs") or []
                 if rj.get("name") == name), None)


def pod_spec(rjob: dict[str, Any] | None) -> dict[str, Any]:
    """The pod spec of a replicated job's template (``{}`` where any level is missing)."""
    return ((((rjob or {}).get("template") or {}).get("spec") or {}).get("template") or {}) \
        .get("spec") or {}


_USER_TEXT = ("command", "args")
"""Keys whose strings are the user's command line: a copy keeps them as written."""


def renamed(manifest: dict[str, Any], new: str) -> dict[str, Any]:
    """A copy of the rendered JobSet under the workload name ``new``: every value that is the
    old name (the JobSet's name, its ``elastix.dev/workload`` labels, ``ELASTIX_WORKLOAD``) and
    every name built as ``<old>-...`` under ``serviceAccountName``; commands are left as written.

    What runs is the same manifest; only what names the workload changes (``chaos run
    --verify``'s reference is such a copy).
    """
    old = str((manifest.get("metadata") or {}).get("name") or "")

    def walk(v: Any, key: str = "") -> Any:
        if isinstance(v, dict):
            return {k: walk(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return list(v) if key in _USER_TEXT else [walk(x) for x in v]
        if isinstance(v, str) and old:
            if v == old:
                return new
            if key == "serviceAccountName" and v.startswith(old + "-"):
                return new + v[len(old):]
        return v

    return walk(manifest)
