"""One look at an artifact's delivery: the artifact, its ``progress`` subresource and, where the
caller may read them, its ``copies`` (one row per node, with the same live bytes the total
counts) and the node stores' readiness; and the rates between looks.

A caller refused ``copies`` but allowed to list NodeModelStores (an older server, a narrower
role) gets each node's stored entry instead; a caller refused both (a tenant) gets ``nodes =
None`` and sees the totals only.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
from typing import Any

import kube
from kube import gpustack
from openapi import states, wire
from openapi.kinds import nodemodelstore, progress

RATE_WINDOW = 120.0
"""Seconds of changes a rate is measured over (four of a node's progress reports)."""
STALE_AFTER = 90.0
"""No change for this long: no rate (three progress reports missed)."""


@dataclasses.dataclass(frozen=True, slots=True)
class NodeRow:
    """One node's entry for the artifact's digest (``status.models[]`` of its NodeModelStore)."""

    node: str
    state: str
    size_bytes: int
    downloaded_bytes: int
    reason: str = ""
    message: str = ""
    retry_time: datetime.datetime | None = None
    store_ready: bool = True
    live: bool = False
    """``downloaded_bytes`` was read from the node's plugin for this look (``copies``)."""
    pinned: bool = False
    referenced: bool = False

    @classmethod
    def of_copy(cls, row: gpustack.NodeCopy, size: int, store_ready: bool) -> NodeRow:
        total = row.size_bytes or size
        return cls(node=row.node, state=row.phase, size_bytes=total,
                   downloaded_bytes=total if row.ready else row.downloaded_bytes,
                   reason=row.reason, message=row.message, retry_time=row.retry_time,
                   store_ready=store_ready, live=row.live, pinned=row.pinned,
                   referenced=row.referenced)

    @classmethod
    def of(cls, store: gpustack.NodeStore, entry: wire.Readable, size: int) -> NodeRow:
        state = nodemodelstore.entry_state(entry)
        total = nodemodelstore.entry_size(entry) or size
        have = total if state == states.READY else nodemodelstore.entry_downloaded(entry) or 0
        return cls(node=store.node, state=state, size_bytes=total, downloaded_bytes=have,
                   reason=nodemodelstore.entry_reason(entry),
                   message=nodemodelstore.entry_message(entry),
                   retry_time=parse_time(nodemodelstore.entry_retry_time(entry)),
                   store_ready=store.ready, pinned=entry_digest_pinned(store, entry),
                   referenced=nodemodelstore.entry_referenced(entry))


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    artifact: gpustack.Artifact
    progress: wire.Obj
    nodes: tuple[NodeRow, ...] | None
    """None: the caller may not list NodeModelStores."""
    at: float
    """When it was taken (a monotonic clock)."""
    now: datetime.datetime

    @property
    def size(self) -> int:
        return progress.size_bytes(self.progress) or self.artifact.size_bytes or 0

    def count(self, key: str) -> int:
        value = self.progress.get(key)
        return value if isinstance(value, int) else 0

    @property
    def counted(self) -> bool:
        """The subresource counts nodes (a resolved hub source); else its ``reason`` says why
        not."""
        return bool(progress.manifest_digest(self.progress))

    @property
    def failed(self) -> str:
        """The artifact's terminal resolution failure (``ResolutionFailed``'s text); ``""``."""
        failure = self.artifact.failure()
        return "" if failure is None else failure.message

    @property
    def done(self) -> bool:
        """Nothing left to wait for: ready on a node and downloading nowhere, or a source that
        is mounted whole (claim, image) once resolved."""
        if not self.artifact.resolved:
            return False
        if not self.counted:
            return True
        return progress.ready(self.progress) > 0 and progress.downloading(self.progress) == 0

    def total(self) -> tuple[int, int]:
        """(bytes held, bytes wanted) over the nodes that hold or download the digest."""
        ready, downloading = progress.ready(self.progress), progress.downloading(self.progress)
        return (ready * self.size + progress.downloading_bytes(self.progress),
                (ready + downloading) * self.size)


def entry_digest_pinned(store: gpustack.NodeStore, entry: wire.Readable) -> bool:
    return nodemodelstore.entry_digest(entry) in store.pinned


def parse_time(value: Any) -> datetime.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


class Reader:
    """Takes snapshots through a ``gpustack.ModelManager``; once refused the node stores it
    stops asking for them."""

    def __init__(self, models: gpustack.ModelManager, namespace: str, name: str) -> None:
        self.models = models
        self.namespace = namespace
        self.name = name
        self.node_stores_refused = False
        self.copies_refused = False

    async def take(self, at: float, now: datetime.datetime) -> Snapshot:
        artifact = await self.models.get_artifact(self.namespace, self.name)
        counted = await self.models.progress(self.namespace, self.name)
        return Snapshot(artifact, counted, await self._nodes(artifact, counted), at, now)

    async def _nodes(self, artifact: gpustack.Artifact,
                     counted: wire.Obj) -> tuple[NodeRow, ...] | None:
        stores = await self._stores()
        copies = await self._copies()
        if copies is not None:
            size = copies.size_bytes or artifact.size_bytes or 0
            ready = {store.node: store.ready for store in stores or ()}
            return tuple(NodeRow.of_copy(row, size, ready.get(row.node, True))
                         for row in copies.nodes)
        if stores is None:
            return None
        digest = progress.manifest_digest(counted) or artifact.manifest_digest
        if not digest:
            return ()
        size = progress.size_bytes(counted) or artifact.size_bytes or 0
        rows = (NodeRow.of(store, entry, size) for store in stores
                if (entry := store.entry(digest)) is not None)
        return tuple(sorted(rows, key=lambda row: row.node))

    async def _stores(self) -> list[gpustack.NodeStore] | None:
        if self.node_stores_refused:
            return None
        try:
            return await self.models.node_stores()
        except kube.Forbidden:
            self.node_stores_refused = True
            return None

    async def _copies(self) -> gpustack.Copies | None:
        if self.copies_refused:
            return None
        try:
            return await self.models.copies(self.namespace, self.name)
        except kube.Forbidden:
            self.copies_refused = True
            return None


@dataclasses.dataclass(frozen=True, slots=True)
class Rate:
    bytes_per_second: float | None
    """None until the count changed twice, or after it stood still for ``Rates.stale``."""
    eta_seconds: float | None


class Rates:
    """Bytes per second per key (a node, or the total), measured between the moments the count
    changed, over the last ``window`` seconds.

    The count a node's store reports moves in steps (the plugin writes its progress at most every
    30 seconds, docs/nodeplugin.md) while the subresource's total moves at every look where the
    worker reads the plugins live; timing the changes serves both. The first value seen is not a
    change (when it was reached is unknown), so a rate needs two changes; a count that goes back
    (a new attempt) starts the key over. The ETA counts down from the last change.
    """

    def __init__(self, window: float = RATE_WINDOW, stale: float = STALE_AFTER) -> None:
        self.window = window
        self.stale = stale
        self._last: dict[str, int] = {}
        self._changes: dict[str, collections.deque[tuple[float, int]]] = {}

    def add(self, key: str, at: float, have: int, want: int) -> Rate:
        changes = self._changes.setdefault(key, collections.deque())
        last = self._last.get(key)
        self._last[key] = have
        if last is not None and have < last:
            changes.clear()
        elif last is not None and have > last:
            changes.append((at, have))
        while len(changes) > 2 and at - changes[1][0] >= self.window:
            changes.popleft()
        if len(changes) < 2 or at - changes[-1][0] > self.stale:
            return Rate(None, None)
        (first_at, first), (last_at, newest) = changes[0], changes[-1]
        speed = (newest - first) / (last_at - first_at)
        eta = max(0.0, (want - newest) / speed - (at - last_at)) if want else None
        return Rate(speed, eta)

    def forget(self, key: str) -> None:
        self._last.pop(key, None)
        self._changes.pop(key, None)
