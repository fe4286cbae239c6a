"""Facts about published trees that never change once published, measured once and kept.

``size_bytes`` (what ``status.models[].sizeBytes`` says: the manifest's total) reads the tree's
kept manifest, or adds up its files when it keeps none; ``usage`` (what ``NodeGetVolumeStats``
answers: bytes and inodes of the tree) walks it once. Both block; call them in a thread.
``forget`` drops a digest whose tree was removed.
"""

from __future__ import annotations

import dataclasses
import os
import threading

from nodeplugin.cache import layout
from openapi import manifest


@dataclasses.dataclass(frozen=True, slots=True)
class TreeUsage:
    bytes: int
    """Disk space of its files (allocated blocks)."""
    inodes: int
    """Its files and directories, the tree's own directory included."""


class Trees:
    def __init__(self, cache: layout.Layout) -> None:
        self._cache = cache
        self._lock = threading.Lock()
        self._sizes: dict[str, int] = {}
        self._usage: dict[str, TreeUsage] = {}

    def size_bytes(self, digest: str) -> int | None:
        """The manifest's total size; None when the tree is not there."""
        with self._lock:
            known = self._sizes.get(digest)
        if known is not None:
            return known
        root = self._cache.published_path(digest)
        try:
            entries = manifest.parse((root / layout.MANIFEST).read_bytes())
            size = sum(entry.size for entry in entries)
        except FileNotFoundError:
            if not root.is_dir():
                return None
            size = sum(
                os.lstat(os.path.join(d, name)).st_size
                for d, _, names in os.walk(root)
                for name in names
                if not (d == str(root) and name in layout.RESERVED_NAMES)
            )
        except (OSError, manifest.ManifestError):
            return None
        with self._lock:
            self._sizes[digest] = size
        return size

    def usage(self, digest: str) -> TreeUsage | None:
        with self._lock:
            known = self._usage.get(digest)
        if known is not None:
            return known
        root = self._cache.published_path(digest)
        if not root.is_dir():
            return None
        blocks, inodes = 0, 1
        for directory, dirnames, filenames in os.walk(root):
            inodes += len(dirnames) + len(filenames)
            for name in filenames:
                try:
                    blocks += os.lstat(os.path.join(directory, name)).st_blocks
                except FileNotFoundError:
                    continue
        found = TreeUsage(blocks * 512, inodes)
        with self._lock:
            self._usage[digest] = found
        return found

    def forget(self, digest: str) -> None:
        with self._lock:
            self._sizes.pop(digest, None)
            self._usage.pop(digest, None)
