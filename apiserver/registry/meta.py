"""ObjectMeta values the server sets: generated names and timestamps (the rules of ObjectMeta are
``openapi.objectmeta``'s)."""

from __future__ import annotations

import datetime
import random
import time

# apiserver:pkg/storage/names/generate.go: no vowels, no look-alike digits.
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
GENERATED_SUFFIX = 5
MAX_GENERATE_PREFIX = 63 - GENERATED_SUFFIX


def now() -> str:
    """RFC 3339 UTC to the second, as Kubernetes writes metav1.Time (formatted once a second:
    every write asks, some twice)."""
    global _formatted
    second = int(time.time())
    if _formatted[0] != second:
        when = datetime.datetime.fromtimestamp(second, datetime.UTC)
        _formatted = (second, when.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return _formatted[1]


_formatted = (-1, "")


def generate_name(prefix: str) -> str:
    # Not a secret (kube-apiserver draws it from math/rand too), so the module's PRNG, which
    # Python reseeds in every forked worker, instead of one getrandom() call per character; a
    # collision is retried by the registry.
    suffix = "".join(random.choices(NAME_ALPHABET, k=GENERATED_SUFFIX))
    return prefix[:MAX_GENERATE_PREFIX] + suffix
