"""Strict field validation of custom resources (what fieldValidation=Strict rejects)."""

from __future__ import annotations

from typing import Any


def unknown_fields(obj: Any, schema: dict, path: str = "") -> list[str]:
    """Paths of fields in ``obj`` that the openAPIV3Schema does not declare.

    Mirrors the API server: ``metadata`` is not checked at the top level or in embedded
    resources, ``x-kubernetes-preserve-unknown-fields`` keeps anything, ``additionalProperties``
    describes map values.
    """
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(obj, list):
        items = schema.get("items") or {}
        out = []
        for i, x in enumerate(obj):
            out += unknown_fields(x, items, f"{path}[{i}]")
        return out
    if not isinstance(obj, dict):
        return []
    props = schema.get("properties")
    extra = schema.get("additionalProperties")
    top = path == "" or schema.get("x-kubernetes-embedded-resource")
    out = []
    for k, v in obj.items():
        child = f"{path}.{k}" if path else k
        if top and k in ("apiVersion", "kind", "metadata"):
            continue
        if props is not None and k in props:
            out += unknown_fields(v, props[k], child)
        elif isinstance(extra, dict):
            out += unknown_fields(v, extra, child)
        elif props is not None or extra is False:
            out.append(child)
    return out
