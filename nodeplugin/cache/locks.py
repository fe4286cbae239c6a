"""Per-digest locks shared by mounting and collection, and per-target locks for publish/unpublish.

Mounts of one digest take the digest's lock *shared*, so fifty Pods mounting one model do not wait
on each other; collection takes it *exclusive* to remove a tree, so a tree is never removed between
the check that it is published and the bind mount that uses it. Entries disappear when idle.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class _Entry:
    __slots__ = ("cond", "readers", "users", "waiting_writers", "writer")

    def __init__(self) -> None:
        self.cond = asyncio.Condition()
        self.readers = 0
        self.writer = False
        self.waiting_writers = 0
        self.users = 0


class DigestLocks:
    """A readers-writer lock per key; writers are preferred so collection is not starved."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

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

    @asynccontextmanager
    async def shared(self, key: str) -> AsyncIterator[None]:
        entry = self._enter(key)
        try:
            if entry.writer or entry.waiting_writers:
                async with entry.cond:
                    await entry.cond.wait_for(
                        lambda: not entry.writer and not entry.waiting_writers
                    )
                    entry.readers += 1
            else:
                # No writer holds or wants it: one event loop, nothing in between, no waiting.
                entry.readers += 1
            try:
                yield
            finally:
                entry.readers -= 1
                if not entry.readers and entry.waiting_writers:
                    async with entry.cond:
                        entry.cond.notify_all()
        finally:
            self._leave(key, entry)

    @asynccontextmanager
    async def exclusive(self, key: str) -> AsyncIterator[None]:
        entry = self._enter(key)
        try:
            async with entry.cond:
                entry.waiting_writers += 1
                try:
                    await entry.cond.wait_for(lambda: not entry.writer and not entry.readers)
                finally:
                    entry.waiting_writers -= 1
                entry.writer = True
            try:
                yield
            finally:
                async with entry.cond:
                    entry.writer = False
                    entry.cond.notify_all()
        finally:
            self._leave(key, entry)

    def __len__(self) -> int:
        return len(self._entries)


class KeyedLock:
    """A mutex per key (a target path), dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.setdefault(key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if users[0] == 0:
                self._locks.pop(key, None)

    def __len__(self) -> int:
        return len(self._locks)
