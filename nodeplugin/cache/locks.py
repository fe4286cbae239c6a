"""Per-digest locks shared by mounting and collection, and per-target locks for publish/unpublish.

Mounts of one digest take the digest's lock *shared*, so fifty Pods mounting one model do not wait
on each other; collection takes it *exclusive* to remove a tree, so a tree is never removed between
the check that it is published and the bind mount that uses it. Entries disappear when idle.

``exclusive_sections`` counts the exclusive sections ever entered: what was seen of a digest's tree
under its shared lock stays true while the count is unchanged (``cache.volumes`` skips the marker
check of a warm mount that way). The context managers are small classes rather than
``asynccontextmanager`` generators: a warm mount enters three of them, and a generator-based one
costs several times as much (each is an async generator registered with the event loop).
"""

from __future__ import annotations

import abc
import asyncio
from types import TracebackType


class _Entry:
    __slots__ = ("_cond", "readers", "users", "waiting_writers", "writer")

    def __init__(self) -> None:
        self._cond: asyncio.Condition | None = None
        self.readers = 0
        self.writer = False
        self.waiting_writers = 0
        self.users = 0

    @property
    def cond(self) -> asyncio.Condition:
        """Made when first needed: readers with no writer about never wait on it."""
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond


class DigestLocks:
    """A readers-writer lock per key; writers are preferred so collection is not starved."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self.exclusive_sections = 0
        """How many exclusive sections were entered (counted once each holds its lock)."""

    def _enter(self, key: str) -> _Entry:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        entry.users += 1
        return entry

    def _leave(self, key: str, entry: _Entry) -> None:
        entry.users -= 1
        if entry.users == 0:
            self._entries.pop(key, None)

    def shared(self, key: str) -> _Shared:
        return _Shared(self, key)

    def exclusive(self, key: str) -> _Exclusive:
        return _Exclusive(self, key)

    def __len__(self) -> int:
        return len(self._entries)


class _Section(abc.ABC):
    """One holder's section of a digest's lock: ``_acquire`` after the entry is taken,
    ``_release`` before it is left (the entry is left whatever happens)."""

    __slots__ = ("_entry", "_key", "_table")

    def __init__(self, table: DigestLocks, key: str) -> None:
        self._table = table
        self._key = key
        self._entry: _Entry | None = None

    async def __aenter__(self) -> None:
        entry = self._entry = self._table._enter(self._key)
        try:
            await self._acquire(entry)
        except BaseException:
            self._table._leave(self._key, entry)
            raise

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        entry = self._entry
        assert entry is not None
        try:
            await self._release(entry)
        finally:
            self._table._leave(self._key, entry)

    @abc.abstractmethod
    async def _acquire(self, entry: _Entry) -> None:
        """Take the entry's lock for this kind of holder (waiting as long as it takes)."""

    @abc.abstractmethod
    async def _release(self, entry: _Entry) -> None:
        """Give it back, waking whoever waits for it."""


class _Shared(_Section):
    __slots__ = ()

    async def _acquire(self, entry: _Entry) -> None:
        if not entry.writer and not entry.waiting_writers:
            # No writer holds or wants it: one event loop, nothing in between, no waiting.
            entry.readers += 1
            return
        async with entry.cond:
            await entry.cond.wait_for(lambda: not entry.writer and not entry.waiting_writers)
            entry.readers += 1

    async def _release(self, entry: _Entry) -> None:
        entry.readers -= 1
        if not entry.readers and entry.waiting_writers:
            async with entry.cond:
                entry.cond.notify_all()


class _Exclusive(_Section):
    __slots__ = ()

    async def _acquire(self, entry: _Entry) -> None:
        async with entry.cond:
            entry.waiting_writers += 1
            try:
                await entry.cond.wait_for(lambda: not entry.writer and not entry.readers)
            finally:
                entry.waiting_writers -= 1
            entry.writer = True
            self._table.exclusive_sections += 1

    async def _release(self, entry: _Entry) -> None:
        async with entry.cond:
            entry.writer = False
            entry.cond.notify_all()


class KeyedLock:
    """A mutex per key (a target path), dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    def hold(self, key: str) -> _Hold:
        return _Hold(self, key)

    def __len__(self) -> int:
        return len(self._locks)


class _Hold:
    __slots__ = ("_key", "_table")

    def __init__(self, table: KeyedLock, key: str) -> None:
        self._table = table
        self._key = key

    async def __aenter__(self) -> None:
        held = self._table._locks.get(self._key)
        if held is None:
            held = self._table._locks[self._key] = (asyncio.Lock(), [0])
        held[1][0] += 1
        try:
            await held[0].acquire()
        except BaseException:
            self._drop(held)
            raise

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        held = self._table._locks[self._key]
        held[0].release()
        self._drop(held)

    def _drop(self, held: tuple[asyncio.Lock, list[int]]) -> None:
        held[1][0] -= 1
        if held[1][0] == 0:
            self._table._locks.pop(self._key, None)
