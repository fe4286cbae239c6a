"""Published trees laid out as the materializers publish them (the files, their manifest kept
beside them, the marker), for tests of what reads the cache."""

from __future__ import annotations

import hashlib
import os
import pathlib
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


def publish_format1_tree(root: pathlib.Path, name: str, files: Mapping[str, bytes]) -> str:
    """A tree as a plugin of format 1 (before the file store) published it: its own files
    (0444, directories 0555), its manifest and marker, under ``root/objects/sha256/<hex>``,
    and no format recorded; its digest."""
    listed = entries(files)
    digest = manifest.digest(listed)
    staging = root / "staging-format1" / name
    for path, data in files.items():
        (staging / path).parent.mkdir(parents=True, exist_ok=True)
        (staging / path).write_bytes(data)
    (staging / layout.MANIFEST).write_bytes(manifest.canonical_bytes(listed))
    (staging / layout.MARKER).write_bytes(layout.marker_bytes(digest))
    for directory, _dirnames, filenames in os.walk(staging, topdown=False):
        for file_name in filenames:
            os.chmod(os.path.join(directory, file_name), 0o444)
        os.chmod(directory, 0o555)
    objects = root / "objects" / "sha256"
    objects.mkdir(parents=True, exist_ok=True)
    os.rename(staging, objects / layout.hex_of(digest))
    return digest
