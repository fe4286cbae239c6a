"""Published trees laid out as the materializers publish them (the files, their manifest kept
beside them, the marker), for tests of what reads the cache."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from nodeplugin.cache import layout, publish
from openapi import manifest


def entries(files: Mapping[str, bytes]) -> list[manifest.Entry]:
    return [manifest.Entry(path, "sha256", hashlib.sha256(data).hexdigest(), len(data))
            for path, data in files.items()]


def publish_tree(cache: layout.Layout, name: str, files: Mapping[str, bytes]) -> str:
    """Publish ``files`` as a verified tree the way the materializers do; its digest."""
    cache.create()
    listed = entries(files)
    digest = manifest.digest(listed)
    staging = cache.root / "staging" / name
    for path, data in files.items():
        (staging / path).parent.mkdir(parents=True, exist_ok=True)
        (staging / path).write_bytes(data)
    publish.publish_tree(cache, staging, digest, manifest_bytes=manifest.canonical_bytes(listed))
    return digest
