"""The storage contract suite: every backend of ``interface.Store`` must pass it unchanged.

Add a backend by adding a parameter to the ``store`` fixture.
"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from apiserver.registry import statuses
from apiserver.storage import interface, sqlite, watchcache
from apiserver.storage.etcd import client as etcd_client
from apiserver.storage.etcd import store as etcd_store
from devkit.harness import etcd
from tests.support import toolarge
from tests.unit.apiserver.storage import shared_pair

# Generous bounds so a loaded CI machine never fails a correct store; they only turn a hang
# (a lost event, a blocked writer) into a failure.
_PATIENCE = 30.0


@pytest_asyncio.fixture(params=["sqlite", "sqlite-shared", "etcd", "etcd-cached"])
async def store(
    request: pytest.FixtureRequest, tmp_path: pathlib.Path
) -> AsyncIterator[interface.Store]:
    backend: interface.Store
    if request.param == "sqlite":
        # A small ring so the suite also crosses the "watcher behind the ring" path.
        backend = sqlite.Store(tmp_path / "store.db", ring=64)
    elif request.param == "sqlite-shared":
        # ``--workers``: two stores on one file, writes on one, reads on the other in turn.
        backend = shared_pair.Pair(tmp_path / "store.db", ring=64)
    elif request.param == "etcd":
        member: etcd.Etcd = request.getfixturevalue("etcd_server")
        config = etcd_client.Config(endpoints=(member.url,), prefix="/contract")
        backend = etcd_store.Store(config, compaction_interval=0)
    elif request.param == "etcd-cached":
        # The watch cache over etcd, one window over every key, with a small ring so the suite
        # also crosses the "watcher behind the ring" path.
        member = request.getfixturevalue("etcd_server")
        config = etcd_client.Config(endpoints=(member.url,), prefix="/contract")
        backend = watchcache.Cache(etcd_store.Store(config, compaction_interval=0), [""],
                                   capacity=64)
    else:  # pragma: no cover - a new backend must be wired here
        raise AssertionError(request.param)
    await backend.start()
    try:
        yield backend
    finally:
        await backend.close()


async def collect(
    store: interface.Store, prefix: str, after: int, count: int
) -> list[interface.Event]:
    """The first ``count`` events of a watch (fails on a hang rather than blocking forever)."""
    events: list[interface.Event] = []

    async def run() -> None:
        async for event in store.watch(prefix, after=after):
            events.append(event)
            if len(events) == count:
                return

    await asyncio.wait_for(run(), _PATIENCE)
    return events


# -- create / get / update / delete ---------------------------------------------------------


async def test_a_fresh_store_starts_at_a_real_revision(store: interface.Store) -> None:
    # Like etcd: an empty store answers a revision >= 1, since "0" means "any state" to a
    # Kubernetes client; nothing written to get there shows in any list or watch.
    start = await store.current_revision()
    assert start >= 1
    assert await store.oldest_revision() < start
    everything = await store.list("")
    assert everything.records == [] and everything.revision == start
    record = await store.create("/a/x", b"one")
    assert record.revision == start + 1
    assert [e.record for e in await collect(store, "", 0, 1)] == [record]


async def test_create_then_get(store: interface.Store) -> None:
    before = await store.current_revision()
    record = await store.create("/a/x", b"one")
    assert record == interface.Record("/a/x", b"one", record.revision, record.revision)
    assert record.revision > before
    assert await store.current_revision() == record.revision
    assert await store.get("/a/x") == record
    assert await store.get("/a/missing") is None


async def test_create_existing_key_is_refused(store: interface.Store) -> None:
    await store.create("/a/x", b"one")
    with pytest.raises(interface.KeyExists):
        await store.create("/a/x", b"two")
    record = await store.get("/a/x")
    assert record is not None and record.value == b"one"


async def test_update_needs_the_current_revision(store: interface.Store) -> None:
    created = await store.create("/a/x", b"one")
    updated = await store.update("/a/x", b"two", expected_revision=created.revision)
    assert updated.value == b"two"
    assert updated.revision > created.revision
    assert updated.create_revision == created.revision
    with pytest.raises(interface.RevisionConflict) as caught:
        await store.update("/a/x", b"three", expected_revision=created.revision)
    assert (caught.value.expected, caught.value.actual) == (created.revision, updated.revision)
    assert await store.get("/a/x") == updated


async def test_update_missing_key(store: interface.Store) -> None:
    with pytest.raises(interface.KeyNotFound):
        await store.update("/a/x", b"v", expected_revision=1)


async def test_delete_returns_last_value_at_the_deletion_revision(store: interface.Store) -> None:
    created = await store.create("/a/x", b"one")
    with pytest.raises(interface.RevisionConflict):
        await store.delete("/a/x", expected_revision=created.revision + 100)
    deleted = await store.delete("/a/x", expected_revision=created.revision)
    assert deleted.key == "/a/x"
    assert deleted.value == b"one"
    assert deleted.revision > created.revision
    assert deleted.create_revision == created.revision
    assert await store.current_revision() == deleted.revision
    assert await store.get("/a/x") is None
    with pytest.raises(interface.KeyNotFound):
        await store.delete("/a/x", expected_revision=deleted.revision)
    with pytest.raises(interface.KeyNotFound):
        await store.update("/a/x", b"two", expected_revision=deleted.revision)


async def test_recreate_after_delete_starts_a_new_life(store: interface.Store) -> None:
    first = await store.create("/a/x", b"one")
    await store.delete("/a/x", expected_revision=first.revision)
    second = await store.create("/a/x", b"two")
    assert second.create_revision == second.revision > first.revision
    assert await store.get("/a/x") == second


async def test_revisions_are_store_wide_and_increasing(store: interface.Store) -> None:
    seen = [(await store.create(f"/k/{i}", b"v")).revision for i in range(5)]
    assert seen == sorted(set(seen))


# -- list --------------------------------------------------------------------------------


async def test_list_is_ordered_by_key_and_filtered_by_prefix(store: interface.Store) -> None:
    for key in ["/a/c", "/a/a", "/ab/z", "/a/b", "/b/a"]:
        await store.create(key, key.encode())
    gone = await store.get("/a/b")
    assert gone is not None
    await store.delete("/a/b", expected_revision=gone.revision)
    page = await store.list("/a/")
    assert [r.key for r in page.records] == ["/a/a", "/a/c"]
    assert [r.value for r in page.records] == [b"/a/a", b"/a/c"]
    assert page.revision == await store.current_revision()
    assert (page.more, page.remaining) == (False, 0)
    everything = await store.list("")
    assert [r.key for r in everything.records] == ["/a/a", "/a/c", "/ab/z", "/b/a"]


async def test_list_pages_at_one_revision(store: interface.Store) -> None:
    for i in range(5):
        await store.create(f"/p/{i}", b"v")
    first = await store.list("/p/", limit=2)
    assert [r.key for r in first.records] == ["/p/0", "/p/1"]
    assert (first.more, first.remaining) == (True, 3)
    # Writes between pages do not change what later pages at the same revision show.
    await store.create("/p/9", b"new")
    rec = await store.get("/p/3")
    assert rec is not None
    await store.delete("/p/3", expected_revision=rec.revision)
    second = await store.list(
        "/p/", revision=first.revision, start_after=first.records[-1].key, limit=2
    )
    assert [r.key for r in second.records] == ["/p/2", "/p/3"]
    assert (second.more, second.remaining) == (True, 1)
    assert second.revision == first.revision
    third = await store.list(
        "/p/", revision=first.revision, start_after=second.records[-1].key, limit=2
    )
    assert [r.key for r in third.records] == ["/p/4"]
    assert (third.more, third.remaining) == (False, 0)
    now = await store.list("/p/", start_after="/p/2")
    assert [r.key for r in now.records] == ["/p/4", "/p/9"]


async def test_list_at_a_past_revision(store: interface.Store) -> None:
    a1 = await store.create("/r/a", b"a1")
    b1 = await store.create("/r/b", b"b1")
    past = await store.current_revision()
    await store.update("/r/a", b"a2", expected_revision=a1.revision)
    await store.delete("/r/b", expected_revision=b1.revision)
    await store.create("/r/c", b"c1")
    then = await store.list("/r/", revision=past)
    assert then.records == [a1, b1]
    assert then.revision == past
    before_b = await store.list("/r/", revision=a1.revision)
    assert before_b.records == [a1]


async def test_list_in_the_future_is_refused(store: interface.Store) -> None:
    await store.create("/f/a", b"v")
    current = await store.current_revision()
    with pytest.raises(interface.FutureRevision) as caught:
        await store.list("/f/", revision=current + 1)
    assert caught.value.current == current


async def test_a_list_from_a_future_revision_answers_like_kube_apiserver(
        store: interface.Store) -> None:
    # tests/data/kube-samples/resource-version-too-large.json: a list at that exact revision
    # (Exact, or a page) is refused at once; one that any newer state would do (NotOlderThan)
    # waits for it first, then is refused with retryAfterSeconds and Retry-After
    await store.create("/f/a", b"v")
    current = await store.current_revision()
    future = current + 1000
    with pytest.raises(interface.FutureRevision) as exact:
        await store.list("/f/", revision=future)
    refused = statuses.from_storage(exact.value)
    assert refused.body() == toolarge.status(toolarge.CACHED["list-exact"], future, current)
    assert refused.headers.get("Retry-After") == toolarge.retry_after(
        toolarge.CACHED["list-exact"]) is None
    with pytest.raises(interface.FutureRevision) as recent:
        await store.list_recent("/f/", not_older_than=future, wait=0.05)
    refused = statuses.from_storage(recent.value)
    answer = toolarge.CACHED["list-notolderthan"]
    assert refused.body() == toolarge.status(answer, future, current)
    assert refused.headers.get("Retry-After") == toolarge.retry_after(answer) == "1"


async def test_a_list_waits_for_a_revision_the_store_reaches_in_time(
        store: interface.Store) -> None:
    before = await store.current_revision()
    waiting = asyncio.ensure_future(
        store.list_recent("/w/", not_older_than=before + 1, wait=_PATIENCE))
    await asyncio.sleep(0.05)
    record = await store.create("/w/a", b"v")
    page = await asyncio.wait_for(waiting, _PATIENCE)
    assert page.revision >= record.revision and record in page.records


async def test_a_watch_from_a_future_revision_waits_then_sends_what_follows_it(
        store: interface.Store) -> None:
    # as kube-apiserver (the recording's "watch" and "watch-then-writes"): no error, nothing
    # until the store passes that revision, then only what happens after it
    current = await store.current_revision()
    after = current + 2
    events = asyncio.ensure_future(collect(store, "/q/", after, 2))
    updates: list[interface.Event | interface.Progress] = []

    async def follow() -> None:
        async for update in store.updates("/q/", after=after):
            updates.append(update)
            if sum(isinstance(u, interface.Event) for u in updates) == 2:
                return

    following = asyncio.ensure_future(asyncio.wait_for(follow(), _PATIENCE))
    await asyncio.sleep(0.3)
    assert not events.done() and not updates  # silent while the store is behind
    written = [await store.create(f"/q/{n}", b"v") for n in "abcd"]
    assert [e.record for e in await events] == written[2:]
    await following
    assert [u.record for u in updates if isinstance(u, interface.Event)] == written[2:]
    assert all(u.revision > after for u in updates if isinstance(u, interface.Progress))


async def test_a_fence_continues_above_a_revision_and_expires_all_history(
        store: interface.Store) -> None:
    # what the server does at start with a store behind its revision mark (apiserver/storage/
    # marks.py): the live records stay, numbering goes on above the mark, and every earlier
    # revision is compacted, so a client holding one lists again (410)
    a = await store.create("/g/a", b"a1")
    b = await store.create("/g/b", b"b1")
    a2 = await store.update("/g/a", b"a2", expected_revision=a.revision)
    before = await store.current_revision()
    reached = await store.fence(before + 100)
    assert reached >= before + 100
    assert await store.current_revision() >= reached
    assert await store.oldest_revision() == reached
    now = await store.list("/g/")
    assert now.records == [a2, b] and now.revision >= reached
    assert await store.get("/g/a") == a2
    for old in (before, before + 50, reached - 1):
        with pytest.raises(interface.Compacted):
            await store.list("/g/", revision=old)
    for old in (before, before + 50):  # (etcd still replays from F itself: after F - 1)
        with pytest.raises(interface.Compacted):
            await collect(store, "/g/", old, 1)
    at = await store.list("/g/", revision=reached)
    assert at.records == [a2, b]
    c = await store.create("/g/c", b"c1")
    assert c.revision > reached
    assert [e.record for e in await collect(store, "/g/", reached, 1)] == [c]
    again = await store.fence(reached - 10)  # behind the store: nothing moves back
    assert again >= c.revision and await store.get("/g/c") == c


async def test_compaction_forgets_history_but_keeps_live_records(store: interface.Store) -> None:
    a = await store.create("/c/a", b"a1")
    b = await store.create("/c/b", b"b1")
    a2 = await store.update("/c/a", b"a2", expected_revision=a.revision)
    await store.delete("/c/b", expected_revision=b.revision)
    mark = await store.current_revision()
    await store.create("/c/c", b"c1")
    await store.compact(mark)
    assert await store.oldest_revision() == mark
    with pytest.raises(interface.Compacted) as caught:
        await store.list("/c/", revision=mark - 1)
    assert (caught.value.requested, caught.value.oldest) == (mark - 1, mark)
    at_mark = await store.list("/c/", revision=mark)
    assert at_mark.records == [a2]
    assert await store.get("/c/a") == a2
    assert [r.key for r in (await store.list("/c/")).records] == ["/c/a", "/c/c"]
    a3 = await store.update("/c/a", b"a3", expected_revision=a2.revision)
    assert a3.revision > await store.oldest_revision()


async def test_compacting_everything_keeps_revisions_increasing(store: interface.Store) -> None:
    x = await store.create("/m/x", b"v")
    deleted = await store.delete("/m/x", expected_revision=x.revision)
    await store.compact(deleted.revision)
    assert await store.current_revision() == deleted.revision
    again = await store.create("/m/x", b"w")
    assert again.revision > deleted.revision


# -- watch -------------------------------------------------------------------------------


async def test_watch_replays_history_in_order_with_previous(store: interface.Store) -> None:
    start = await store.current_revision()
    a1 = await store.create("/w/a", b"a1")
    a2 = await store.update("/w/a", b"a2", expected_revision=a1.revision)
    gone = await store.delete("/w/a", expected_revision=a2.revision)
    events = await collect(store, "/w/", start, 3)
    assert [e.type for e in events] == [
        interface.EventType.PUT,
        interface.EventType.PUT,
        interface.EventType.DELETE,
    ]
    assert [e.record for e in events] == [a1, a2, gone]
    assert [e.previous for e in events] == [None, a1, a2]
    assert events[2].record.value == b"a2"


async def test_watch_resumes_after_a_revision(store: interface.Store) -> None:
    a1 = await store.create("/w/a", b"a1")
    b1 = await store.create("/w/b", b"b1")
    events = await collect(store, "/w/", a1.revision, 1)
    assert [e.record for e in events] == [b1]


async def test_watch_sees_live_events_under_its_prefix(store: interface.Store) -> None:
    start = await store.current_revision()
    watching = asyncio.create_task(collect(store, "/live/", start, 3))
    await asyncio.sleep(0)  # let the watch start before the writes (either order must work)
    x = await store.create("/live/x", b"1")
    await store.create("/other/x", b"ignored")
    await store.create("/livex", b"ignored: not under the prefix '/live/'")
    x2 = await store.update("/live/x", b"2", expected_revision=x.revision)
    y = await store.create("/live/y", b"3")
    events = await watching
    assert [e.record for e in events] == [x, x2, y]
    assert [e.previous for e in events] == [None, x, None]


async def test_watch_from_a_compacted_revision_fails(store: interface.Store) -> None:
    first = await store.create("/z/a", b"1")
    second = await store.update("/z/a", b"2", expected_revision=first.revision)
    await store.compact(second.revision)
    with pytest.raises(interface.Compacted):
        await collect(store, "/z/", first.revision - 1, 1)
    third = await store.update("/z/a", b"3", expected_revision=second.revision)
    events = await collect(store, "/z/", await store.oldest_revision(), 1)
    assert [e.record for e in events] == [third]
    assert events[0].previous == second


async def test_many_watchers_each_see_every_event_once(store: interface.Store) -> None:
    start = await store.current_revision()
    watchers = [asyncio.create_task(collect(store, "/fan/", start, 60)) for _ in range(200)]
    await asyncio.sleep(0)
    written: list[interface.Record] = []
    for i in range(20):
        written.append(await store.create(f"/fan/{i}", b"v"))
    for i in range(20):
        written.append(await store.update(f"/fan/{i}", b"w", expected_revision=written[i].revision))
    for i in range(20):
        written.append(await store.delete(f"/fan/{i}", expected_revision=written[20 + i].revision))
    for events in await asyncio.gather(*watchers):
        assert [e.record for e in events] == written


async def test_slow_watcher_does_not_block_writers(store: interface.Store) -> None:
    start = await store.current_revision()
    stream = store.watch("/slow/", after=start).__aiter__()
    first = await store.create("/slow/0", b"v")
    assert (await asyncio.wait_for(stream.__anext__(), _PATIENCE)).record == first
    # The watcher stops reading while far more events than any buffer arrive.
    written = [first]
    write_all = asyncio.gather(*[store.create(f"/slow/{i}", b"v") for i in range(1, 500)])
    written += await asyncio.wait_for(write_all, _PATIENCE)
    written.sort(key=lambda r: r.revision)
    # Resuming, the watcher gets the rest in order, exactly once, or is told to start over.
    received: list[interface.Record] = []
    try:
        while len(received) < len(written) - 1:
            event = await asyncio.wait_for(stream.__anext__(), _PATIENCE)
            received.append(event.record)
    except interface.Compacted:
        assert received == written[1 : 1 + len(received)]
    else:
        assert received == written[1:]
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


async def test_watch_ends_when_the_store_closes(store: interface.Store) -> None:
    start = await store.current_revision()

    async def drain() -> int:
        count = 0
        async for _ in store.watch("/", after=start):
            count += 1
        return count

    watching = asyncio.create_task(drain())
    await store.create("/e/a", b"v")
    await asyncio.sleep(0)
    await store.close()
    assert await asyncio.wait_for(watching, _PATIENCE) <= 1


# -- concurrency -------------------------------------------------------------------------


async def test_racing_updates_only_one_wins(store: interface.Store) -> None:
    base = await store.create("/race/x", b"base")
    results = await asyncio.gather(
        *[
            store.update("/race/x", f"w{i}".encode(), expected_revision=base.revision)
            for i in range(20)
        ],
        return_exceptions=True,
    )
    winners = [r for r in results if isinstance(r, interface.Record)]
    losers = [r for r in results if isinstance(r, interface.RevisionConflict)]
    assert len(winners) == 1 and len(losers) == 19
    assert await store.get("/race/x") == winners[0]


async def test_retrying_updaters_all_land_once(store: interface.Store) -> None:
    base = await store.create("/race/y", b"base")

    async def updater(i: int) -> tuple[interface.Record, int]:
        conflicts = 0
        while True:
            current = await store.get("/race/y")
            assert current is not None
            try:
                value = f"w{i}".encode()
                return await store.update(
                    "/race/y", value, expected_revision=current.revision
                ), conflicts
            except interface.RevisionConflict:
                conflicts += 1

    results = await asyncio.gather(*[updater(i) for i in range(20)])
    records = [r for r, _ in results]
    assert len({r.revision for r in records}) == 20
    final = await store.get("/race/y")
    assert final is not None
    assert final == max(records, key=lambda r: r.revision)
    assert final.value in {f"w{i}".encode() for i in range(20)}
    history = await collect(store, "/race/y", base.revision, 20)
    assert [e.record for e in history] == sorted(records, key=lambda r: r.revision)


async def test_racing_creates_only_one_wins(store: interface.Store) -> None:
    results = await asyncio.gather(
        *[store.create("/race/z", f"c{i}".encode()) for i in range(20)], return_exceptions=True
    )
    winners = [r for r in results if isinstance(r, interface.Record)]
    assert len(winners) == 1
    assert sum(isinstance(r, interface.KeyExists) for r in results) == 19


async def test_cancelling_one_watcher_leaves_the_others_alone(store: interface.Store) -> None:
    start = await store.current_revision()
    doomed = asyncio.create_task(collect(store, "/cx/", start, 2))
    kept = asyncio.create_task(collect(store, "/cx/", start, 2))
    first = await store.create("/cx/a", b"1")
    await asyncio.sleep(0)
    doomed.cancel()
    second = await store.create("/cx/b", b"2")
    assert [e.record for e in await kept] == [first, second]
    with pytest.raises(asyncio.CancelledError):
        await doomed
