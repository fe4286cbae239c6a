"""In-process fan-out of committed events to every watcher of one store.

One ring of the most recent events, indexed by revision, shared by all watchers; each watcher keeps
only its own cursor. Publishing is O(1) and never waits for a consumer, so a slow watcher cannot
block writers nor make memory grow: once it falls behind the ring it must catch up elsewhere (the
SQLite store reads its log). All methods run on the event loop thread.
"""

from __future__ import annotations

import asyncio

from apiserver.storage import interface


class Ring:
    """The last ``capacity`` events in revision order plus a wake-up signal for waiters."""

    def __init__(self, capacity: int, *, last: int) -> None:
        if capacity < 1:
            raise ValueError("ring capacity must be at least 1")
        self._slots: list[interface.Event | None] = [None] * capacity
        self._capacity = capacity
        self._first = last + 1
        """Revision of the oldest event held; ``last + 1`` when the ring is empty."""
        self._last = last
        """The newest published revision: every revision up to it is committed."""
        self._changed = asyncio.Event()
        self._closed = False

    @property
    def first(self) -> int:
        return self._first

    @property
    def last(self) -> int:
        return self._last

    @property
    def closed(self) -> bool:
        return self._closed

    def publish(self, event: interface.Event) -> None:
        """Add the event of a commit; events arrive in revision order."""
        revision = event.record.revision
        if revision <= self._last:
            return
        if revision != self._last + 1:
            # A gap (revisions committed but never published) would make slot arithmetic lie;
            # restart the ring so readers fetch the gap from the log instead.
            self._first = revision
        self._slots[revision % self._capacity] = event
        self._last = revision
        if self._last - self._first >= self._capacity:
            self._first = self._last - self._capacity + 1
        self._wake()

    def restart(self, last: int) -> None:
        """Forget every held event and continue at ``last``: the events up to it are not known
        here (one of ``--processes N`` that fell behind compacted history reloaded the state),
        so a watcher before it must read the log, which answers Compacted."""
        if last <= self._last:
            return
        self._first = last + 1
        self._last = last
        self._wake()

    def covers(self, cursor: int) -> bool:
        """True when every event after ``cursor`` (up to ``last``) is in the ring."""
        return cursor + 1 >= self._first

    def since(self, cursor: int, prefix: str) -> list[interface.Event]:
        """Events after ``cursor`` whose key starts with ``prefix``; requires covers(cursor)."""
        out: list[interface.Event] = []
        for revision in range(cursor + 1, self._last + 1):
            event = self._slots[revision % self._capacity]
            if event is not None and event.record.key.startswith(prefix):
                out.append(event)
        return out

    async def wait(self, cursor: int) -> None:
        """Return once a revision after ``cursor`` is published or the ring is closed."""
        while self._last <= cursor and not self._closed:
            await self._changed.wait()

    def close(self) -> None:
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        # set() resolves every current waiter's own future; clear() re-arms for the next publish.
        # Waiters never share one future, so a cancelled watcher cannot cancel the others.
        self._changed.set()
        self._changed.clear()
