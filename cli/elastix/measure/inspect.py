"""A diagnostics bundle of one workload (``elastix workload inspect``): what someone needs to
say why it is stuck or failed, in one file to attach to a ticket or a CI run.

The workload's status as ``workload status -o json`` gives it; what the backend can say beyond
it (:meth:`Backend.diagnose`: on GKE the JobSet, its Jobs, each pod with its last events, nodes
per pool, Kueue's admission; locally the supervisor's state, log and processes); the head's
last log lines; and elastix's own measurement of the run so far (progress, goodput and each
recovery, from the trainer's events). Any part that cannot be read is a line in
``unreadable``: the bundle of a broken workload is the one that matters most.

Nothing of the workload's environment leaves in it: every ``env`` value is hidden in the
manifest and scrubbed from every string (:mod:`elastix.workload.redact`). Secrets are never
read. Works the same for a workload elastix did not create.
"""

from __future__ import annotations

from typing import Any

from elastix import __version__
from elastix.backends.base import Backend, LogOptions
from elastix.errors import ElastixError
from elastix.protocol import timefmt
from elastix.workload.labels import made_by
from elastix.workload.redact import env_values, hide_env, scrub

HEAD_LINES = 200
"""The head's last log lines a bundle keeps."""


def bundle(backend: Backend, name: str) -> dict[str, Any]:
    """The bundle of workload ``name``. Raises what ``status`` raises for a name that matches
    nothing (or not a Pathways workload); every later part is best effort."""
    status = backend.status(name)
    unreadable: list[str] = []
    try:
        found = backend.diagnose(name)
    except ElastixError as e:
        found = {"manifest": {}}
        unreadable.append(f"{backend.name} objects: {_line(e)}")
    manifest = found.pop("manifest", None) or {}
    unreadable += found.pop("unreadable", [])
    out = {
        "elastix": {"version": __version__, "made": timefmt.iso_ms(),
                    "backend": backend.name, "where": backend.where(),
                    "command": f"elastix workload inspect {name}"},
        "workload": {**status.to_json(), "made_by": made_by(status.labels)
                     if backend.name == "gke" else "elastix"},
        "manifest": hide_env(manifest),
        **found,
        "head_log": _head_log(backend, name, unreadable),
        "measurement": _measurement(backend, name, unreadable),
        "unreadable": unreadable,
    }
    return scrub(out, env_values(manifest))


def _head_log(backend: Backend, name: str, unreadable: list[str]) -> list[str] | None:
    try:
        return [e.text for e in backend.logs(name, LogOptions(tail_lines=HEAD_LINES))
                if not e.notice][-HEAD_LINES:]
    except ElastixError as e:
        unreadable.append(f"head log: {_line(e)}")
        return None


def _measurement(backend: Backend, name: str, unreadable: list[str]) -> dict[str, Any] | None:
    """Progress, goodput and the recoveries so far, as ``status -o json`` and ``workload
    goodput -o json`` give them; None before the trainer has written anything."""
    from elastix.measure.events import events_of
    from elastix.measure.goodput import goodput
    from elastix.measure.progress import read_progress

    try:
        progress = read_progress(backend, name, whole=True)
        events, source = events_of(backend.trainer_events(name))
    except ElastixError as e:
        unreadable.append(f"measurement: {_line(e)}")
        return None
    if not events:
        return None
    rep = goodput(events)
    return {"source": source,
            "progress": progress.to_json() if progress else None,
            "goodput": None if rep.problem else rep.to_json(),
            "goodput_problem": rep.problem}


def _line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
