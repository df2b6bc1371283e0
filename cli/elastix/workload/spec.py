"""WorkloadSpec: the one validated model of a workload.

Built from spec-file values and flags (flags win; which source gives each field, env file and
backend defaults included, is decided in :mod:`elastix.workload.resolve`). Validation happens
here and only here (the rules are in :mod:`elastix.workload.validate`); it collects every
problem before raising one :class:`SpecError`, each with its field and a fix. Everything
downstream (rendering, backends) trusts a validated spec.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from elastix.errors import (  # noqa: F401 - the readers of user files, where they were
    MAX_USER_FILE,
    SpecError,
    UsageError,
    read_user_bytes,
    read_user_text,
    shown,
)
from elastix.workload import pathways_images, platform

if TYPE_CHECKING:
    from elastix.workload.tpu import TpuType

DEFAULT_PROXY_IMAGE = pathways_images.image(pathways_images.PROXY)
DEFAULT_SERVER_IMAGE = pathways_images.image(pathways_images.SERVER)
DEFAULT_GCS_SCRATCH = "gs://cloud-pathways-staging/tmp"


def _flag(*decls: str, help: str | None = None, kv: str | None = None,
          quantity: bool = False) -> dict[str, Any]:
    """Field metadata: the field's ``workload create`` option.

    Args:
        decls: the option's spellings (``--a/--no-a`` for an on/off pair).
        help: its help text.
        kv: a mapping field given as repeated KEY=VALUE: the example the error hint shows.
        quantity: a Kubernetes resource quantity (validated as one).
    """
    return {"flags": decls, "help": help, "kv": kv, "quantity": quantity}


def _opt(default: Any = None, *decls: str, factory: Any = None, **meta: Any) -> Any:
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=_flag(*decls, **meta))
    return dataclasses.field(default=default, metadata=_flag(*decls, **meta))


# The head pod's containers whose CPU and memory limits are options: field prefix ->
# (its key in platform.HEAD_SIZES, the container).
_SIZED = {
    "head": ("main", "the head's trainer container (the JAX client)"),
    "proxy": ("proxy", "the Pathways IFRT proxy sidecar"),
    "rm": ("rm", "the Pathways resource manager sidecar"),
}
_UNITS = {"cpu": ("CPU", "in cores, e.g. 8 or 500m"), "memory": ("Memory", "e.g. 64G or 48Gi")}


def _size(prefix: str, resource: str) -> Any:
    """A head-pod size field (``head_cpu`` ... ``rm_memory``), from :data:`_SIZED`.

    Its default is the platform catalogue's: ``cluster create`` checks the head machine against
    the head pod these defaults render, so the two cannot drift apart.
    """
    key, container = _SIZED[prefix]
    default = platform.HEAD_SIZES[key][("cpu", "memory").index(resource)]
    limit, unit = _UNITS[resource]
    return _opt(default, f"--{prefix}-{resource}", quantity=True,
                help=f"{limit} limit of {container}, {unit} [{default}].")


@dataclasses.dataclass
class WorkloadSpec:
    """A Pathways elastic workload. Field docs double as the spec-file reference.

    A field with ``_opt`` metadata is also a ``workload create`` option; the others come from
    the NAME argument (``name``) and the target options (cluster, project, location, namespace).
    """

    name: str = ""
    """Workload (JobSet) name: a DNS label short enough for every name JobSet and Kubernetes
    derive from it (checked on the rendered manifest: at most 22 characters with the built-in
    template, where the coordinator label is 2n+19 characters)."""
    cluster: str | None = None
    """GKE cluster name."""
    project: str | None = None
    """Google Cloud project of the cluster."""
    location: str | None = None
    """Cluster region or zone."""
    namespace: str = "default"
    """Kubernetes namespace."""
    tpu_type: str = _opt("", "--tpu-type", "--device-type",
                         help="TPU type per slice, e.g. v5litepod-16 or v5litepod-4x4.")
    """TPU type per slice, e.g. v5litepod-16 or v5litepod-4x4."""
    num_slices: int = _opt(1, "--num-slices", help="Number of TPU slices [1].")
    """Number of TPU slices."""
    elastic_slices: int = _opt(0, "--elastic-slices",
                               help="Slices that may fail and recover in-process [0].")
    """Slices that may be lost and recovered in-process (0 = not elastic)."""
    max_slice_restarts: int | None = _opt(
        None, "--max-slice-restarts",
        help="Restarts of one slice allowed (one host's death restarts its whole slice) "
             "[10 if elastic].")
    """Restarts of one slice allowed: on TPU one host's death fails every pod of its slice, so
    worker backoffLimit = this x hosts when elastic and > 0, else 4 x hosts (pathways-job).
    Default 10 if elastic."""
    max_restarts: int = _opt(0, "--max-restarts",
                             help="Whole-JobSet restarts allowed (last resort) [0].")
    """Whole-JobSet restarts allowed (failurePolicy.maxRestarts): the last resort."""
    slice_restart: str = _opt(
        "backoff", "--slice-restart",
        help="How a failed slice is replaced: backoff (its Job's backoffLimit, any JobSet) or "
             "job (JobSet's per-Job RestartJob rule; needs the controller's RestartJob "
             "feature gate) [backoff].")
    """How a failed slice is replaced. ``backoff``: the worker Job's ``backoffLimit`` absorbs
    ``--max-slice-restarts`` x hosts pod failures (xpk's and pathways-job's way, any JobSet).
    ``job``: the worker Job has ``backoffLimit: 0`` and a ``RestartJob`` failure-policy rule
    recreates only the failed slice's Job (JobSet v0.12, KEP-262 Story 6; alpha gate
    ``RestartJob``, off by default), its restarts counted per slice in ``jobRestarts``."""
    ttl_after_finished: int | None = _opt(
        None, "--ttl-after-finished",
        help="Seconds after the workload finishes (completed or failed) before JobSet deletes "
             "it (ttlSecondsAfterFinished) [kept].")
    """``ttlSecondsAfterFinished``: seconds after the JobSet finishes before JobSet deletes it
    (none: it is kept until ``workload delete``)."""
    docker_image: str | None = _opt(None, "--docker-image", help="Trainer image (head pod).")
    """Image of the head's main container (the trainer)."""
    command: str | list[str] | None = _opt(None, "--command",
                                           help="Trainer command, run by bash -c. Locally, a "
                                           "leading python of 'python -m maxtext...' runs "
                                           "ELASTIX_MAXTEXT_PYTHON (default .venv-maxtext, "
                                           "bash .ci/setup-maxtext).")
    """The trainer command: a shell string (run by bash -c) or an argv list."""
    env: dict[str, str] = _opt(None, "--env", factory=dict,
                               help="KEY=VALUE for the trainer; repeatable.",
                               kv="NAME=value (use --env NAME= for an empty value)")
    """Environment of the main container."""
    priority: str | None = _opt(None, "--priority", help="priorityClassName of the workers.")
    """priorityClassName of the worker pods (none by default)."""
    queue: str | None = _opt(None, "--queue", help="Kueue LocalQueue name.")
    """Kueue LocalQueue name (label kueue.x-k8s.io/queue-name); none by default."""
    pathways_tag: str | None = _opt(None, "--pathways-tag",
                                    help="Tag of both Pathways images (proxy and server), e.g. "
                                    "jax-<version>; pinned tags are pulled IfNotPresent "
                                    "[latest].")
    """Tag of the Pathways proxy and server images (``workload/pathways_images.py``); an explicit
    ``proxy_image``/``server_image`` wins."""
    proxy_image: str = _opt(DEFAULT_PROXY_IMAGE, "--proxy-server-image",
                            help="Pathways proxy image.")
    """Pathways IFRT proxy image."""
    server_image: str = _opt(DEFAULT_SERVER_IMAGE, "--server-image",
                             help="Pathways server image.")
    """Pathways server image (resource manager and workers)."""
    gcs_scratch: str = _opt(DEFAULT_GCS_SCRATCH, "--pathways-gcs-location",
                            help="Pathways scratch location, gs://...")
    """Pathways GCS scratch location (gs://bucket/path)."""
    pathways_persistence: bool = _opt(
        False, "--pathways-persistence/--no-pathways-persistence",
        help="ENABLE_PATHWAYS_PERSISTENCE=1 (hosts write checkpoints).")
    """Set ENABLE_PATHWAYS_PERSISTENCE=1: TPU hosts read/write checkpoints directly."""
    # Sizes and pool come from the platform catalogue, which cluster create reads too.
    head_cpu: str = _size("head", "cpu")
    head_memory: str = _size("head", "memory")
    proxy_cpu: str = _size("proxy", "cpu")
    proxy_memory: str = _size("proxy", "memory")
    rm_cpu: str = _size("rm", "cpu")
    rm_memory: str = _size("rm", "memory")
    head_node_pool: str = _opt(platform.HEAD_POOL, "--head-node-pool",
                               help=f"Node pool of the head pod [{platform.HEAD_POOL}].")
    """Node pool of the head pod."""
    termination_grace_period: int = _opt(30, "--termination-grace-period",
                                         help="Seconds a worker pod gets to stop before it is "
                                              "killed [30].")
    """terminationGracePeriodSeconds of the worker pods."""
    colocated_python_image: str | None = _opt(
        None, "--colocated-python-sidecar-image",
        help="Image of a colocated-python sidecar on every worker (off by default).")
    """Image of the colocated-python sidecar on the workers (off by default)."""
    headless: bool = _opt(False, "--headless",
                          help="No main container: connect to the proxy from outside the "
                               "cluster.")
    """No main container: connect to the proxy from outside the cluster."""
    proxy_args: list[str] = _opt(None, "--custom-proxy-arg", factory=list,
                                 help="One more argument of the Pathways proxy, e.g. "
                                      "--custom-proxy-arg=--flag=value; repeatable.")
    """Arguments appended to the Pathways proxy's."""
    rm_args: list[str] = _opt(None, "--custom-rm-arg", factory=list,
                              help="One more argument of the Pathways resource manager; "
                                   "repeatable.")
    """Arguments appended to the Pathways resource manager's."""
    worker_args: list[str] = _opt(None, "--custom-worker-arg", factory=list,
                                  help="One more argument of every Pathways worker; "
                                       "repeatable.")
    """Arguments appended to every Pathways worker's."""
    labels: dict[str, str] = _opt(None, "--label", factory=dict,
                                  help="KEY=VALUE label; repeatable. Keys that elastix, JobSet "
                                       "or Kueue set (elastix.dev/..., jobset.sigs.k8s.io/...) are "
                                       "refused.", kv="key=value")
    """Extra labels on the JobSet and its pods."""
    events_path: str | None = _opt(
        None, "--events-path",
        help="gs:// URI for the trainer's events (read by chaos --measure and goodput).")
    """gs:// URI for the trainer's JSONL events; measurement reads it instead of the head log."""

    @property
    def tpu(self) -> TpuType:
        """The resolved TPU type (only valid after :func:`validate`)."""
        from elastix.workload.tpu import catalogue

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


