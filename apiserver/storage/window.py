"""One resource's in-memory window: the current objects plus a ring of the latest events.

Fed by a single backend watch (``watchcache.Cache`` owns the feeding); read by lists that accept a
recent state and by every watcher of the resource, each with only its own cursor. Everything runs
on the event loop thread; feeding never waits for a reader.

Invariants: ``live`` is the resource as of ``revision``; the ring holds, in revision order, every
event with a revision in ``(floor, revision]``. ``generation`` changes when the window is rebuilt
from a fresh list (history lost), and every watcher of an older generation must start over.
"""

from __future__ import annotations

import asyncio

from apiserver.storage import interface, live


class Window:
    def __init__(self, prefix: str, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("window capacity must be at least 1")
        self.prefix = prefix
        self.capacity = capacity
        self.live = live.Live()
        self.revision = 0
        self.floor = 0
        self.generation = 0
        self.closed = False
        self.ready = asyncio.Event()
        self._slots: list[interface.Event | None] = [None] * capacity
        self._next = 0
        """Sequence number of the next event appended (the ring is indexed by sequence, since a
        resource's revisions are sparse in the store's revision space)."""
        self._changed = asyncio.Event()

    # -- feeding -----------------------------------------------------------------------------

    def reset(self, records: list[interface.Record], revision: int) -> None:
        """Start over from a full list read at ``revision``; older watchers must start over."""
        self.live = live.Live(records)
        self.revision = self.floor = revision
        self._slots = [None] * self.capacity
        self._next = 0
        self.generation += 1
        self.ready.set()
        self._wake()

    def apply(self, event: interface.Event) -> None:
        """Add one event of the backend watch (revision order, each once)."""
        record = event.record
        if record.revision <= self.revision:
            return
        self.live.apply(event)
        slot = self._next % self.capacity
        evicted = self._slots[slot]
        if evicted is not None:
            self.floor = evicted.record.revision
        self._slots[slot] = event
        self._next += 1
        self.revision = record.revision
        self._wake()

    def progress(self, revision: int) -> None:
        """The backend promised no event at or below ``revision`` is still to come."""
        if revision > self.revision:
            self.revision = revision
            self._wake()

    def forget(self, revision: int) -> None:
        """History at or below ``revision`` was compacted: watches must not start before it
        (a compaction newer than the window's revision leaves the window's own floor)."""
        self.floor = max(self.floor, min(revision, self.revision))

    def close(self) -> None:
        self.closed = True
        self._wake()

    # -- reading -----------------------------------------------------------------------------

    @property
    def first(self) -> int:
        """Sequence number of the oldest event still in the ring."""
        return max(0, self._next - self.capacity)

    @property
    def next(self) -> int:
        return self._next

    def page(self, prefix: str, limit: int) -> interface.Page:
        """Live records under ``prefix`` as of ``revision``, ordered by key."""
        return self.live.page(prefix, self.revision, limit=limit)

    def seek(self, after: int) -> int:
        """The sequence number of the first event with a revision above ``after``; requires
        ``after >= floor``."""
        low, high = self.first, self._next
        while low < high:
            middle = (low + high) // 2
            event = self._slots[middle % self.capacity]
            assert event is not None
            if event.record.revision <= after:
                low = middle + 1
            else:
                high = middle
        return low

    def since(self, sequence: int, prefix: str) -> list[interface.Event]:
        """Events from ``sequence`` on (still in the ring) whose key is under ``prefix``."""
        out: list[interface.Event] = []
        for number in range(sequence, self._next):
            event = self._slots[number % self.capacity]
            if event is not None and event.record.key.startswith(prefix):
                out.append(event)
        return out

    async def changed(self) -> None:
        """Return at the next change (an event, progress, a rebuild or the close)."""
        await self._changed.wait()

    def _wake(self) -> None:
        # set() resolves every current waiter's own future; clear() re-arms for the next change
        self._changed.set()
        self._changed.clear()

