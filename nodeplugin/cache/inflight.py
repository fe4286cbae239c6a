"""The files this node is fetching from a hub right now, by content identity.

Another node materializing the same files asks (the peer port's ``held`` answer,
``peer/stored.py``) before it fetches a file from the hub: a file the node stores is served to it, a
file the node is fetching is left to it for a while (``materialize/swarm.py``), so N nodes that
start cold at once split the files between them and the hub serves each about once.

An attempt ``claim``s a file before it asks the hub for it and ``release``s it when the file is
stored or the attempt gives it up; ``received`` is how far the file got (a puller waiting for it
gives up once that stops moving). A claim may name the file being written (``path``): its
first ``received`` bytes are written there in order, and the peer port serves them to a puller
before the file completes (``peer/growing.py``; the puller hashes the whole file). One registry
per cache root in a process (``of``), like the file store, so the materializer and the peer
port share it without wiring. Thread-safe.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import threading
from collections.abc import Callable

from nodeplugin.cache import files, layout

Progress = Callable[[], int]


@dataclasses.dataclass(frozen=True, slots=True)
class Fetching:
    progress: Progress
    """Bytes received so far: the file's first ``progress()`` bytes are written at ``path``."""
    path: pathlib.Path | None


class InFlight:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fetching: dict[files.Identity, Fetching] = {}

    def claim(self, ident: files.Identity, progress: Progress,
              path: pathlib.Path | None = None) -> bool:
        """Record that this node fetches ``ident`` from the hub (into ``path`` when given);
        False when an attempt of this node fetches it already."""
        with self._lock:
            if ident in self._fetching:
                return False
            self._fetching[ident] = Fetching(progress, path)
            return True

    def release(self, ident: files.Identity) -> None:
        with self._lock:
            self._fetching.pop(ident, None)

    def received(self, ident: files.Identity) -> int | None:
        """Bytes of ``ident`` received so far, None when this node is not fetching it."""
        found = self.fetching(ident)
        return None if found is None else found.progress()

    def fetching(self, ident: files.Identity) -> Fetching | None:
        with self._lock:
            return self._fetching.get(ident)


_registries: dict[str, InFlight] = {}
_registries_lock = threading.Lock()


def of(cache: layout.Layout) -> InFlight:
    """The registry of ``cache``'s root (one per root in a process)."""
    key = os.path.abspath(cache.root)
    with _registries_lock:
        found = _registries.get(key)
        if found is None:
            found = _registries[key] = InFlight()
        return found
