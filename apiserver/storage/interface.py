"""The storage contract shared by every backend (SQLite, etcd, and the watch cache over etcd).

Keys are strings such as ``/modelartifacts/<namespace>/<name>``; values are opaque bytes (the
registry stores JSON without ``metadata.resourceVersion``). Every write bumps one monotonic
revision for the whole store; a record's ``revision`` is the revision of its last write and is what
the API exposes as ``resourceVersion``.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import enum
from collections.abc import AsyncIterator

from timing import backoff as backoffs

_LOOKS = backoffs.Backoff(0.01, 0.25)
"""``reached`` looks at the revision again after 10 ms, doubling to every 250 ms."""


class StorageError(Exception):
    """Base of every storage failure; the registry translates these once into API statuses."""


class KeyExists(StorageError):
    """create() found a live record under the key."""


class KeyNotFound(StorageError):
    """The key has no live record."""


class RevisionConflict(StorageError):
    """A compare-and-swap found another revision than the caller expected."""

    def __init__(self, key: str, expected: int, actual: int) -> None:
        super().__init__(f"{key}: expected revision {expected}, found {actual}")
        self.key = key
        self.expected = expected
        self.actual = actual


class Unavailable(StorageError):
    """The backend cannot be reached (or has no quorum) right now; retrying later may work."""


class Timeout(StorageError):
    """The backend did not answer in time; a write's outcome is unknown."""


class Compacted(StorageError):
    """The requested revision is older than the oldest one kept."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"revision {requested} is compacted (oldest kept: {oldest})")
        self.requested = requested
        self.oldest = oldest


class FutureRevision(StorageError):
    """The requested revision is newer than the store's current revision.

    ``retry_after``: seconds a client may wait before asking again, set where the store already
    waited for the revision (``list_recent``), 0 where it answered at once (a read at that exact
    revision); kube-apiserver words the two the same way (tests/data/kube-samples/
    resource-version-too-large.json)."""

    def __init__(self, requested: int, current: int, *, retry_after: int = 0) -> None:
        super().__init__(f"revision {requested} is newer than the current {current}")
        self.requested = requested
        self.current = current
        self.retry_after = retry_after


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    key: str
    value: bytes
    revision: int
    """The revision of the last write of this key (the object's resourceVersion)."""
    create_revision: int


@dataclasses.dataclass(frozen=True, slots=True)
class Page:
    records: list[Record]
    revision: int
    """The store revision the page was read at (the list's resourceVersion)."""
    more: bool
    """True when records remain after the last one returned."""
    remaining: int
    """How many records remain after this page (0 when ``more`` is false)."""


class EventType(enum.Enum):
    PUT = "PUT"
    DELETE = "DELETE"


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    type: EventType
    record: Record
    """For PUT the new record; for DELETE the record as it was, with ``revision`` set to the
    revision of the deletion."""
    previous: Record | None
    """The record before this event (None for a create)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Progress:
    """A watch promise: no event at or below ``revision`` is still to come on this watch."""

    revision: int


class Store(abc.ABC):
    """An async, revisioned key-value store. All methods are safe to call concurrently."""

    health_check: str = ""
    """The name of the readiness check this backend adds to ``/readyz`` ("" for none)."""

    async def check(self) -> None:  # noqa: B027 - optional: most backends have nothing to add
        """Raise a ``StorageError`` when the backend cannot serve requests now (readiness)."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Open files/connections; called once before any other method."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release resources; open watches end."""

    @abc.abstractmethod
    async def current_revision(self) -> int: ...

    @abc.abstractmethod
    async def oldest_revision(self) -> int:
        """The oldest revision still readable: ``list(revision=R)`` works for R >= it and
        ``watch(after=N)`` for N >= it (0 until something was compacted)."""

    @abc.abstractmethod
    async def get(self, key: str) -> Record | None: ...

    @abc.abstractmethod
    async def list(
        self,
        prefix: str,
        *,
        revision: int = 0,
        start_after: str = "",
        limit: int = 0,
    ) -> Page:
        """Live records whose key starts with ``prefix``, ordered by key.

        ``revision`` 0 reads the current state; a positive one reads the state as of that
        revision (Compacted if older than kept, FutureRevision if newer than current).
        ``start_after`` continues after that key; ``limit`` 0 means everything.
        """

    async def list_recent(self, prefix: str, *, not_older_than: int = 0, limit: int = 0,
                          wait: float = 0.0) -> Page:
        """Like ``list`` at no particular revision, but any state at least as new as
        ``not_older_than`` will do (Kubernetes' resourceVersion "0" and NotOlderThan), so a
        backend may answer from a cache that lags the newest writes. A store behind
        ``not_older_than`` is given ``wait`` seconds to reach it (writes elsewhere, a cache
        catching up), then FutureRevision (``retry_after`` 1). Without a cache this is a
        current ``list``."""
        page = await self.list(prefix, limit=limit)
        if not_older_than > page.revision:
            if await self.reached(not_older_than, wait) < not_older_than:
                raise FutureRevision(not_older_than, await self.current_revision(),
                                     retry_after=1)
            page = await self.list(prefix, limit=limit)
        return page

    async def reached(self, revision: int, timeout: float) -> int:
        """The current revision once it is at least ``revision``, or as it is after ``timeout``
        seconds (looked at every few milliseconds, then every 250 ms)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        looks = 0
        while True:
            current = await self.current_revision()
            left = deadline - loop.time()
            if current >= revision or left <= 0:
                return current
            looks += 1
            await asyncio.sleep(min(_LOOKS.delay(looks), left))

    @abc.abstractmethod
    async def create(self, key: str, value: bytes) -> Record:
        """Write a new key; KeyExists if it has a live record."""

    @abc.abstractmethod
    async def update(self, key: str, value: bytes, *, expected_revision: int) -> Record:
        """Replace the key's value if its revision is ``expected_revision``.

        KeyNotFound when absent, RevisionConflict when the revision differs.
        """

    @abc.abstractmethod
    async def delete(self, key: str, *, expected_revision: int) -> Record:
        """Delete the key if its revision is ``expected_revision``; returns the deleted record
        with ``revision`` set to the deletion's revision."""

    @abc.abstractmethod
    def watch(self, prefix: str, *, after: int) -> AsyncIterator[Event]:
        """Events for keys under ``prefix`` with revision > ``after``, in revision order, then
        live events as they happen, until the consumer stops iterating or the store closes.

        Raises Compacted (on first iteration) when ``after`` is older than ``oldest_revision()``
        (the events right after it are gone). A slow consumer must never block writers: a
        backend may end a watch that falls too far behind by raising Compacted, and the caller
        resumes (from its last revision, or by listing again if that is compacted too).
        """

    def updates(self, prefix: str, *, after: int) -> AsyncIterator[Event | Progress]:
        """``watch`` plus ``Progress`` marks where the backend learns them (etcd's progress
        notifications), so an idle watch can still move its resourceVersion on (bookmarks).
        Without such knowledge this is ``watch``."""
        return self.watch(prefix, after=after)

    @abc.abstractmethod
    async def compact(self, revision: int) -> None:
        """Forget history at or below ``revision`` (live records are kept)."""

    @abc.abstractmethod
    async def fence(self, revision: int) -> int:
        """Continue numbering above ``revision`` and forget all history: afterwards the store's
        revision F is at least ``revision``, every write gets a revision above F, the live
        records are what they were, and ``oldest_revision()`` is F, so a list or a watch from
        any earlier revision is ``Compacted``. Returns F. For a store found behind the revisions
        it once handed out (``marks``), at start, before anyone watches."""
