"""ObjectMeta rules the server owns: names, generated names, timestamps, labels and finalizers."""

from __future__ import annotations

import datetime
import re
import secrets
from typing import Any

from openapi import fields

# apiserver:pkg/storage/names/generate.go: no vowels, no look-alike digits.
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
GENERATED_SUFFIX = 5
MAX_GENERATE_PREFIX = 63 - GENERATED_SUFFIX

_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def now() -> str:
    """RFC 3339 UTC to the second, as Kubernetes writes metav1.Time."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def generate_name(prefix: str) -> str:
    suffix = "".join(secrets.choice(NAME_ALPHABET) for _ in range(GENERATED_SUFFIX))
    return prefix[:MAX_GENERATE_PREFIX] + suffix


def subdomain_problems(value: str) -> list[str]:
    """Why ``value`` is not a DNS-1123 subdomain (empty when it is one)."""
    problems = []
    if len(value) > 253:
        problems.append("must be no more than 253 characters")
    if not _SUBDOMAIN.fullmatch(value):
        problems.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters,"
            " '-' or '.', and must start and end with an alphanumeric character (e.g."
            " 'example.com', regex used for validation is"
            " '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
    return problems


def is_label(value: str) -> bool:
    return len(value) <= 63 and _LABEL.fullmatch(value) is not None


def qualified_name_problems(value: str) -> list[str]:
    """Why ``value`` is not a qualified name (``[prefix/]name``) such as a label key."""
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or subdomain_problems(prefix)):
        return ["prefix part must be a lowercase RFC 1123 subdomain"]
    if not name:
        return ["name part must be non-empty"]
    if len(name) > 63:
        return ["name part must be no more than 63 characters"]
    if not _QUALIFIED_NAME.fullmatch(name):
        return [
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start"
            " and end with an alphanumeric character"
        ]
    return []


def label_value_problems(value: str) -> list[str]:
    if len(value) > 63:
        return ["must be no more than 63 characters"]
    if not _LABEL_VALUE.fullmatch(value):
        return [
            "a valid label must be an empty string or consist of alphanumeric characters, '-',"
            " '_' or '.', and must start and end with an alphanumeric character"
        ]
    return []


def validate_name(name: str) -> list[fields.FieldError]:
    if name in (".", ".."):
        return [fields.invalid("metadata.name", name, "may not be '.' or '..'")]
    if "/" in name or "%" in name:
        return [fields.invalid("metadata.name", name, "may not contain '/' or '%'")]
    return [fields.invalid("metadata.name", name, p) for p in subdomain_problems(name)]


def validate(metadata: dict[str, Any]) -> list[fields.FieldError]:
    """ObjectMeta checks shared by create and update (names are checked on create)."""
    errors: list[fields.FieldError] = []
    labels = metadata.get("labels") or {}
    if not isinstance(labels, dict):
        return [fields.invalid("metadata.labels", labels, "must be a map of strings")]
    for key, value in labels.items():
        for problem in qualified_name_problems(key):
            errors.append(fields.invalid("metadata.labels", key, problem))
        if not isinstance(value, str):
            errors.append(fields.invalid(f"metadata.labels[{key}]", value, "must be a string"))
            continue
        for problem in label_value_problems(value):
            errors.append(fields.invalid(f"metadata.labels[{key}]", value, problem))
    annotations = metadata.get("annotations") or {}
    if not isinstance(annotations, dict):
        errors.append(fields.invalid("metadata.annotations", annotations, "must be a map"))
    else:
        for key in annotations:
            for problem in qualified_name_problems(key):
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
            for problem in qualified_name_problems(finalizer):
                errors.append(fields.invalid(path, finalizer, problem))
    return errors
