"""What the SQLite backend promises beyond the contract: bounded history, catch-up, reopen."""

from __future__ import annotations

import asyncio
import os
import pathlib
import sqlite3
import stat
from contextlib import AbstractContextManager

import pytest

from apiserver.storage import interface, logtable, logwrites, sqlite

_PATIENCE = 30.0


async def wait_compacted(store: sqlite.Store, at_least: int) -> None:
    """Background compaction runs on its own schedule; wait (bounded) until it got there."""

    async def poll() -> None:
        while await store.oldest_revision() < at_least:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), _PATIENCE)


async def test_history_is_bounded_but_keeps_the_last_revisions(tmp_path: pathlib.Path) -> None:
    store = sqlite.Store(tmp_path / "s.db", history=20)
    await store.start()
    try:
        record = await store.create("/h/x", b"0")
        for i in range(1, 200):
            record = await store.update("/h/x", str(i).encode(), expected_revision=record.revision)
        current = await store.current_revision()
        await wait_compacted(store, current - 40)
        oldest = await store.oldest_revision()
        assert oldest <= current - 20
        page = await store.list("/h/", revision=current - 20)
        assert [r.value for r in page.records] == [str(199 - 20).encode()]
        with pytest.raises(interface.Compacted):
            await store.list("/h/", revision=oldest - 1)
        assert await store.get("/h/x") == record
    finally:
        await store.close()
    conn = sqlite3.connect(tmp_path / "s.db")
    rows = conn.execute("SELECT count(*) FROM log").fetchone()[0]
    conn.close()
    assert rows <= record.revision - oldest + 1


async def test_compaction_never_drops_a_live_record(tmp_path: pathlib.Path) -> None:
    store = sqlite.Store(tmp_path / "s.db", history=5)
    await store.start()
    try:
        keep = [await store.create(f"/k/{i}", b"v") for i in range(50)]
        churn = await store.create("/churn", b"0")
        for i in range(100):
            churn = await store.update("/churn", str(i).encode(), expected_revision=churn.revision)
        await wait_compacted(store, churn.revision - 15)
        page = await store.list("/k/")
        assert sorted(page.records, key=lambda r: r.revision) == keep
    finally:
        await store.close()


async def test_watcher_behind_the_ring_catches_up_from_the_log(tmp_path: pathlib.Path) -> None:
    store = sqlite.Store(tmp_path / "s.db", ring=4)
    await store.start()
    try:
        start = await store.current_revision()
        stream = store.watch("/r/", after=start).__aiter__()
        written = [await store.create(f"/r/{i:04}", b"v") for i in range(2500)]
        await store.create("/elsewhere", b"not under the prefix")
        received = [(await asyncio.wait_for(stream.__anext__(), _PATIENCE)).record for _ in written]
        assert received == written
        late = await store.create("/r/late", b"v")
        assert (await asyncio.wait_for(stream.__anext__(), _PATIENCE)).record == late
        await stream.aclose()  # type: ignore[attr-defined]
    finally:
        await store.close()