FIELDS = {f.name: f for f in dataclasses.fields(WorkloadSpec)}


def _kind(tp: Any) -> str:
    """``int``, ``bool``, ``list``, ``map`` or ``str``: how a field's values are checked."""
    union = typing.get_origin(tp) in (typing.Union, types.UnionType)
    args = set(typing.get_args(tp)) - {type(None)} if union else {tp}
    if args == {bool}:
        return "bool"
    if args == {int}:
        return "int"
    origin = typing.get_origin(next(iter(args))) if len(args) == 1 else None
    return {list: "list", dict: "map"}.get(origin, "str")


# The field types say how values are checked, so a new field is one edit.
KINDS = {name: _kind(tp) for name, tp in typing.get_type_hints(WorkloadSpec).items()}
_INT_FIELDS = {k for k, v in KINDS.items() if v == "int"}
_BOOL_FIELDS = {k for k, v in KINDS.items() if v == "bool"}
_LIST_FIELDS = {k for k, v in KINDS.items() if v == "list"}
_MAP_FIELDS = {k for k, v in KINDS.items() if v == "map"}
QUANTITY_FIELDS = tuple(k for k, f in FIELDS.items() if f.metadata.get("quantity"))




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
    _apply_pathways_tag(spec, merged, problems)
    from elastix.workload.validate import validate  # the rules need the finished model

    problems.extend(validate(spec, skip={p[0] for p in problems}))
    if problems:
        raise SpecError(problems)
    return spec


