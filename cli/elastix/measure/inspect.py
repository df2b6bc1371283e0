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
from elastix.workload.redact import env_names, env_values, hide_env, scrub

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
        unreadable.append(f"{backend.name} objects: {e.message}")
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
    return scrub(out, env_values(manifest), env_names(manifest))


def _head_log(backend: Backend, name: str, unreadable: list[str]) -> list[str] | None:
    try:
        return [e.text for e in backend.logs(name, LogOptions(tail_lines=HEAD_LINES))
                if not e.notice][-HEAD_LINES:]
    except ElastixError as e:
        unreadable.append(f"head log: {e.message}")
        return None


def _measurement(backend: Backend, name: str, unreadable: list[str]) -> dict[str, Any] | None:
    """Progress, goodput and the recoveries so far, from one read of the trainer's events (its
    events file, else the head's log); None before the trainer has written anything.
    ``from_start`` False: the log no longer reaches the run's start (GKE keeps its tail), so
    the goodput is of what it holds."""
    from elastix.measure.events import events_of
    from elastix.measure.goodput import goodput
    from elastix.measure.progress import last_loss, progress

    try:
        got = backend.trainer_events(name)
        events, source = events_of(got)
    except (ElastixError, OSError, ValueError) as e:  # what read_progress says unreadable
        unreadable.append(f"measurement: {str(e) or type(e).__name__}")
        return None
    if got is None or not events:
        return None
    rep = goodput(events)
    return {"source": source, "from_start": got.from_start,
            "progress": progress(events, last_loss(got)).to_json(),
            "goodput": None if rep.problem else rep.to_json(),
            "goodput_problem": rep.problem}
