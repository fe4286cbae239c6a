"""The watch cache over a real etcd: what it serves itself, what it leaves to etcd, and how it
starts over. (The storage contract it also meets is in test_contract.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import re
from collections.abc import AsyncIterator

import httpx
import pytest

from apiserver.storage import interface, watchcache
from apiserver.storage.etcd import client as etcd_client
from apiserver.storage.etcd import store as etcd_store
from devkit.harness import etcd

PATIENCE = 30.0
PREFIX = "/things/"


def _config(member: etcd.Etcd, **overrides: float) -> etcd_client.Config:
    return etcd_client.Config(endpoints=(member.url,), prefix="/cache-test", **overrides)


@pytest.fixture
async def cache(etcd_server: etcd.Etcd) -> AsyncIterator[watchcache.Cache]:
    store = watchcache.Cache(
        etcd_store.Store(_config(etcd_server, request_timeout=1.0, health_timeout=0.5),
                         compaction_interval=0),
        [PREFIX], fresh_timeout=0.3,
    )  # fmt: skip
    await store.start()
    try:
        yield store
    finally:
        etcd_server.resume()
        await store.close()


def etcd_watchers(member: etcd.Etcd) -> int:
    text = httpx.get(f"{member.url}/metrics", timeout=5).text
    found = re.search(r"^etcd_debugging_mvcc_watcher_total (\d+)", text, re.M)
    assert found is not None
    return int(found.group(1))


async def take(stream: AsyncIterator[interface.Event], count: int) -> list[interface.Event]:
    out: list[interface.Event] = []
    async with asyncio.timeout(PATIENCE):
        async for event in stream:
            out.append(event)
            if len(out) == count:
                break
    return out


async def test_recent_lists_come_from_memory_consistent_lists_from_etcd(
    cache: watchcache.Cache, etcd_server: etcd.Etcd
) -> None:
    written = [await cache.create(f"{PREFIX}{i}", b"v") for i in range(3)]
    async with asyncio.timeout(PATIENCE):
        while cache.windows[PREFIX].revision < written[-1].revision:
            await cache.windows[PREFIX].changed()
    etcd_server.pause()  # etcd answers nothing from here on
    page = await cache.list_recent(PREFIX)
    assert page.records == written and page.revision >= written[-1].revision
    first = await cache.list_recent(PREFIX, limit=2)
    assert (first.records, first.more, first.remaining) == (written[:2], True, 1)
    with pytest.raises(interface.Timeout):
        await cache.list(PREFIX)  # a consistent read needs etcd


async def test_a_thousand_watchers_cost_one_etcd_watch(
    cache: watchcache.Cache, etcd_server: etcd.Etcd
) -> None:
    start = await cache.current_revision()
    streams = [cache.watch(PREFIX, after=start) for _ in range(1000)]
    pending = [asyncio.ensure_future(anext(stream)) for stream in streams]
    record = await cache.create(f"{PREFIX}a", b"v")
    done = await asyncio.wait_for(asyncio.gather(*pending), PATIENCE)
    assert {event.record for event in done} == {record}
    assert etcd_watchers(etcd_server) == 1  # the window's own feed
    for stream in streams:
        await stream.aclose()  # type: ignore[attr-defined]


async def test_a_watch_from_before_the_window_is_replayed_by_etcd(
    cache: watchcache.Cache, etcd_server: etcd.Etcd
) -> None:
    # the window began when the cache started; older history only etcd has
    before = await cache.create("/elsewhere/x", b"v")  # not under the cached prefix
    early = await cache.create(f"{PREFIX}early", b"1")
    assert cache.windows[PREFIX].floor < early.revision
    late = await cache.update(f"{PREFIX}early", b"2", expected_revision=early.revision)
    replay = cache.watch(PREFIX, after=0)
    assert [e.record for e in await take(replay, 2)] == [early, late]
    assert etcd_watchers(etcd_server) == 2  # the feed and this replay
    await replay.aclose()  # type: ignore[attr-defined]
    outside = cache.watch("/elsewhere/", after=0)  # no window for this prefix at all
    assert [e.record for e in await take(outside, 1)] == [before]
    await outside.aclose()  # type: ignore[attr-defined]


async def test_not_older_than_waits_for_the_window_then_reads_etcd(
    cache: watchcache.Cache,
) -> None:
    record = await cache.create(f"{PREFIX}x", b"v")
    page = await cache.list_recent(PREFIX, not_older_than=record.revision)  # waits for the feed
    assert page.records == [record]
    # the window is idle while the revision moves on elsewhere: etcd answers instead
    moved = await cache.create("/elsewhere/y", b"v")
    assert cache.windows[PREFIX].revision < moved.revision
    fresh = await cache.list_recent(PREFIX, not_older_than=moved.revision)
    assert fresh.records == [record] and fresh.revision >= moved.revision
    # newer than etcd itself: no state that new exists
    with pytest.raises(interface.FutureRevision) as caught:
        await cache.list_recent(PREFIX, not_older_than=moved.revision + 100)
    assert caught.value.requested == moved.revision + 100


async def test_progress_notifications_move_an_idle_watch_on(tmp_path: pathlib.Path) -> None:
    with etcd.running(tmp_path / "etcd", progress_interval=0.2) as member:
        store = watchcache.Cache(etcd_store.Store(_config(member), compaction_interval=0),
                                 [PREFIX])  # fmt: skip
        await store.start()
        try:
            start = await store.current_revision()
            updates = store.updates(PREFIX, after=start)
            # writes elsewhere move etcd's revision; nothing happens under PREFIX
            other = [await store.create(f"/other/{i}", b"v") for i in range(3)]
            async with asyncio.timeout(PATIENCE):
                async for update in updates:
                    assert isinstance(update, interface.Progress)
                    if update.revision >= other[-1].revision:
                        break
            mine = await store.create(f"{PREFIX}now", b"v")
            async with asyncio.timeout(PATIENCE):
                async for update in updates:
                    if isinstance(update, interface.Event):
                        assert update.record == mine
                        break
                    assert update.revision < mine.revision
            await updates.aclose()  # type: ignore[attr-defined]
        finally:
            await store.close()


class Interrupting(etcd_store.Store):
    """The real etcd store, whose watch feed is cancelled as compacted when ``cut`` is set (what
    etcd does to a watch that fell behind a compaction)."""

    def __init__(self, config: etcd_client.Config) -> None:
        super().__init__(config, compaction_interval=0)
        self.cut = asyncio.Event()
        self.feeds = 0

    async def updates(self, prefix: str, *,
                      after: int) -> AsyncIterator[interface.Event | interface.Progress]:
        self.feeds += 1
        feed = super().updates(prefix, after=after)
        cut = asyncio.ensure_future(self.cut.wait())
        try:
            while True:
                step = asyncio.ensure_future(anext(feed))
                await asyncio.wait([step, cut], return_when=asyncio.FIRST_COMPLETED)
                if cut.done() and self.feeds == 1:
                    step.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await step
                    raise interface.Compacted(after, after + 1)
                yield await step
        finally:
            cut.cancel()
            await feed.aclose()  # type: ignore[attr-defined]


async def test_a_compacted_feed_rebuilds_the_window_and_ends_its_watchers(
    etcd_server: etcd.Etcd,
) -> None:
    inner = Interrupting(_config(etcd_server))
    store = watchcache.Cache(inner, [PREFIX])
    await store.start()
    try:
        kept = await store.create(f"{PREFIX}kept", b"v")
        watching = store.watch(PREFIX, after=kept.revision - 1)
        assert [e.record for e in await take(watching, 1)] == [kept]
        generation = store.windows[PREFIX].generation
        inner.cut.set()
        with pytest.raises(interface.Compacted):
            await take(watching, 1)
        assert store.windows[PREFIX].generation == generation + 1
        later = await store.create(f"{PREFIX}later", b"v")
        page = await store.list_recent(PREFIX, not_older_than=later.revision)
        assert page.records == [kept, later]  # the new window has everything, fed again
        assert inner.feeds == 2
    finally:
        await store.close()
