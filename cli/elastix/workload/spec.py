"""WorkloadSpec: the one validated model of a workload.

Built from a spec file (YAML, ``--spec``) and flags (flags win). Validation happens here and only
here; it collects every problem before raising one :class:`SpecError`, each with its field and a
fix. Everything downstream (rendering, backends) trusts a validated spec.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from elastix.errors import SpecError, UsageError
from elastix.workload.tpu import TpuType, catalogue, unknown_hint

DEFAULT_PROXY_IMAGE = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:latest"
DEFAULT_SERVER_IMAGE = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:latest"
DEFAULT_GCS_SCRATCH = "gs://cloud-pathways-staging/tmp"

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUANTITY = re.compile(r"^(\d+(\.\d+)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e\d+)?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_NAME = 40


@dataclasses.dataclass
class WorkloadSpec:
    """A Pathways elastic workload. Field docs double as the spec-file reference."""

    name: str = ""
    """Workload (JobSet) name: a DNS label of at most 40 characters."""
    cluster: str | None = None
    """GKE cluster name."""
    project: str | None = None
    """Google Cloud project of the cluster."""
    location: str | None = None
    """Cluster region or zone."""
    namespace: str = "default"
    """Kubernetes namespace."""
    tpu_type: str = ""
    """TPU type per slice, e.g. v5litepod-16 or v5litepod-4x4."""
    num_slices: int = 1
    """Number of TPU slices."""
    elastic_slices: int = 0
    """Slices that may be lost and recovered in-process (0 = not elastic)."""
    max_slice_restarts: int | None = None
    """Times each slice may be recreated (worker backoffLimit = this x hosts). Default 10 if elastic."""
    max_restarts: int = 0
    """Whole-JobSet restarts allowed (failurePolicy.maxRestarts): the last resort."""
    docker_image: str | None = None
    """Image of the head's main container (the trainer)."""
    command: str | list[str] | None = None
    """The trainer command: a shell string (run by bash -c) or an argv list."""
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    """Environment of the main container."""
    priority: str | None = None
    """priorityClassName of the worker pods (none by default)."""
    queue: str | None = None
    """Kueue LocalQueue name (label kueue.x-k8s.io/queue-name); none by default."""
    proxy_image: str = DEFAULT_PROXY_IMAGE
    """Pathways IFRT proxy image."""
    server_image: str = DEFAULT_SERVER_IMAGE
    """Pathways server image (resource manager and workers)."""
    gcs_scratch: str = DEFAULT_GCS_SCRATCH
    """Pathways GCS scratch location (gs://bucket/path)."""
    pathways_persistence: bool = False
    """Set ENABLE_PATHWAYS_PERSISTENCE=1: TPU hosts read/write checkpoints directly."""
    head_cpu: str = "24"
    head_memory: str = "100G"
    proxy_cpu: str = "16"
    proxy_memory: str = "100G"
    rm_cpu: str = "8"
    rm_memory: str = "32G"
    head_node_pool: str = "cpu-np"
    """Node pool of the head pod."""
    termination_grace_period: int = 30
    """terminationGracePeriodSeconds of the worker pods."""
    colocated_python_image: str | None = None
    """Image of the colocated-python sidecar on the workers (off by default)."""
    headless: bool = False
    """No main container: connect to the proxy from outside the cluster."""
    proxy_args: list[str] = dataclasses.field(default_factory=list)
    rm_args: list[str] = dataclasses.field(default_factory=list)
    worker_args: list[str] = dataclasses.field(default_factory=list)
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    """Extra labels on the JobSet and its pods."""
    events_path: str | None = None
    """gs:// URI for the trainer's JSONL events; measurement reads it instead of the head log."""

    @property
    def tpu(self) -> TpuType:
        """The resolved TPU type (only valid after :func:`validate`)."""
        return catalogue()[self.tpu_type.strip().lower()]

    @property
    def elastic(self) -> bool:
        return self.elastic_slices > 0

    @property
    def slice_restarts(self) -> int:
        """Effective max slice restarts (0 when not elastic)."""
        if not self.elastic:
            return 0
        return 10 if self.max_slice_restarts is None else self.max_slice_restarts

    @property
    def argv(self) -> list[str]:
        """The main container's command as argv."""
        if self.command is None:
            return []
        if isinstance(self.command, str):
            return ["bash", "-c", self.command]
        return list(self.command)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


FIELDS = {f.name: f for f in dataclasses.fields(WorkloadSpec)}
_INT_FIELDS = {"num_slices", "elastic_slices", "max_slice_restarts", "max_restarts",
               "termination_grace_period"}
