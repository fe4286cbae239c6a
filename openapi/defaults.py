"""Defaulting from the schema: every absent field whose schema has a ``default`` gets it.

Like Kubernetes' structural defaulting, a default applies only where the parent object exists,
and a defaulted object is itself walked, so ``spec.watermarks: {}`` becomes ``{highPercent: 80,
lowPercent: 70}``. Metadata is the server's business and is left alone.
"""

from __future__ import annotations

import copy
from typing import Any

from openapi import schema as schemas


def apply_defaults(kind: str, obj: dict[str, Any]) -> None:
    """Fill in defaults in place; raises KeyError for an unknown kind."""
    top = schemas.resolve(schemas.for_kind(kind))
    for name, sub in top.get("properties", {}).items():
        if name in ("metadata", "apiVersion", "kind"):
            continue
        _fill(obj, name, sub)


def _fill(parent: dict[str, Any], name: str, sub: schemas.Schema) -> None:
    present = name in parent and (parent[name] is not None or sub.get("nullable", False))
    if not present:
        if "default" not in sub:
            return
        parent[name] = copy.deepcopy(sub["default"])
    _walk(sub, parent[name])


def _walk(sub: schemas.Schema, value: Any) -> None:
    body = schemas.resolve(sub)
    if isinstance(value, dict):
        for name, child in body.get("properties", {}).items():
            _fill(value, name, child)
        extra = body.get("additionalProperties")
        if isinstance(extra, dict):
            for item in value.values():
                _walk(extra, item)
    elif isinstance(value, list) and isinstance(body.get("items"), dict):
        for item in value:
            _walk(body["items"], item)
