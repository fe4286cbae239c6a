"""ObjectMeta values the server sets: generated names and timestamps (the rules of ObjectMeta are
``openapi.objectmeta``'s)."""

from __future__ import annotations

import datetime
import secrets

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