_BOOL_FIELDS = {"pathways_persistence", "headless"}
_LIST_FIELDS = {"proxy_args", "rm_args", "worker_args"}
_MAP_FIELDS = {"env", "labels"}
_QUANTITY_FIELDS = ("head_cpu", "head_memory", "proxy_cpu", "proxy_memory", "rm_cpu", "rm_memory")


def read_user_text(path: Path, what: str, flag: str, utf8_hint: str) -> str:
    """A file the user named (spec, env file, template) as text; one-line errors otherwise."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot read {what} {str(path)!r}: {e.strerror}",
                         hint=f"check the path given to {flag}") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"{what} {str(path)!r} is not UTF-8 text (byte {e.start})",
                         hint=utf8_hint) from None


def load_spec_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML spec file into a plain mapping (keys may use - or _)."""
    import yaml

    p = Path(path)
    text = read_user_text(p, "spec file", "--spec", "save it as UTF-8 YAML")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise UsageError(f"spec file {str(p)!r} is not valid YAML{where}",
                         hint="fix the YAML syntax (indentation, quotes, ': ')") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"spec file {str(p)!r} must be a mapping of fields",
                         hint="e.g. 'name: demo' and 'tpu_type: v5litepod-16' on separate lines")
    return data


def load_env_file(path: str | Path) -> dict[str, str]:
    """Read ``KEY=VALUE`` lines (``#`` comments, blank lines and ``export`` allowed)."""
    p = Path(path)
    lines = read_user_text(p, "env file", "--env-file",
                           "save it as UTF-8 KEY=VALUE lines").splitlines()
    out: dict[str, str] = {}
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("export "):
            s = s[len("export "):].lstrip()
        if "=" not in s:
            raise UsageError(f"{p}:{n}: expected KEY=VALUE, got {line!r}",
                             hint="one KEY=VALUE per line; quote nothing")
        k, v = s.split("=", 1)
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        out[k.strip()] = v
    return out


def parse_env_flags(items: list[str]) -> dict[str, str]:
    """``--env K=V`` values to a dict. The value may contain ``=``."""
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--env {item!r} is not KEY=VALUE",
                             hint="write --env NAME=value (use --env NAME= for an empty value)")
        k, v = item.split("=", 1)
        out[k] = v
    return out


def build_spec(file_values: Mapping[str, Any] | None, flag_values: Mapping[str, Any]) -> WorkloadSpec:
    """Merge spec-file values and flags (flags win; ``None`` flags are unset) and validate.

    ``env`` and ``labels`` merge key by key, flags over file.

    Raises:
        SpecError: every problem found, each with its field and a fix.
    """
    problems: list[tuple[str, str, str | None]] = []
    merged: dict[str, Any] = {}
    for raw_key, value in (file_values or {}).items():
        key = str(raw_key).replace("-", "_")
        if key not in FIELDS:
            near = difflib.get_close_matches(key, list(FIELDS), n=1)
            problems.append((str(raw_key), "unknown field in the spec file",
                             f"did you mean {near[0]}?" if near else "see elastix workload create --help"))
            continue
        merged[key] = value
    for key, value in flag_values.items():
        if value is None:
            continue
        if key in _MAP_FIELDS and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    spec = WorkloadSpec()
    for key, value in merged.items():
        err = _coerce(spec, key, value)
        if err:
            problems.append((key, err[0], err[1]))
    problems.extend(validate(spec, skip={p[0] for p in problems}))
    if problems:
        raise SpecError(problems)
    return spec


def _coerce(spec: WorkloadSpec, key: str, value: Any) -> tuple[str, str] | None:
    """Set one field with a type check; return (message, hint) on a type problem."""
    if key in _INT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be a whole number, got {value!r}", "e.g. 3"
    elif key in _BOOL_FIELDS:
        if not isinstance(value, bool):
            return f"must be true or false, got {value!r}", None
    elif key in _LIST_FIELDS:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return "must be a list of strings", "e.g. ['--flag=value']"
    elif key in _MAP_FIELDS:
        if not isinstance(value, dict):
            return "must be a mapping of names to values", None
        for k, v in value.items():
            if isinstance(v, (dict, list)):
                # str() would put a Python repr ("[1]") into the manifest
                return (f"value of {str(k)!r} must be a string, got {v!r}",
                        "quote it in the spec file")
        value = {str(k): _scalar_str(v) for k, v in value.items()}
    elif key == "command":
        if not (isinstance(value, str) or (isinstance(value, list) and value
                                           and all(isinstance(v, str) for v in value))):
            return "must be a string or a non-empty list of strings", None
    elif key in _QUANTITY_FIELDS:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            return f"must be a resource quantity, got {value!r}", "e.g. 8 or 32G"
        value = str(value)
    elif value is not None and not isinstance(value, str):
        return f"must be a string, got {value!r}", None
    setattr(spec, key, value)
    return None


