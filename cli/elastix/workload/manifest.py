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
