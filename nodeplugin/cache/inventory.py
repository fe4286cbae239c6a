"""How many bytes the cache holds, kept as the cache changes instead of walked on every read.

A published tree never changes, so each is measured once: at start for the trees already on
disk, and when the attempt that published it ends. A partial directory changes while an attempt
writes to it: while the attempt runs, its received bytes stand for it; the partials of digests
with no attempt are measured at start and again when an attempt at their digest ends. So
``stored_bytes`` (read by every ``/metrics`` scrape) touches no disk at all.

Measurements count allocated blocks (a sparse partial file counts what it holds); they block
(a walk of one tree), so the plugin runs ``scan`` and ``refresh`` in a worker thread.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import threading
from collections.abc import Callable, Iterable

from nodeplugin.cache import layout


def allocated_bytes(top: pathlib.Path) -> int:
    """Disk space of the files under ``top`` (allocated blocks); 0 when it is gone."""
    total = 0
    for directory, _, files in os.walk(top):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
    return total


class Inventory:
    """Bytes per digest of the published trees and of the partial directories."""

    def __init__(
        self,
        cache: layout.Layout,
        *,
        measure: Callable[[pathlib.Path], int] = allocated_bytes,
    ) -> None:
        self._cache = cache
        self._measure = measure
        self._lock = threading.Lock()  # scrapes read from a worker thread while refreshes write
        self._trees: dict[str, int] = {}
        self._partials: dict[str, int] = {}

    def scan(self) -> None:
        """Measure everything once (at start, before attempts run)."""
        trees = {d: self._measure(self._cache.published_path(d)) for d in self._cache.published()}
        partials: dict[str, int] = {}
        for partial in self._cache.partials():
            partials[partial.digest] = partials.get(partial.digest, 0) + self._measure(partial.path)
        with self._lock:
            self._trees, self._partials = trees, partials

    def refresh(self, digest: str) -> None:
        """Measure one digest again after an attempt at it ended (published or not)."""
        tree: int | None = None
        if self._cache.is_published(digest):
            with self._lock:
                tree = self._trees.get(digest)
            if tree is None:
                tree = self._measure(self._cache.published_path(digest))
        found = [p for p in self._cache.partials() if p.digest == digest]
        partial = sum(self._measure(p.path) for p in found)
        with self._lock:
            if tree is None:
                self._trees.pop(digest, None)
            else:
                self._trees[digest] = tree
            if found:
                self._partials[digest] = partial
            else:
                self._partials.pop(digest, None)

    def drop_tree(self, digest: str) -> None:
        """The digest's tree left ``objects/`` (quarantined): it no longer counts, at once."""
        with self._lock:
            self._trees.pop(digest, None)

    def bytes_of(self, digest: str, *, tree: bool) -> int | None:
        """What the digest's tree (or its partials) measured; None when not measured."""
        with self._lock:
            return (self._trees if tree else self._partials).get(digest)

    def digests(self) -> list[str]:
        """The published trees measured so far (all of them once ``scan`` ran)."""
        with self._lock:
            return list(self._trees)

    def stored_bytes(self, running: Iterable[tuple[str, int]]) -> int:
        """Published trees plus partials, with ``(digest, received bytes)`` of each running
        attempt standing for its digest's partials."""
        live = dict(running)
        with self._lock:
            idle = sum(n for d, n in self._partials.items() if d not in live)
            return sum(self._trees.values()) + idle + sum(live.values())
