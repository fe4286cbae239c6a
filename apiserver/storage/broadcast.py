"""In-process fan-out of committed events to every watcher of one store.

One ring of the most recent events, indexed by revision, shared by all watchers; each watcher keeps
only its own cursor. Publishing never waits for a consumer, so a slow watcher cannot block writers
nor make memory grow: once it falls behind the ring it must catch up elsewhere (the SQLite store
reads its log). A waiting watcher names its key prefix and is woken only by an event under it:
a node plugin watching its own NodeModelStore (the registry narrows a watch whose field selector
names one object to that object's key) is not woken by every other node's write, which with a
thousand plugins made each status write wake a thousand watchers (docs/fleet.md, "The wake-up
wall"). All methods run on the event loop thread.
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
        self._waiting: dict[str, list[asyncio.Future[int | None]]] = {}
        """Waiters by the key prefix they wait on."""
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
        gap = revision != self._last + 1
        if gap:
            # A gap (revisions committed but never published) would make slot arithmetic lie;
            # restart the ring so readers fetch the gap from the log instead.
            self._first = revision
        self._slots[revision % self._capacity] = event
        self._last = revision
        if self._last - self._first >= self._capacity:
            self._first = self._last - self._capacity + 1
        if gap:
            self._wake()  # what the gap held is unknown: every waiter looks
        else:
            self._wake_under(event.record.key, revision)

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

    async def wait(self, cursor: int, prefix: str = "") -> int | None:
        """Return once an event under ``prefix`` after ``cursor`` is published: its revision,
        so every revision between ``cursor`` and it held nothing under ``prefix``. None when
        that is not known: a revision after ``cursor`` was published already, or the ring
        restarted, skipped a gap or closed (the caller looks at what it has)."""
        if self._last > cursor or self._closed:
            return None
        waiter: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(prefix, []).append(waiter)
        try:
            return await waiter
        finally:
            # a watcher gone while waiting (its future cancelled) leaves no entry behind; a
            # woken one's list was taken out already
            current = self._waiting.get(prefix)
            if current is not None and waiter in current:
                current.remove(waiter)
                if not current:
                    del self._waiting[prefix]

    def close(self) -> None:
        self._closed = True
        self._wake()

    def waiting(self) -> int:
        """How many watchers wait (for tests and metrics)."""
        return sum(len(each) for each in self._waiting.values())

    def _wake_under(self, key: str, revision: int) -> None:
        for prefix in [p for p in self._waiting if key.startswith(p)]:
            for waiter in self._waiting.pop(prefix):
                if not waiter.done():
                    waiter.set_result(revision)

    def _wake(self) -> None:
        # Each waiter has its own future, so a cancelled watcher cannot cancel the others.
        waiting, self._waiting = self._waiting, {}
        for waiters in waiting.values():
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
