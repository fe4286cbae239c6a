"""Two shared SQLite stores on one file, seen as one ``interface.Store`` by the contract suite.

Writes alternate between the two; every read, watch and compaction goes to the store that did
*not* make the last write, so each assertion of the suite also checks that a write acknowledged
by one store is what the other answers at once (the ``--workers`` guarantee), and each writer
keeps finding the other's commits before its own.
"""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator

from apiserver.storage import interface, sqlite


class Pair(interface.Store):
    def __init__(self, path: pathlib.Path, *, ring: int) -> None:
        self.stores = (sqlite.Store(path, ring=ring, shared=True),
                       sqlite.Store(path, ring=ring, shared=True))  # fmt: skip
        self._writes = 0

    @property
    def _writer(self) -> interface.Store:
        self._writes += 1
        return self.stores[self._writes % 2]

    @property
    def _reader(self) -> interface.Store:
        return self.stores[(self._writes + 1) % 2]

    async def start(self) -> None:
        for store in self.stores:
            await store.start()

    async def close(self) -> None:
        for store in self.stores:
            await store.close()

    async def current_revision(self) -> int:
        return await self._reader.current_revision()

    async def oldest_revision(self) -> int:
        return await self._reader.oldest_revision()

    async def get(self, key: str) -> interface.Record | None:
        return await self._reader.get(key)

    async def list(self, prefix: str, *, revision: int = 0, start_after: str = "",
                   limit: int = 0) -> interface.Page:
        return await self._reader.list(prefix, revision=revision, start_after=start_after,
                                       limit=limit)  # fmt: skip

    async def create(self, key: str, value: bytes) -> interface.Record:
        return await self._writer.create(key, value)

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> interface.Record:
        return await self._writer.update(key, value, expected_revision=expected_revision)

    async def delete(self, key: str, *, expected_revision: int) -> interface.Record:
        return await self._writer.delete(key, expected_revision=expected_revision)

    def watch(self, prefix: str, *, after: int) -> AsyncIterator[interface.Event]:
        return self._reader.watch(prefix, after=after)

    async def compact(self, revision: int) -> None:
        await self._reader.compact(revision)

    async def fence(self, revision: int) -> int:
        return await self._writer.fence(revision)
