"""A watch cache per resource in front of a shared backend (etcd), like kube-apiserver's cacher.

``Cache`` is an ``interface.Store`` wrapping another one. For each configured prefix (one per
resource) it lists once, then one backend watch feeds a ``window.Window``: the current objects and
a ring of recent events. Served from the window: ``list_recent`` (resourceVersion "0" and
NotOlderThan, unless the window has not reached the asked revision within ``FRESH_TIMEOUT``)
and every ``watch``/``updates`` whose start is inside the window, so a thousand watchers cost
one etcd watch. Served by the backend: gets, consistent and exact lists (etcd 3.4's
requested progress notifications cannot prove the cache current, see ``etcd.store.updates``),
writes, and watches starting before the window or falling behind its ring (the backend replays
them; etcd ends them with ``Compacted`` once that history is gone).

When the backend watch breaks, the backend store resumes it from the window's revision; when that
history was compacted, the window is rebuilt from a fresh list and every watcher served from it
ends with ``Compacted`` (HTTP 410), so clients relist, exactly as after a compaction upstream.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator, Sequence

from apiserver.storage import interface, window
from timing import backoff as backoffs

_log = logging.getLogger(__name__)

CAPACITY = 8192
"""Events kept per resource for watchers."""
FRESH_TIMEOUT = 0.25
"""How long a NotOlderThan list waits for the window to catch up before reading etcd instead.
Events reach the window within milliseconds; a window still behind after this is usually idle
while the revision moved on elsewhere (revisions are store-wide), which only a progress
notification would tell it (etcd sends those every few minutes)."""
_RETRY = backoffs.Backoff(0.1, 5.0)
"""A window's broken backend watch is opened again after this backoff (events start it over)."""

Update = interface.Event | interface.Progress