def _scalar_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


def _valid_name(name: str) -> str:
    """The nearest valid workload name to suggest ('' when nothing is left)."""
    # the hint must itself pass: lowercase, starts with a letter, at most MAX_NAME
    fixed = re.sub(r"[^a-z0-9-]+", "-", name.lower()).lstrip("0123456789-")
    return fixed[:MAX_NAME].rstrip("-")


def validate(spec: WorkloadSpec, skip: set[str] = frozenset()) -> list[tuple[str, str, str | None]]:
    """Every problem of a spec as (field, message, hint); empty when valid."""
    p: list[tuple[str, str, str | None]] = []

    def add(field: str, msg: str, hint: str | None = None) -> None:
        if field not in skip:
            p.append((field, msg, hint))

    name = spec.name
    if not name:
        add("name", "a workload name is required", "pass NAME, e.g. elastix workload create demo")
    elif len(name) > MAX_NAME:
        fixed = _valid_name(name)
        add("name", f"{name!r} is {len(name)} characters; at most {MAX_NAME} are allowed",
            f"shorten it, e.g. {fixed!r}" if fixed else "shorten it")
    elif not _DNS_LABEL.match(name):
        fixed = _valid_name(name)
        add("name", f"{name!r} is not a DNS label (lowercase letters, digits and '-', "
                    "starting with a letter)", f"try {fixed!r}" if fixed else None)
    if not _DNS_LABEL.match(spec.namespace or "") or len(spec.namespace) > 63:
        add("namespace", f"{spec.namespace!r} is not a valid namespace name", "e.g. default")
    if not spec.tpu_type:
        add("tpu_type", "a TPU type is required", "e.g. --tpu-type v5litepod-16")
    elif spec.tpu_type.strip().lower() not in catalogue():
        add("tpu_type", f"unknown TPU type {spec.tpu_type!r}", unknown_hint(spec.tpu_type))
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
        elif spec.max_slice_restarts > 0 and spec.elastic_slices == 0:
            add("max_slice_restarts", "slice restarts need an elastic workload",
                "add --elastic-slices N, or drop --max-slice-restarts")
    if spec.max_restarts < 0:
        add("max_restarts", f"must be 0 or more, got {spec.max_restarts}", "e.g. --max-restarts 3")
    if spec.termination_grace_period < 0:
        add("termination_grace_period", f"must be 0 or more, got {spec.termination_grace_period}")
    _validate_main(spec, add)
    for k in spec.env:
        if not _ENV_NAME.match(k):
            add("env", f"{k!r} is not a valid environment variable name",
                "use letters, digits and '_', not starting with a digit")
    for k, v in spec.labels.items():
        if not _label_key_ok(k):
            add("labels", f"{k!r} is not a valid label key", "e.g. team or example.com/team")
        elif len(v) > 63 or not _LABEL_VALUE.match(v):
            add("labels", f"label {k}={v!r}: value must be 63 characters or fewer of "
                          "[A-Za-z0-9-_.], starting and ending alphanumeric")
    for f in _QUANTITY_FIELDS:
        if not _QUANTITY.match(getattr(spec, f)):
            add(f, f"{getattr(spec, f)!r} is not a resource quantity", "e.g. 8, 500m, 32G or 64Gi")
    if not spec.gcs_scratch.startswith("gs://") or len(spec.gcs_scratch) <= len("gs://"):
        add("gcs_scratch", f"{spec.gcs_scratch!r} is not a gs:// location",
            "e.g. gs://my-bucket/pathways-tmp")
    if spec.events_path is not None and (not spec.events_path.startswith("gs://")
                                         or spec.events_path.rstrip("/") == "gs:"
                                         or spec.events_path.endswith("/")):
        add("events_path", f"{spec.events_path!r} is not a gs:// object URI",
            "e.g. gs://my-bucket/runs/demo/events.jsonl (the launcher reads it from GCS)")
    for f in ("priority", "queue", "head_node_pool"):
        v = getattr(spec, f)
        if v is not None and (not _DNS_SUBDOMAIN.match(v) or len(v) > 253):
            add(f, f"{v!r} is not a valid Kubernetes name", "lowercase letters, digits, '-' and '.'")
    return p


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


def _label_key_ok(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME.match(name))
