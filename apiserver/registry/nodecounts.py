"""``status.nodes`` of the ModelArtifacts the registry hands out (GET, LIST, watch events):
computed from the NodeModelStores when read, never stored (``controllers.nodeview.counts``
computes it; docs/api.md, "status.nodes"). Writes drop it (``admission.artifacts.NodeCounts``).

An artifact's answer is cached by its key, its revision and the version of its digest's
holdings, so the same bytes serve every reader until the artifact or a node holding its digest
changes: a LIST or a watch event costs a dict lookup, and a watch line encoded once is shared by
every watcher (``endpoints.watch.SharedLines`` matches the very bytes). Before the view is
plugged in (the server has not read every NodeModelStore yet) the counts are left out, and a
value an older version stored is never shown.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import orjson

from apiserver.registry import codec
from apiserver.storage import interface
from openapi import wire
from openapi.kinds import modelartifact

CACHED = 16_384
"""Artifacts whose presented bytes are kept (oldest out first)."""


class View(Protocol):
    def digest(self, artifact: wire.Readable) -> str:
        """``""``: nothing to count."""
        ...

    def counts(self, artifact: wire.Readable) -> modelartifact.NodeCounts | None: ...

    def version(self, digest: str) -> int: ...


@dataclasses.dataclass(frozen=True, slots=True)
class _Entry:
    revision: int
    epoch: int
    digest: str
    version: int
    record: interface.Record


class Presenter:
    def __init__(self, size: int = CACHED) -> None:
        self._view: View | None = None
        self._epoch = 0
        self._size = size
        self._cache: dict[str, _Entry] = {}

    @property
    def view(self) -> View | None:
        return self._view

    @view.setter
    def view(self, view: View | None) -> None:
        self._view = view
        self._epoch += 1
        self._cache.clear()

    def present(self, record: interface.Record) -> interface.Record:
        """``record`` with ``status.nodes`` as the view counts it now."""
        view = self._view
        entry = self._cache.get(record.key)
        if (entry is not None and entry.revision == record.revision
                and entry.epoch == self._epoch
                and (view is None or not entry.digest
                     or view.version(entry.digest) == entry.version)):
            return entry.record
        obj = orjson.loads(record.value)
        digest = view.digest(obj) if view is not None else ""
        counts = view.counts(obj) if view is not None else None
        status = obj.get("status")
        presented = record
        if counts is not None:
            if not isinstance(status, dict):
                status = obj["status"] = {}
            status[modelartifact.NODE_COUNTS] = counts
            presented = dataclasses.replace(record, value=codec.encode(obj))
        elif isinstance(status, dict) and modelartifact.NODE_COUNTS in status:
            del status[modelartifact.NODE_COUNTS]  # stored by an older version: never shown
            presented = dataclasses.replace(record, value=codec.encode(obj))
        self._keep(record.key, _Entry(record.revision, self._epoch, digest,
                                      view.version(digest) if view and digest else 0, presented))
        return presented

    def _keep(self, key: str, entry: _Entry) -> None:
        self._cache.pop(key, None)
        if len(self._cache) >= self._size:
            del self._cache[next(iter(self._cache))]
        self._cache[key] = entry