async def test_a_watcher_of_one_key_sleeps_through_other_writes_and_reads_no_log(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes under other keys, more than the ring holds, neither wake it nor send it to the log
    when its own key is written at last (the ring tells it nothing came in between)."""
    store = sqlite.Store(tmp_path / "s.db", ring=4)
    await store.start()
    reads: list[object] = []
    events = logtable.events

    def counted(*args: object, **kwargs: object) -> object:
        reads.append(kwargs.get("prefix"))
        return events(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(logtable, "events", counted)
    try:
        stream = store.watch("/stores/node-1", after=await store.current_revision()).__aiter__()
        first = asyncio.ensure_future(stream.__anext__())
        async with asyncio.timeout(_PATIENCE):
            while store._ring.waiting() < 1:
                await asyncio.sleep(0)
        for i in range(2, 40):
            await store.create(f"/stores/other-{i:02}", b"v")
        await asyncio.sleep(0.05)
        assert not first.done() and store._ring.waiting() == 1
        mine = await store.create("/stores/node-1", b"v")
        assert (await asyncio.wait_for(first, _PATIENCE)).record == mine
        assert reads == []
        await stream.aclose()  # type: ignore[attr-defined]
    finally:
        await store.close()


async def test_watcher_behind_the_kept_history_is_told_compacted(tmp_path: pathlib.Path) -> None:
    store = sqlite.Store(tmp_path / "s.db", history=10, ring=4)
    await store.start()
    try:
        start = await store.current_revision()
        stream = store.watch("/", after=start).__aiter__()
        first = await store.create("/c/x", b"0")
        assert (await asyncio.wait_for(stream.__anext__(), _PATIENCE)).record == first
        record = first
        for i in range(100):
            record = await store.update("/c/x", str(i).encode(), expected_revision=record.revision)
        await wait_compacted(store, first.revision + 10)
        with pytest.raises(interface.Compacted):
            for _ in range(100):
                await asyncio.wait_for(stream.__anext__(), _PATIENCE)
    finally:
        await store.close()


async def test_reopen_keeps_records_revisions_and_compaction(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "nested" / "s.db"
    store = sqlite.Store(path)
    await store.start()
    a = await store.create("/o/a", b"a")
    b = await store.create("/o/b", b"b")
    gone = await store.delete("/o/b", expected_revision=b.revision)
    await store.compact(gone.revision)
    await store.close()

    store = sqlite.Store(path)
    await store.start()
    try:
        assert await store.current_revision() == gone.revision
        assert await store.oldest_revision() == gone.revision
        assert (await store.list("/o/")).records == [a]
        c = await store.create("/o/b", b"again")
        assert c.revision == gone.revision + 1
        with pytest.raises(interface.Compacted):
            await store.list("/o/", revision=gone.revision - 1)
    finally:
        await store.close()


async def test_closed_store_refuses_work(tmp_path: pathlib.Path) -> None:
    store = sqlite.Store(tmp_path / "s.db")
    with pytest.raises(sqlite.Closed):
        await store.get("/x")
    await store.start()
    await store.close()
    await store.close()
    with pytest.raises(sqlite.Closed):
        await store.create("/x", b"v")


def test_racing_writers_on_one_previous_revision_collide(tmp_path: pathlib.Path) -> None:
    # The unique (key, prev_revision) index is what stops a second process on the same file.
    conn = logtable.connect(tmp_path / "s.db", writer=True)
    with logtable.transaction(conn, write=True):
        (created,) = logwrites.apply(conn, [logwrites.Write("/u/x", b"v")])
    assert isinstance(created, interface.Event)
    conn.execute(
        "INSERT INTO log (id, key, value, create_revision, prev_revision, deleted)"
        " VALUES (100, '/u/x', x'00', ?, ?, 0)",
        (created.record.revision, created.record.revision),
    )
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO log (id, key, value, create_revision, prev_revision, deleted)"
            " VALUES (101, '/u/x', x'01', ?, ?, 0)",
            (created.record.revision, created.record.revision),
        )
    conn.close()


@pytest.mark.parametrize(
    ("prefix", "end"),
    [
        ("", None),
        ("/a/", "/a0"),
        ("a\U0010ffff", "b"),
        ("\U0010ffff", None),
        ("a\ud7ff", "a\ue000"),
    ],
)
def test_prefix_end(prefix: str, end: str | None) -> None:
    assert logtable.prefix_end(prefix) == end


async def test_a_file_that_is_not_a_store_is_refused(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(b"not a database, just bytes" * 100)
    store = sqlite.Store(path)
    with pytest.raises(interface.StorageError):
        await store.start()


async def test_concurrent_writes_share_commits_and_a_refusal_undoes_only_itself(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commits = 0
    real = logtable.transaction

    def counting(conn: sqlite3.Connection, *, write: bool) -> AbstractContextManager[None]:
        nonlocal commits
        if write and not conn.in_transaction:
            commits += 1
        return real(conn, write=write)

    monkeypatch.setattr(logtable, "transaction", counting)
    store = sqlite.Store(tmp_path / "s.db")
    await store.start()
    try:
        taken = await store.create("/g/taken", b"first")
        writes = [store.create(f"/g/k{i:02d}", b"v") for i in range(30)]
        writes.insert(15, store.create("/g/taken", b"second"))
        outcomes = await asyncio.gather(*writes, return_exceptions=True)
        refused = outcomes.pop(15)
        assert isinstance(refused, interface.KeyExists)
        records = [r for r in outcomes if isinstance(r, interface.Record)]
        assert len(records) == 30
        assert sorted(r.revision for r in records) == list(
            range(taken.revision + 1, taken.revision + 31))
        assert commits < 31  # some writes went in one transaction together
        page = await store.list("/g/")
        assert len(page.records) == 31 and page.revision == taken.revision + 30
        assert await store.get("/g/taken") == taken
        events = []
        async with asyncio.timeout(_PATIENCE):
            async for event in store.watch("/g/", after=taken.revision):
                events.append(event.record)
                if len(events) == 30:
                    break
        assert events == sorted(records, key=lambda r: r.revision)
    finally:
        await store.close()


async def test_the_store_and_its_wal_are_owner_only(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "store.db"
    previous = os.umask(0o022)
    try:
        store = sqlite.Store(path)
        await store.start()
        try:
            await store.create("/k/a", b'{"metadata":{"name":"a"}}')
            modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
        finally:
            await store.close()
    finally:
        os.umask(previous)
    assert modes == {"store.db": 0o600, "store.db-wal": 0o600, "store.db-shm": 0o600}


async def test_files_an_older_run_left_readable_are_made_owner_only(
        tmp_path: pathlib.Path) -> None:
    path = tmp_path / "store.db"
    first = sqlite.Store(path)
    await first.start()
    await first.close()
    for name in ("store.db", "store.db-wal"):
        (tmp_path / name).touch()
        (tmp_path / name).chmod(0o644)
    again = sqlite.Store(path)
    await again.start()
    try:
        assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()
                if p.name in ("store.db", "store.db-wal")} == {"store.db": 0o600,
                                                                "store.db-wal": 0o600}
    finally:
        await again.close()


def _reader_threads() -> int:
    import threading

    return sum(t.name.startswith("sqlite-reader") for t in threading.enumerate())


async def test_current_reads_come_from_memory_and_match_the_log(tmp_path: pathlib.Path) -> None:
    store = sqlite.Store(tmp_path / "s.db")
    await store.start()
    try:
        first = await store.create("/m/a", b"1")
        await store.create("/m/b", b"2")
        await store.update("/m/a", b"3", expected_revision=first.revision)
        gone = await store.create("/m/c", b"4")
        await store.delete("/m/c", expected_revision=gone.revision)
        # acknowledged writes are visible at once, without a reader thread
        got = await store.get("/m/a")
        assert got is not None and got.value == b"3"
        assert await store.get("/m/c") is None
        current = await store.list("/m/")
        assert [(r.key, r.value) for r in current.records] == [("/m/a", b"3"), ("/m/b", b"2")]
        assert current.revision == await store.current_revision()
        paged = await store.list("/m/", start_after="/m/a", limit=1)
        assert [r.key for r in paged.records] == ["/m/b"] and not paged.more
        assert _reader_threads() == 0
        # the same state read from the log at that revision (a reader thread)
        at = await store.list("/m/", revision=current.revision - 1)
        assert [r.key for r in at.records] == ["/m/a", "/m/b", "/m/c"]
        assert _reader_threads() == 1
    finally:
        await store.close()
    reopened = sqlite.Store(tmp_path / "s.db")
    await reopened.start()
    try:  # loaded from the file at start
        again = await reopened.list("/m/")
        assert [(r.key, r.value, r.revision) for r in again.records] == [
            (r.key, r.value, r.revision) for r in current.records]
    finally:
        await reopened.close()