def _apply_pathways_tag(spec: WorkloadSpec, merged: Mapping[str, Any],
                        problems: list[tuple[str, str, str | None]]) -> None:
    """Point the proxy and server images not given explicitly at ``pathways_tag``."""
    tag = spec.pathways_tag
    if tag is None:
        return
    if not isinstance(tag, str) or not pathways_images.TAG_RE.match(tag):
        problems.append(("pathways_tag", f"{shown(tag)} is not an image tag",
                         "e.g. jax-0.10.0 (letters, digits, '_', '.', '-')"))
        return
    if "proxy_image" not in merged:
        spec.proxy_image = pathways_images.image(pathways_images.PROXY, tag)
    if "server_image" not in merged:
        spec.server_image = pathways_images.image(pathways_images.SERVER, tag)


def _coerce(spec: WorkloadSpec, key: str, value: Any) -> tuple[str, str] | None:
    """Set one field with a type check; return (message, hint) on a type problem."""
    if key in _INT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be a whole number, got {shown(value)}", "e.g. 3"
    elif key in _BOOL_FIELDS:
        if not isinstance(value, bool):
            return f"must be true or false, got {shown(value)}", None
    elif key in _LIST_FIELDS:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return "must be a list of strings", "e.g. ['--flag=value']"
    elif key in _MAP_FIELDS:
        if not isinstance(value, dict):
            return "must be a mapping of names to values", None
        for k, v in value.items():
            if isinstance(v, (dict, list)):
                # str() would put a Python repr ("[1]") into the manifest
                return (f"value of {shown(str(k))} must be a string, got {shown(v)}",
                        "quote it in the spec file")
        value = {str(k): _scalar_str(v) for k, v in value.items()}
    elif key == "command":
        if not (isinstance(value, str) or (isinstance(value, list) and value
                                           and all(isinstance(v, str) for v in value))):
            return "must be a string or a non-empty list of strings", None
    elif key in QUANTITY_FIELDS:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            return f"must be a resource quantity, got {shown(value)}", "e.g. 8 or 32G"
        value = str(value)
    elif value is not None and not isinstance(value, str):
        return f"must be a string, got {shown(value)}", None
    setattr(spec, key, value)
    return None


def _scalar_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)
