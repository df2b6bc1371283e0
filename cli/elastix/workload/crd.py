"""Validate a JobSet manifest against the vendored JobSet CRD's structural schema.

The API server prunes unknown fields silently, so a typo in a manifest would vanish on submit.
This validator *closes* every object schema that lists ``properties`` (an unknown key is an
error), and checks the keywords a Kubernetes structural schema uses: ``type``, ``properties``,
``required``, ``items``, ``additionalProperties``, ``enum``, ``pattern``, ``format``
(int32/int64/date-time), ``minimum``, ``maxLength``, ``minLength``, ``maxItems``, ``anyOf``,
``x-kubernetes-int-or-string`` and list uniqueness (``x-kubernetes-list-type: set|map`` with its
map keys, which catches two containers of the same name). CEL rules
(``x-kubernetes-validations``) are not evaluated.

It is a small purpose-built walker rather than ``jsonschema``: importing jsonschema alone costs
about 0.25 s, more than the rest of a dry run together. Tests cross-check the two on the same
manifests so they cannot drift.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any

from elastix.errors import ManifestError, shown

CRD_FILE = "jobset-crd-v0.12.0.yaml"
SCHEMA_FILE = "jobset-v1alpha2-schema.json"  # the CRD's v1alpha2 schema, extracted (fast to load)
CRD_SHA256 = "d022b87624512cf0b6741b31b24a2bea9945b5a838b50713af29332c878bb6fe"
API_VERSION = "jobset.x-k8s.io/v1alpha2"
KIND = "JobSet"
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_DATE_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)\Z")
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


def crd_text() -> str:
    """The vendored CRD, as shipped."""
    return resources.files("elastix.templates").joinpath(CRD_FILE).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The v1alpha2 ``openAPIV3Schema`` of the vendored CRD.

    Read from the JSON extract shipped beside the CRD: parsing the 820 KB YAML costs ~70 ms on
    every dry run, the JSON ~3 ms. A test checks the extract equals :func:`schema_from_crd`.
    """
    import json

    text = resources.files("elastix.templates").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def schema_from_crd() -> dict[str, Any]:
    """The v1alpha2 schema parsed from the vendored CRD YAML itself (slow; for tests and regen)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load(crd_text(), Loader=loader)  # noqa: S506 - a safe loader
    for version in crd["spec"]["versions"]:
        if version["name"] == "v1alpha2":
            return version["schema"]["openAPIV3Schema"]
    raise AssertionError("vendored CRD has no v1alpha2 schema")


def problems(manifest: Any, max_problems: int = 20) -> list[str]:
    """Every schema violation of ``manifest`` as ``path: message`` (empty when valid)."""
    out: list[str] = []
    if not isinstance(manifest, dict):
        return [f"(root): expected a JobSet object, got {type(manifest).__name__}"]
    if manifest.get("apiVersion") != API_VERSION or manifest.get("kind") != KIND:
        out.append(f"(root): expected apiVersion {API_VERSION} and kind {KIND}, got "
                   f"{shown(manifest.get('apiVersion'))} and {shown(manifest.get('kind'))}")
    _check(manifest, schema(), "", out, max_problems)
    return out[:max_problems]


def validate(manifest: Any) -> None:
    """Raise ManifestError listing the first problems if ``manifest`` is not a valid JobSet."""
    found = problems(manifest)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ManifestError(f"not a valid JobSet: {found[0]}{more}",
                            hint="; ".join(found[1:4]) or "compare with elastix workload create "
                            "--dry-run output")


def as_admitted(manifest: dict[str, Any]) -> dict[str, Any]:
    """A manifest from a file as the API server checks it against the schema: a copy with
    null fields dropped and the JobSet webhook's defaults that the schema requires filled in.

    - The API server prunes a null of a non-nullable field without a default before it
      validates (kubernetes/apiextensions-apiserver ``pkg/apiserver/schema/defaulting/
      prunenulls.go``, ``PruneNonNullableNullsWithoutDefaults``); the JobSet CRD declares no
      nullable field. gcluster's template leaves ``volumes:`` and a pod ``metadata:`` empty.
    - The mutating webhook names each failure policy rule ``failurePolicyRule<i>`` when it has
      no name, before the schema's ``required: [name]`` is checked (kubernetes-sigs/jobset
      v0.12.0 ``pkg/webhooks/jobset_webhook.go`` Default; ``tests/fixtures/
      jobset_webhook_rules.json``, "defaults"). gcluster's rule has none.
    """
    def prune(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: prune(x) for k, x in v.items() if x is not None}
        if isinstance(v, list):
            return [prune(x) for x in v]
        return v

    out = prune(manifest)
    policy = (out.get("spec") or {}).get("failurePolicy") or {}
    for i, rule in enumerate(policy.get("rules") or []):
        if isinstance(rule, dict) and not rule.get("name"):
            rule["name"] = f"failurePolicyRule{i}"
    return out


def _path(base: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{base}[{key}]"
    return f"{base}.{key}" if base else key


def _check(value: Any, sch: dict[str, Any], path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    where = path or "(root)"
    if sch.get("x-kubernetes-int-or-string"):
        if not (_TYPES["integer"](value) or isinstance(value, str)):
            out.append(f"{where}: expected an integer or a string, got {_show(value)}")
            return
        if isinstance(value, str) and "pattern" in sch and not re.search(sch["pattern"], value):
            out.append(f"{where}: {shown(value)} is not a valid quantity or value")
        return
    typ = sch.get("type")
    if typ and not _TYPES[typ](value):
        out.append(f"{where}: expected {'an' if typ[0] in 'aeiou' else 'a'} {typ}, got {_show(value)}")
        return
    if "enum" in sch and value not in sch["enum"]:
        out.append(f"{where}: {shown(value)} is not one of {sch['enum']}")
    if typ == "string":
        _check_string(value, sch, where, out)
    elif typ == "integer":
        lo, hi = _INT32 if sch.get("format") == "int32" else _INT64
        if not lo <= value <= hi:
            out.append(f"{where}: {value} is out of range for {sch.get('format', 'int64')}")
        if "minimum" in sch and value < sch["minimum"]:
            out.append(f"{where}: {value} is less than the minimum {sch['minimum']}")
    elif typ == "array":
        _check_array(value, sch, path, out, limit)
    elif typ == "object":
        _check_object(value, sch, path, out, limit)


def _check_string(value: str, sch: dict[str, Any], where: str, out: list[str]) -> None:
    if "maxLength" in sch and len(value) > sch["maxLength"]:
        out.append(f"{where}: longer than {sch['maxLength']} characters")
    if "minLength" in sch and len(value) < sch["minLength"]:
        out.append(f"{where}: shorter than {sch['minLength']} characters")
    if "pattern" in sch and not re.search(sch["pattern"], value):
        out.append(f"{where}: {shown(value)} does not match {sch['pattern']}")
    if sch.get("format") == "date-time" and not _DATE_TIME.match(value):
        out.append(f"{where}: {shown(value)} is not an RFC 3339 date-time")


def _check_array(value: list[Any], sch: dict[str, Any], path: str, out: list[str],
                 limit: int) -> None:
    where = path or "(root)"
    if "maxItems" in sch and len(value) > sch["maxItems"]:
        out.append(f"{where}: more than {sch['maxItems']} items")
    items = sch.get("items")
    if items:
        for i, item in enumerate(value):
            _check(item, items, _path(path, i), out, limit)
    kind = sch.get("x-kubernetes-list-type")
    if kind == "set":
        seen: list[Any] = []
        for i, item in enumerate(value):
            if item in seen:
                out.append(f"{_path(path, i)}: duplicate value {_show(item)} in a set")
            seen.append(item)
    elif kind == "map":
        keys = sch.get("x-kubernetes-list-map-keys", [])
        seen_keys: dict[tuple[Any, ...], int] = {}
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            k = tuple(item.get(key) for key in keys)
            if k in seen_keys:
                said = ", ".join(f"{key}={shown(v)}" for key, v in zip(keys, k, strict=True))
                out.append(f"{_path(path, i)}: duplicate entry ({said}); first at "
                           f"{_path(path, seen_keys[k])}")
            else:
                seen_keys[k] = i


def _check_object(value: dict[str, Any], sch: dict[str, Any], path: str, out: list[str],
                  limit: int) -> None:
    props = sch.get("properties")
    for req in sch.get("required", ()):
        if req not in value:
            out.append(f"{_path(path, req)}: required field is missing")
    extra = sch.get("additionalProperties")
    for key, item in value.items():
        if not isinstance(key, str):
            out.append(f"{_path(path, str(key))}: keys must be strings, got {_show(key)}")
        elif props is not None and key in props:
            _check(item, props[key], _path(path, key), out, limit)
        elif isinstance(extra, dict):
            _check(item, extra, _path(path, key), out, limit)
        elif props is not None and not sch.get("x-kubernetes-preserve-unknown-fields"):
            out.append(f"{_path(path, key)}: unknown field{_suggest(key, props)}")


def _suggest(key: str, props: dict[str, Any]) -> str:
    import difflib

    near = difflib.get_close_matches(key, list(props), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return type(value).__name__
    return f"{type(value).__name__} {shown(value)}"
