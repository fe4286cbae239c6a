"""How many bytes the cache holds, kept as the cache changes instead of walked on every read.

Every byte is counted once, whatever links it: the stored files (``cache.files``: the store
measures each as it takes it in and forgets it as it removes it), plus what a tree or a partial
directory holds of its own (the files only it links: a tree's marker and manifest and empty
files, an attempt's files still being written). A published tree never changes, so each is
measured once: at start for the trees already on disk, and when the attempt that published it
ends; with it, which stored files it uses (its manifest), so collection can tell what removing
some trees would free (``freed_by``: a stored file goes with its last tree). A partial directory
changes while an attempt writes to it: while the attempt runs, the bytes it holds outside the
store stand for it; the partials of digests with no attempt are measured at start and again
when an attempt at their digest ends. So ``stored_bytes`` (read by every ``/metrics`` scrape)
touches no disk at all.

Measurements count allocated blocks (a sparse partial file counts what it holds); they block
(a walk of one tree), so the plugin runs ``scan`` and ``refresh`` in a worker thread.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import pathlib
import threading
from collections.abc import Callable, Iterable

from nodeplugin.cache import files, layout
from openapi import manifest


def own_bytes(top: pathlib.Path) -> int:
    """Disk space of the files under ``top`` that nothing else links (a link count of 1):
    what deleting ``top`` frees by itself; 0 when it is gone."""
    total = 0
    for directory, _, names in os.walk(top):
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                info = os.lstat(os.path.join(directory, name))
                if info.st_nlink == 1:
                    total += info.st_blocks * 512
    return total


@dataclasses.dataclass(frozen=True, slots=True)
class Tree:
    own: int
    """Bytes of its files nothing else links."""
    uses: frozenset[files.Identity]
    """The stored files it links (its manifest's non-empty entries)."""


class Inventory:
    """Bytes of the stored files, and per digest of the published trees and the partials."""

    def __init__(
        self,
        cache: layout.Layout,
        *,
        measure: Callable[[pathlib.Path], int] = own_bytes,
    ) -> None:
        self._cache = cache
        self._store = files.of(cache)
        self._measure = measure
        self._lock = threading.Lock()  # scrapes read from a worker thread while refreshes write
        self._trees: dict[str, Tree] = {}
        self._users: collections.Counter[files.Identity] = collections.Counter()
        self._partials: dict[str, int] = {}

    def scan(self) -> None:
        """Measure everything once (at start, before attempts run)."""
        self._store.scan()
        trees = {d: self._tree(d) for d in self._cache.published()}
        partials: dict[str, int] = {}
        for partial in self._cache.partials():
            partials[partial.digest] = partials.get(partial.digest, 0) + self._measure(partial.path)
        with self._lock:
            self._trees, self._partials = {}, partials
            self._users.clear()
            for digest, tree in trees.items():
                self._set_tree(digest, tree)

    def refresh(self, digest: str) -> None:
        """Measure one digest again after an attempt at it ended (published or not)."""
        tree: Tree | None = None
        if self._cache.is_published(digest):
            with self._lock:
                tree = self._trees.get(digest)
            if tree is None:
                tree = self._tree(digest)
        found = [p for p in self._cache.partials() if p.digest == digest]
        partial = sum(self._measure(p.path) for p in found)
        with self._lock:
            if tree is None:
                self._drop(digest)
            else:
                self._set_tree(digest, tree)
            if found:
                self._partials[digest] = partial
            else:
                self._partials.pop(digest, None)

    def drop_tree(self, digest: str) -> None:
        """The digest's tree left ``objects/`` (quarantined): it no longer counts, at once."""
        with self._lock:
            self._drop(digest)

    def bytes_of(self, digest: str, *, tree: bool) -> int | None:
        """What the digest's tree (its own files) or its partials measured; None when not
        measured."""
        with self._lock:
            if tree:
                found = self._trees.get(digest)
                return None if found is None else found.own
            return self._partials.get(digest)

    def freed_by(self, digests: Iterable[str]) -> int:
        """What removing these trees together would free: their own files, and the stored
        files no other tree uses (a partial linking one keeps it: then less is freed)."""
        with self._lock:
            gone = [self._trees[d] for d in set(digests) if d in self._trees]
            leaving: collections.Counter[files.Identity] = collections.Counter()
            for tree in gone:
                leaving.update(tree.uses)
            shared = sum(self._store.size_of(ident) for ident, count in leaving.items()
                         if self._users[ident] <= count)
            return sum(tree.own for tree in gone) + shared

    def digests(self) -> list[str]:
        """The published trees measured so far (all of them once ``scan`` ran)."""
        with self._lock:
            return list(self._trees)

    def stored_bytes(self, running: Iterable[tuple[str, int]]) -> int:
        """Stored files, trees' and partials' own files, with ``(digest, bytes)`` of each
        running attempt (what it holds outside the store) standing for its digest's
        partials."""
        live = dict(running)
        stored = self._store.total()
        with self._lock:
            idle = sum(n for d, n in self._partials.items() if d not in live)
            own = sum(tree.own for tree in self._trees.values())
        return stored + own + idle + sum(live.values())

    # --- helpers ---------------------------------------------------------------------------------
    def _tree(self, digest: str) -> Tree:
        root = self._cache.published_path(digest)
        uses: frozenset[files.Identity] = frozenset()
        with contextlib.suppress(OSError, manifest.ManifestError):
            listed = manifest.parse((root / layout.MANIFEST).read_bytes())
            uses = frozenset(files.identity(e) for e in listed if e.size > 0)
        return Tree(self._measure(root), uses)

    def _set_tree(self, digest: str, tree: Tree) -> None:
        self._drop(digest)
        self._trees[digest] = tree
        self._users.update(tree.uses)

    def _drop(self, digest: str) -> None:
        old = self._trees.pop(digest, None)
        if old is not None:
            self._users.subtract(old.uses)
            for ident in old.uses:
                if self._users[ident] <= 0:
                    del self._users[ident]
