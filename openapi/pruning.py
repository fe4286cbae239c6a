"""Unknown fields: find them (for fieldValidation Strict and Warn) and drop them (every write).

An object schema with ``properties`` knows its fields; a map (``additionalProperties``) checks its
values; an object with neither (FieldsV1, RawExtension) is free-form and kept whole. Paths read
like Kubernetes' strict decoding errors: ``spec.foo``, ``status.models[2].bar``.
"""

from __future__ import annotations

from typing import Any

from openapi import schema as schemas


def prune(kind: str, obj: dict[str, Any]) -> None:
    """Remove every unknown field in place, and nulls of fields that do not allow null."""
    _walk(schemas.for_kind(kind), obj, "", [], remove=True)


def prune_unknown(kind: str, obj: dict[str, Any]) -> list[str]:
    """``prune``, returning the dotted paths it removed as unknown, in document order."""
    found: list[str] = []
    _walk(schemas.for_kind(kind), obj, "", found, remove=True)
    return found


def _nullable(sub: schemas.Schema) -> bool:
    return bool(sub.get("nullable") or schemas.resolve(sub).get("nullable"))


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _walk(sub: schemas.Schema, value: Any, path: str, found: list[str], *, remove: bool) -> None:
    body = schemas.resolve(sub)
    if body.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        properties: dict[str, schemas.Schema] | None = body.get("properties")
        extra = body.get("additionalProperties")
        if properties is not None:
            for name in list(value):
                child = properties.get(name)
                if child is None:
                    found.append(_join(path, name))
                    if remove:
                        del value[name]
                elif value[name] is None and remove and not _nullable(child):
                    # As Kubernetes does for structural schemas: a null where null is not
                    # allowed (and no default replaced it) means "not set".
                    del value[name]
                else:
                    _walk(child, value[name], _join(path, name), found, remove=remove)
        elif isinstance(extra, dict):
            for name, item in value.items():
                _walk(extra, item, _join(path, name), found, remove=remove)
    elif isinstance(value, list) and isinstance(body.get("items"), dict):
        for index, item in enumerate(value):
            _walk(body["items"], item, f"{path}[{index}]", found, remove=remove)
