"""Render a WorkloadSpec to a JobSet manifest: ``render(spec) -> dict``, pure and offline.

Safety rule: every ``{{ expression }}`` in a template (ours or a user's ``--template``) is emitted
as JSON through the environment's ``finalize`` hook, whether or not the template author remembered
a filter. JSON scalars, lists and objects are valid YAML flow nodes, so a value can never add a
key, end a block or inject a document: commands and env values with quotes, newlines, ``: ``,
``#``, ``{{ }}`` or any unicode round-trip exactly. Characters YAML treats as line breaks or as
non-printable (U+0085, U+2028, U+2029, C1 controls, BOM) are escaped as ``\\uXXXX``.

Templates, ours and the user's, render in :mod:`elastix.workload.sandbox` (Jinja2's sandbox, one
file, bounded), because a user's template runs even under ``--dry-run``.

The rendered text is parsed back (duplicate keys rejected) and validated against the JobSet CRD
before anything uses it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import jinja2

from elastix.errors import ManifestError, load_user_yaml
from elastix.protocol import envvars
from elastix.workload import crd, labels, names, pathways_images, platform, rbac, sandbox
from elastix.workload.spec import WorkloadSpec, read_user_text

TEMPLATE = "pathways-jobset.yaml.j2"
# YAML forbids or folds these inside double-quoted scalars; JSON leaves them raw.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


class Encoded(str):
    """Text already encoded as JSON by the ``j`` filter: emitted as is."""


def to_json(value: Any) -> Encoded:
    """Encode a template value as one JSON (and therefore YAML flow) node."""
    if isinstance(value, Encoded):
        return value
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined raises UndefinedError, reported with the variable's name
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError) as e:
        raise ManifestError(f"emits a value that is not plain data: {e}",
                            hint="emit strings, numbers, booleans, lists or mappings, "
                                 "e.g. {{ spec.name }} rather than {{ spec }}") from None
    return Encoded(_YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def _environment(loader: Any) -> sandbox.Sandbox:
    env = sandbox.Sandbox(
        to_json,
        loader=loader,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.filters["j"] = to_json
    env.filters["tojson"] = to_json
    return env


def context(spec: WorkloadSpec) -> dict[str, Any]:
    """Everything a JobSet template can use, derived from a validated spec."""
    tpu = spec.tpu
    field = lambda path: {"valueFrom": {"fieldRef": {"fieldPath": path}}}  # noqa: E731
    coordinator = field(f"metadata.labels['{labels.COORDINATOR}']")
    jobset_labels = {**spec.labels, labels.WORKLOAD: spec.name, labels.MANAGED_BY: labels.MANAGED_BY_VALUE}
    if spec.queue:
        jobset_labels[labels.QUEUE_NAME] = spec.queue
    server_common = [f"--gcs_scratch_location={spec.gcs_scratch}"]
    proxy_args = ["--server_port=29000", "--resource_manager_address=$(PATHWAYS_HEAD):29001",
                  *server_common]
    if spec.elastic:
        proxy_args.append(f"--num_elastic_slices={spec.elastic_slices}")
    rm_args = ["--server_port=29001", *server_common, "--node_type=resource_manager",
               f"--instance_count={spec.num_slices}",
               f"--instance_type={tpu.pathways_instance_type}"]
    sidecar = {} if spec.headless else {"restartPolicy": "Always"}
    proxy = {
        "name": labels.PROXY_CONTAINER, "image": spec.proxy_image,
        "imagePullPolicy": pathways_images.pull_policy(spec.proxy_image),
        "args": proxy_args + spec.proxy_args,
        "env": [{"name": "PATHWAYS_HEAD", **coordinator}],
        "ports": [{"containerPort": 29000, "protocol": "TCP"}],
        "resources": {"limits": {"cpu": spec.proxy_cpu, "memory": spec.proxy_memory}},
        **sidecar,
    }
    rm = {
        "name": labels.RM_CONTAINER, "image": spec.server_image,
        "imagePullPolicy": pathways_images.pull_policy(spec.server_image),
        "args": rm_args + spec.rm_args,
        "env": [
            {"name": "REPLICATED_JOB_NAME",
             **field(f"metadata.annotations['{labels.REPLICATED_JOB_NAME}']")},
            {"name": "JOBSET_NAME", **field(f"metadata.annotations['{labels.JOBSET_NAME}']")},
            {"name": "HOST_ADDRESS", **coordinator},
            {"name": "TPU_SKIP_MDS_QUERY", "value": "true"},
        ],
        "ports": [{"containerPort": 29001, "protocol": "TCP"},
                  {"containerPort": 29002, "protocol": "TCP"}],
        "resources": {"limits": {"cpu": spec.rm_cpu, "memory": spec.rm_memory}},
        **sidecar,
    }
    main_env: dict[str, Any] = {
        "PATHWAYS_HEAD": coordinator,
        "JAX_PLATFORMS": {"value": "proxy"},
        "XCLOUD_ENVIRONMENT": {"value": "GCP"},
        "JAX_BACKEND_TARGET": {"value": "grpc://$(PATHWAYS_HEAD):29000"},
        envvars.WORKLOAD: {"value": spec.name},
        envvars.NUM_SLICES: {"value": str(spec.num_slices)},
    }
    if spec.elastic:
        main_env[envvars.MAX_SLICE_LOSSES] = {"value": str(spec.slice_restarts * spec.num_slices)}
    if spec.pathways_persistence:
        main_env[envvars.PATHWAYS_PERSISTENCE] = {"value": "1"}
    annotations = {labels.ELASTIC_SLICES: str(spec.elastic_slices),
                   labels.MAX_SLICE_RESTARTS: str(spec.slice_restarts)}
    if spec.events_path:
        main_env[envvars.EVENTS_FILE] = {"value": spec.events_path}
        annotations[labels.EVENTS_PATH] = spec.events_path
    for k, v in spec.env.items():  # the user's values win over the defaults above
        main_env[k] = {"value": v}
    worker_env = [
        {"name": "TPU_MIN_LOG_LEVEL", "value": "0"},
        {"name": "TF_CPP_MIN_LOG_LEVEL", "value": "0"},
        {"name": "XCLOUD_ENVIRONMENT", "value": "GCP"},
        {"name": "MEGASCALE_GRPC_ENABLE_XOR_TRACER", "value": "false"},
        {"name": "MEGASCALE_NUM_SLICES", **field(f"metadata.labels['{labels.REPLICATED_JOB_REPLICAS}']")},
        {"name": "JOBSET_NAME", **field(f"metadata.annotations['{labels.JOBSET_NAME}']")},
        {"name": "REPLICATED_JOB_NAME", **field(f"metadata.annotations['{labels.REPLICATED_JOB_NAME}']")},
        {"name": "MEGASCALE_SLICE_ID", **field(f"metadata.labels['{labels.JOB_INDEX}']")},
        {"name": "PATHWAYS_HEAD", **coordinator},
        {"name": "MEGASCALE_COORDINATOR_ADDRESS", **coordinator},
    ]
    return {
        "spec": spec,
        "tpu": tpu,
        "labels": labels,
        "jobset_labels": jobset_labels,
        "jobset_annotations": annotations,
        "pod_labels": {**spec.labels, labels.WORKLOAD: spec.name},
        "head_service_account": rbac.service_account(spec.name),
        "proxy_container": proxy,
        "rm_container": rm,
        "main_env": [{"name": k, **v} for k, v in main_env.items()],
        "worker_env": worker_env,
        "worker_args": ["--server_port=29005", "--resource_manager_address=$(PATHWAYS_HEAD):29001",
                        *server_common, *spec.worker_args],
        "server_pull_policy": pathways_images.pull_policy(spec.server_image),
        "worker_backoff_limit": 0 if spec.slice_restart == "job" else
        platform.worker_backoff_limit(tpu.hosts, spec.elastic_slices, spec.slice_restarts),
        "failure_policy": platform.failure_policy(
            spec.max_restarts, spec.slice_restart, spec.slice_restarts, spec.num_slices,
            labels.HEAD_JOB, labels.WORKER_JOB),
    }


_VARIABLES_HINT = ("variables: spec, tpu, labels, jobset_labels, jobset_annotations, "
                   "pod_labels, head_service_account, main_env, worker_env, proxy_container, "
                   "rm_container, worker_args, server_pull_policy, worker_backoff_limit, "
                   "failure_policy")


def render_text(spec: WorkloadSpec, template: str | Path | None = None) -> str:
    """Render the template (ours, or the user's file) to YAML text. Not yet validated.

    Raises:
        ManifestError: the template does not parse or fails while rendering (the message names
            the file and line); a render budget is exceeded.
    """
    values = context(spec)
    if template is None:
        env = _environment(jinja2.PackageLoader("elastix.templates", "."))
        name = TEMPLATE
        source = env.loader.get_source(env, TEMPLATE)[0]
    else:
        env, name = _environment(None), str(template)
        source = read_user_text(Path(template), "template", "--template", "save it as UTF-8 text")
    return sandbox.render(env, source, name, values, trusted=template is None,
                          variables_hint=_VARIABLES_HINT)


def parse(text: str) -> dict[str, Any]:
    """Parse rendered YAML, rejecting duplicate keys (YAML would silently keep the last)."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Strict(base):  # type: ignore[misc, valid-type]
        pass

    def mapping(loader: Any, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):  # YAML's "? [1]": no Kubernetes key
                raise ManifestError(f"rendered manifest has a key that is a "
                                    f"{type(key).__name__} at line {key_node.start_mark.line + 1}",
                                    hint="a key is a name: quote it in the template")
            if key in seen:
                raise ManifestError(f"rendered manifest has a duplicate key {key!r} at line "
                                    f"{key_node.start_mark.line + 1}",
                                    hint="each key may appear once per mapping in the template")
            seen.add(key)
        return base.construct_mapping(loader, node, deep=deep)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    docs = load_user_yaml(text, "rendered manifest",
                          "check the template's indentation around that line",
                          too_deep=" to be a manifest", error=ManifestError, loader=Strict,
                          documents=True)
    docs = [d for d in docs if d is not None]
    if len(docs) != 1:
        raise ManifestError(f"template must render exactly one YAML document, got {len(docs)}",
                            hint="remove extra '---' documents")
    return docs[0]


def render(spec: WorkloadSpec, template: str | Path | None = None) -> dict[str, Any]:
    """Render, parse, CRD-validate and check the names derived from the workload's name: the
    manifest every backend receives.

    Raises:
        SpecError: the name is too long for what JobSet and Kubernetes derive from it (the
            longest that fits is computed by rendering the same spec with other names).
        ManifestError: the template does not render a valid JobSet.
    """
    manifest = parse(render_text(spec, template))
    crd.validate(manifest)
    names.check(manifest,
                lambda name: parse(render_text(dataclasses.replace(spec, name=name), template)))
    return manifest


def dump(manifest: dict[str, Any], fmt: str = "yaml") -> str:
    """Serialize a manifest as ``yaml`` or ``json`` text."""
    if fmt == "json":
        return json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(manifest, Dumper=dumper, sort_keys=False, allow_unicode=True,
                     default_flow_style=False, width=2**31 - 1)
