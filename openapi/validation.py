"""Schema validation of spec and status (and the progress view's fields).

Driven entirely by ``openapi.schema``: types, nullability, required fields, enums, numeric and
length limits, item counts, patterns and list keys. Metadata has its own rules
(``openapi.objectmeta``, which runs ``check`` on the ObjectMeta schema first); ``apiVersion`` and
``kind`` are the registry's. Rules across fields are admission's (``apiserver.admission``), over
owners in ``openapi`` (the watermarks: ``openapi.nodestore``).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from openapi import fields, grammar, reasons
from openapi import schema as schemas

# Patterns explained in words; a pattern missing here is quoted as is.
_PATTERN_RULES = {
    grammar.DIGEST_PATTERN: grammar.DIGEST_RULE,
    reasons.CONDITION_REASON_PATTERN: reasons.CONDITION_REASON_RULE,
    schemas.PEER_URL_PATTERN: schemas.PEER_URL_RULE,
}
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z")
_TYPE_NAMES = {"string": "a string", "integer": "an integer", "number": "a number",
               "boolean": "a boolean", "object": "an object", "array": "a list"}
_SKIPPED = ("metadata", "apiVersion", "kind")


def validate(kind: str, obj: dict[str, Any]) -> list[fields.FieldError]:
    """Every way ``obj`` breaks the schema of ``kind``; empty when it is valid."""
    errors: list[fields.FieldError] = []
    top = schemas.resolve(schemas.for_kind(kind))
    properties: dict[str, schemas.Schema] = top.get("properties", {})
    for name in top.get("required", []):
        if name not in obj or obj[name] is None:
            errors.append(fields.required(name))
    for name, sub in properties.items():
        if name in _SKIPPED or name not in obj:
            continue
        _check(sub, obj[name], name, errors)
    return errors


def check(schema: schemas.Schema, value: Any, path: str, *,
          unique: bool = True) -> list[fields.FieldError]:
    """Every way ``value`` (at ``path``) breaks ``schema``: the same walk ``validate`` runs, for
    the parts it leaves to others (ObjectMeta, DeleteOptions). ``unique=False`` leaves out the
    keyed-list uniqueness rules (kube-apiserver does not refuse repeated finalizers or owners)."""
    errors: list[fields.FieldError] = []
    _check(schema, value, path, errors, unique)
    return errors


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    # JSON Schema patterns are unanchored ECMA regexes; Python's "$" would accept a trailing LF.
    return re.compile(pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern)


def _type_ok(expected: str, value: Any) -> bool:
    if expected == "string":
        return isinstance(value, str)
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "object":
        return isinstance(value, dict)
    if expected == "array":
        return isinstance(value, list)
    return True


def _check(sub: schemas.Schema, value: Any, path: str, errors: list[fields.FieldError],
           unique: bool = True) -> None:
    body = schemas.resolve(sub)
    if value is None:
        if not (sub.get("nullable") or body.get("nullable")):
            errors.append(fields.invalid(path, None, "must not be null"))
        return
    expected = body.get("type")
    if isinstance(expected, str) and not _type_ok(expected, value):
        errors.append(fields.invalid(path, value, f"must be {_TYPE_NAMES[expected]}"))
        return
    if "enum" in body and value not in body["enum"]:
        errors.append(fields.not_supported(path, value, body["enum"]))
        return
    if isinstance(value, str):
        _check_string(body, value, path, errors)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(body, value, path, errors)
    elif isinstance(value, dict):
        _check_object(body, value, path, errors, unique)
    elif isinstance(value, list):
        _check_array(body, value, path, errors, unique)


def _check_string(body: schemas.Schema, value: str, path: str,
                  errors: list[fields.FieldError]) -> None:
    if "maxLength" in body and len(value) > body["maxLength"]:
        errors.append(fields.too_long(path, value, body["maxLength"]))
    elif "minLength" in body and len(value) < body["minLength"]:
        least = body["minLength"]
        errors.append(fields.invalid(
            path, value, f"must be at least {least} character{'s' if least > 1 else ''} long"))
    elif "pattern" in body and not _compiled(body["pattern"]).search(value):
        rule = _PATTERN_RULES.get(body["pattern"], f"must match {body['pattern']}")
        errors.append(fields.invalid(path, value, rule))
    elif body.get("format") == "date-time" and not _RFC3339.match(value):
        errors.append(fields.invalid(
            path, value, "must be an RFC 3339 time such as 2026-01-02T03:04:05Z"))


def _check_number(body: schemas.Schema, value: float, path: str,
                  errors: list[fields.FieldError]) -> None:
    if "minimum" in body and value < body["minimum"]:
        errors.append(fields.invalid(path, value, f"must be at least {body['minimum']}"))
    elif "maximum" in body and value > body["maximum"]:
        errors.append(fields.invalid(path, value, f"must be at most {body['maximum']}"))
    elif "multipleOf" in body and value % body["multipleOf"]:
        errors.append(fields.invalid(path, value, f"must be a multiple of {body['multipleOf']}"))


def _check_object(body: schemas.Schema, value: dict[str, Any], path: str,
                  errors: list[fields.FieldError], unique: bool) -> None:
    properties: dict[str, schemas.Schema] = body.get("properties", {})
    for name in body.get("required", []):
        if name not in value or value[name] is None:
            errors.append(fields.required(f"{path}.{name}" if path else name))
    for name, child in properties.items():
        if name in value and not (value[name] is None and name in body.get("required", [])):
            _check(child, value[name], f"{path}.{name}" if path else name, errors, unique)
    extra = body.get("additionalProperties")
    if "maxProperties" in body and len(value) > body["maxProperties"]:
        errors.append(fields.too_many(path, len(value), body["maxProperties"]))
    elif isinstance(extra, dict):
        for name, item in value.items():
            _check(extra, item, f"{path}[{name}]", errors, unique)


def _check_array(body: schemas.Schema, value: list[Any], path: str,
                 errors: list[fields.FieldError], unique: bool) -> None:
    if "maxItems" in body and len(value) > body["maxItems"]:
        errors.append(fields.too_many(path, len(value), body["maxItems"]))
        return
    items = body.get("items")
    if isinstance(items, dict):
        for index, item in enumerate(value):
            _check(items, item, f"{path}[{index}]", errors, unique)
    list_type = body.get("x-kubernetes-list-type") if unique else None
    if list_type == "set":
        seen: set[Any] = set()
        for index, item in enumerate(value):
            if not isinstance(item, str | int):
                continue  # a wrong type was reported above; only scalars can repeat here
            if item in seen:
                errors.append(fields.duplicate(f"{path}[{index}]", item))
            seen.add(item)
    elif list_type == "map":
        keys = tuple(body.get("x-kubernetes-list-map-keys", []))
        seen_keys: set[tuple[Any, ...]] = set()
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            key = tuple(item.get(k) for k in keys)
            if not all(isinstance(k, str | int) for k in key):
                continue  # a missing or mistyped key was reported above
            if key in seen_keys:
                errors.append(fields.duplicate(f"{path}[{index}].{keys[0]}", key[0]))
            seen_keys.add(key)
