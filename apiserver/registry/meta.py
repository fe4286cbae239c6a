"""ObjectMeta rules the server owns: names, generated names, timestamps, labels and finalizers."""

from __future__ import annotations

import datetime
import secrets
from typing import Any

from openapi import fields, names

# apiserver:pkg/storage/names/generate.go: no vowels, no look-alike digits.
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
GENERATED_SUFFIX = 5
MAX_GENERATE_PREFIX = 63 - GENERATED_SUFFIX


def now() -> str:
    """RFC 3339 UTC to the second, as Kubernetes writes metav1.Time."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def generate_name(prefix: str) -> str:
    suffix = "".join(secrets.choice(NAME_ALPHABET) for _ in range(GENERATED_SUFFIX))
    return prefix[:MAX_GENERATE_PREFIX] + suffix


def validate_name(name: str) -> list[fields.FieldError]:
    if name in (".", ".."):
        return [fields.invalid("metadata.name", name, "may not be '.' or '..'")]
    if "/" in name or "%" in name:
        return [fields.invalid("metadata.name", name, "may not contain '/' or '%'")]
    return [fields.invalid("metadata.name", name, p) for p in names.dns_subdomain_problems(name)]


def validate(metadata: dict[str, Any]) -> list[fields.FieldError]:
    """ObjectMeta checks shared by create and update (names are checked on create)."""
    errors: list[fields.FieldError] = []
    labels = metadata.get("labels") or {}
    if not isinstance(labels, dict):
        return [fields.invalid("metadata.labels", labels, "must be a map of strings")]
    for key, value in labels.items():
        for problem in names.qualified_name_problems(key):
            errors.append(fields.invalid("metadata.labels", key, problem))
        if not isinstance(value, str):
            errors.append(fields.invalid(f"metadata.labels[{key}]", value, "must be a string"))
            continue
        for problem in names.label_value_problems(value):
            errors.append(fields.invalid(f"metadata.labels[{key}]", value, problem))
    annotations = metadata.get("annotations") or {}
    if not isinstance(annotations, dict):
        errors.append(fields.invalid("metadata.annotations", annotations, "must be a map"))
    else:
        for key in annotations:
            for problem in names.qualified_name_problems(key):
                errors.append(fields.invalid("metadata.annotations", key, problem))
        size = sum(len(k) + len(str(v)) for k, v in annotations.items())
        if size > 256 * 1024:
            errors.append(fields.too_long("metadata.annotations", "", 256 * 1024))
    finalizers = metadata.get("finalizers") or []
    if not isinstance(finalizers, list):
        errors.append(fields.invalid("metadata.finalizers", finalizers, "must be a list"))
    else:
        for index, finalizer in enumerate(finalizers):
            path = f"metadata.finalizers[{index}]"
            if not isinstance(finalizer, str):
                errors.append(fields.invalid(path, finalizer, "must be a string"))
                continue
            for problem in names.qualified_name_problems(finalizer):
                errors.append(fields.invalid(path, finalizer, problem))
    return errors
