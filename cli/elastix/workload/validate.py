"""The rules a WorkloadSpec must satisfy: every problem as (field, message, hint).

Called by :func:`elastix.workload.spec.build_spec`, which raises them all at once.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

from elastix.errors import shown
from elastix.protocol import envvars
from elastix.workload import labels, tpu

if TYPE_CHECKING:  # spec imports this module to validate; the rules only read its fields
    from elastix.workload.spec import WorkloadSpec

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_QUANTITY = re.compile(r"^(\d+(\.\d+)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e\d+)?\Z")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
SLICE_RESTARTS = ("backoff", "job")
"""``--slice-restart`` values (:attr:`elastix.workload.spec.WorkloadSpec.slice_restart`)."""
DNS_LABEL_MAX = 63
"""The longest a DNS label may be. How long a workload name may be depends on what Kubernetes and
JobSet derive from it in the rendered manifest: :mod:`elastix.workload.names` checks that."""


def _valid_name(name: str) -> str:
    """The nearest valid workload name to suggest ('' when nothing is left)."""
    # lowercase, starting with a letter; its length is checked on the rendered manifest
    fixed = re.sub(r"[^a-z0-9-]+", "-", name.lower()).lstrip("0123456789-")
    return fixed[:DNS_LABEL_MAX].rstrip("-")


def validate(spec: WorkloadSpec, skip: set[str] = frozenset()) -> list[tuple[str, str, str | None]]:
    """Every problem of a spec as (field, message, hint); empty when valid."""
    p: list[tuple[str, str, str | None]] = []

    def add(field: str, msg: str, hint: str | None = None) -> None:
        if field not in skip:
            p.append((field, msg, hint))

    name = spec.name
    if not name:
        add("name", "a workload name is required", "pass NAME, e.g. elastix workload create demo")
    elif not _DNS_LABEL.match(name):
        fixed = _valid_name(name)
        add("name", f"{shown(name)} is not a DNS label (lowercase letters, digits and '-', "
                    "starting with a letter)", f"try {fixed!r}" if fixed else None)
    if not _DNS_LABEL.match(spec.namespace or "") or len(spec.namespace) > 63:
        add("namespace", f"{shown(spec.namespace)} is not a valid namespace name", "e.g. default")
    if not spec.tpu_type:
        add("tpu_type", "a TPU type is required", "e.g. --tpu-type v5litepod-16")
    elif (bad := tpu.problem(spec.tpu_type)) is not None:
        add("tpu_type", *bad)
    if spec.num_slices < 1:
        add("num_slices", f"must be at least 1, got {spec.num_slices}", "e.g. --num-slices 2")
    if spec.elastic_slices < 0 or spec.elastic_slices > max(spec.num_slices, 0):
        add("elastic_slices", f"must be between 0 and --num-slices ({spec.num_slices}), "
                              f"got {spec.elastic_slices}",
            f"use --elastic-slices {max(spec.num_slices, 1)} to let every slice recover")
    if spec.max_slice_restarts is not None:
        if spec.max_slice_restarts < 0:
            add("max_slice_restarts", f"must be 0 or more, got {spec.max_slice_restarts}",
                "e.g. --max-slice-restarts 10")
    if spec.max_restarts < 0:
        add("max_restarts", f"must be 0 or more, got {spec.max_restarts}", "e.g. --max-restarts 3")
    if spec.slice_restart not in SLICE_RESTARTS:
        add("slice_restart", f"must be one of {', '.join(SLICE_RESTARTS)}, got "
                             f"{shown(spec.slice_restart)}", "e.g. --slice-restart job")
    elif spec.slice_restart == "job" and spec.slice_restarts == 0:
        add("slice_restart", "--slice-restart job restarts slices of an elastic workload with a "
                             "slice restart budget", "add --elastic-slices N (and "
                             "--max-slice-restarts N > 0), or drop --slice-restart")
    if spec.ttl_after_finished is not None and spec.ttl_after_finished < 0:
        add("ttl_after_finished", f"must be 0 or more seconds, got {spec.ttl_after_finished}",
            "e.g. --ttl-after-finished 43200 (12 h, xpk's default)")
    if spec.termination_grace_period < 0:
        add("termination_grace_period", f"must be 0 or more, got {spec.termination_grace_period}")
    _validate_main(spec, add)
    persistence = spec.env.get(envvars.PATHWAYS_PERSISTENCE)
    if persistence is not None and persistence not in ("1", "0"):
        # pathwaysutils 0.1.13 _initialize.py L57-66 accepts "1", "0" or unset and raises
        # ValueError at initialize() otherwise: the head would fail at start on Pathways.
        add("env", f"{envvars.PATHWAYS_PERSISTENCE}={shown(persistence)}: pathwaysutils accepts "
                   "only 1, 0 or unset (it raises at initialize() otherwise)",
            f"--env {envvars.PATHWAYS_PERSISTENCE}=1, or --pathways-persistence")
    for k in spec.env:
        if not _ENV_NAME.match(k):
            add("env", f"{shown(k)} is not a valid environment variable name",
                "use letters, digits and '_', not starting with a digit")
    for k, v in spec.labels.items():
        if not label_key_ok(k):
            add("labels", f"{shown(k)} is not a valid label key", "e.g. team or example.com/team")
        elif k in labels.RESERVED_KEYS or k.startswith(labels.RESERVED_PREFIXES):
            add("labels", f"{shown(k)} is set by elastix or JobSet, not by --label",
                "--queue sets the Kueue queue; pick a key of your own, e.g. example.com/team"
                if k == labels.QUEUE_NAME else "pick a key of your own, e.g. example.com/team")
        elif len(v) > 63 or not LABEL_VALUE.match(v):
            add("labels", f"label {k}={shown(v)}: value must be 63 characters or fewer of "
                          "[A-Za-z0-9-_.], starting and ending alphanumeric")
    for f in (f.name for f in dataclasses.fields(spec) if f.metadata.get("quantity")):
        if not _QUANTITY.match(getattr(spec, f)):
            add(f, f"{shown(getattr(spec, f))} is not a resource quantity",
                "e.g. 8, 500m, 32G or 64Gi")
    if not spec.gcs_scratch.startswith("gs://") or len(spec.gcs_scratch) <= len("gs://"):
        add("gcs_scratch", f"{shown(spec.gcs_scratch)} is not a gs:// location",
            "e.g. gs://my-bucket/pathways-tmp")
    if spec.events_path is not None and (not spec.events_path.startswith("gs://")
                                         or spec.events_path.rstrip("/") == "gs:"
                                         or spec.events_path.endswith("/")):
        add("events_path", f"{spec.events_path!r} is not a gs:// object URI",
            "e.g. gs://my-bucket/runs/demo/events.jsonl (the launcher reads it from GCS)")
    for f in ("priority", "queue", "head_node_pool"):
        v = getattr(spec, f)
        if v is not None and (not _DNS_SUBDOMAIN.match(v) or len(v) > 253):
            add(f, f"{shown(v)} is not a valid Kubernetes name",
                "lowercase letters, digits, '-' and '.'")
    return p


def notes(spec: WorkloadSpec) -> list[tuple[str, str, str | None]]:
    """What the platform would run but may surprise: (field, message, hint), printed as notes.

    Only what no part of the platform refuses belongs here; what it refuses is a
    :func:`validate` problem."""
    out: list[tuple[str, str, str | None]] = []
    if spec.max_slice_restarts and spec.max_slice_restarts > 0 and spec.elastic_slices == 0:
        # xpk and gcluster accept it and render the non-elastic backoffLimit (hosts x 4):
        # xpk src/xpk/commands/workload.py L277-281 @ 367c838, gcluster
        # pkg/orchestrator/gke/gke_job_orchestrator.go L1199-1204 @ c765092 (GoogleCloudPlatform/
        # cluster-toolkit on GitHub).
        out.append(("max_slice_restarts", f"--max-slice-restarts {spec.max_slice_restarts} has "
                    "no effect without --elastic-slices: a slice loss restarts the JobSet",
                    "add --elastic-slices N, or drop --max-slice-restarts"))
    return out


def _validate_main(spec: WorkloadSpec, add: Any) -> None:
    """Rules for the main container and headless mode."""
    if spec.headless:
        if spec.command is not None:
            add("command", "--headless runs no main container, so it takes no command",
                "drop --command, or drop --headless")
        if spec.docker_image is not None:
            add("docker_image", "--headless runs no main container, so it takes no image",
                "drop --docker-image, or drop --headless")
        return
    if spec.command is None or (isinstance(spec.command, str) and not spec.command.strip()):
        add("command", "a command is required (or --headless)",
            "e.g. --command 'elastix-train --preset tiny'")
    if not spec.docker_image:
        add("docker_image", "a docker image is required (or --headless)",
            "e.g. --docker-image us-docker.pkg.dev/PROJECT/REPO/trainer:TAG")


def label_key_ok(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME.match(name))