class Cache(interface.Store):
    def __init__(
        self,
        inner: interface.Store,
        prefixes: Sequence[str],
        *,
        capacity: int = CAPACITY,
        fresh_timeout: float = FRESH_TIMEOUT,
    ) -> None:
        self.inner = inner
        self.health_check = inner.health_check
        self.windows = {prefix: window.Window(prefix, capacity) for prefix in prefixes}
        self._fresh_timeout = fresh_timeout
        self._reflectors: list[asyncio.Task[None]] = []
        self._open = False

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        await self.inner.start()
        try:
            for each in self.windows.values():
                page = await self.inner.list(each.prefix)
                each.reset(page.records, page.revision)
        except BaseException:
            await self.inner.close()
            raise
        self._open = True
        self._reflectors = [asyncio.create_task(self._reflect(each))
                            for each in self.windows.values()]  # fmt: skip

    async def close(self) -> None:
        if not self._open:
            return
        self._open = False
        for each in self.windows.values():
            each.close()
        for task in self._reflectors:
            task.cancel()
        await asyncio.gather(*self._reflectors, return_exceptions=True)
        await self.inner.close()

    async def _reflect(self, each: window.Window) -> None:
        """Feed one window from one backend watch, for as long as the cache is open."""
        relist = False
        failures = 0
        while self._open:
            try:
                if relist:
                    page = await self.inner.list(each.prefix)
                    each.reset(page.records, page.revision)
                    _log.warning("watch cache of %s rebuilt at revision %d; its watchers "
                                 "start over", each.prefix, page.revision)  # fmt: skip
                    relist = False
                async for update in self.inner.updates(each.prefix, after=each.revision):
                    if isinstance(update, interface.Progress):
                        each.progress(update.revision)
                    else:
                        each.apply(update)
                    failures = 0
                return  # the backend closed
            except interface.Compacted:
                relist = True
            except interface.StorageError as exc:
                _log.warning("watch cache of %s: %s; retrying", each.prefix, exc)
                failures += 1
                await asyncio.sleep(_RETRY.delay(failures))

    def _window(self, prefix: str) -> window.Window | None:
        best: window.Window | None = None
        for each in self.windows.values():
            if prefix.startswith(each.prefix) and (best is None or
                                                   len(each.prefix) > len(best.prefix)):
                best = each
        return best

    # -- served by the backend ---------------------------------------------------------------

    async def check(self) -> None:
        await self.inner.check()

    async def current_revision(self) -> int:
        return await self.inner.current_revision()

    async def oldest_revision(self) -> int:
        return await self.inner.oldest_revision()

    async def get(self, key: str) -> interface.Record | None:
        return await self.inner.get(key)

    async def list(self, prefix: str, *, revision: int = 0, start_after: str = "",
                   limit: int = 0) -> interface.Page:
        return await self.inner.list(prefix, revision=revision, start_after=start_after,
                                     limit=limit)  # fmt: skip

    async def create(self, key: str, value: bytes) -> interface.Record:
        return await self.inner.create(key, value)

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> interface.Record:
        return await self.inner.update(key, value, expected_revision=expected_revision)

    async def delete(self, key: str, *, expected_revision: int) -> interface.Record:
        return await self.inner.delete(key, expected_revision=expected_revision)

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)
        for each in self.windows.values():
            each.forget(revision)  # what this store compacted, no watch may start before

    async def fence(self, revision: int) -> int:
        """The backend's fence, then every window starts over at its revision (its watchers end
        with Compacted); the windows' own backend watches, now compacted, rebuild them again."""
        reached = await self.inner.fence(revision)
        for each in self.windows.values():
            page = await self.inner.list(each.prefix)
            each.reset(page.records, page.revision)
        return reached

    # -- served from the windows -------------------------------------------------------------

    async def list_recent(self, prefix: str, *, not_older_than: int = 0, limit: int = 0,
                          wait: float = 0.0) -> interface.Page:
        each = self._window(prefix)
        if each is None or not self._open:
            return await self.inner.list_recent(prefix, not_older_than=not_older_than,
                                                limit=limit, wait=wait)  # fmt: skip
        if each.revision < not_older_than:
            try:
                async with asyncio.timeout(self._fresh_timeout):
                    while each.revision < not_older_than and not each.closed:
                        await each.changed()
            except TimeoutError:
                # a current list from etcd is as new as anything the client can have seen; a
                # revision newer than etcd's gets the rest of ``wait`` to be reached there
                rest = max(0.0, wait - self._fresh_timeout)
                return await self.inner.list_recent(prefix, not_older_than=not_older_than,
                                                    limit=limit, wait=rest)  # fmt: skip
        return each.page(prefix, limit)

    async def watch(self, prefix: str, *, after: int) -> AsyncIterator[interface.Event]:
        async for update in self._watch(prefix, after, progress=False):
            if isinstance(update, interface.Event):
                yield update

    def updates(self, prefix: str, *, after: int) -> AsyncIterator[Update]:
        return self._watch(prefix, after, progress=True)

    async def _watch(self, prefix: str, after: int, *, progress: bool) -> AsyncIterator[Update]:
        if after < 0:
            raise ValueError("after must not be negative")
        each = self._window(prefix)
        if each is None or after < each.floor or not self._open:
            async for update in self._backend(prefix, after, progress):
                yield update
            return
        generation = each.generation
        sequence = each.seek(after)
        cursor = after
        while not each.closed:
            if each.generation != generation:
                raise interface.Compacted(cursor, each.floor)
            if sequence < each.first:
                # fell behind the ring: the backend replays the rest of this watch
                async for update in self._backend(prefix, cursor, progress):
                    yield update
                return
            if sequence < each.next:
                batch = each.since(sequence, prefix)
                sequence = each.next
                for event in batch:
                    if event.record.revision > cursor:
                        cursor = event.record.revision
                        yield event
                continue
            if progress and each.revision > cursor:
                cursor = each.revision
                yield interface.Progress(cursor)
                continue
            threshold = cursor if progress else sys.maxsize
            while (each.next <= sequence and each.revision <= threshold
                   and each.generation == generation and not each.closed):  # fmt: skip
                await each.changed()

    def _backend(self, prefix: str, after: int, progress: bool) -> AsyncIterator[Update]:
        if progress:
            return self.inner.updates(prefix, after=after)
        return self.inner.watch(prefix, after=after)
