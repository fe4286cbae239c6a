"""The revision mark (``storage.marks``): kept beside the store, never lowered; a start with the
store behind it (emptied, or an older copy) continues numbering above every revision ever
handed out and expires every earlier one, on SQLite and on etcd behind its watch cache; a
restart of an intact store changes nothing; no write gets more than ``gap`` revisions beyond
what the marks hold; a stop records the last revision."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import shutil
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from apiserver.storage import interface, marks, sqlite, watchcache
from apiserver.storage.etcd import client as etcd_client
from apiserver.storage.etcd import store as etcd_store
from devkit.harness import etcd

GAP = 50
"""Small, so etcd's fence (one empty write per revision) stays quick."""


class Recorded:
    """A ``Mark`` in memory that can fail, counting its writes."""

    where = "memory"

    def __init__(self, value: int = 0) -> None:
        self.value = value
        self.writes: list[int] = []
        self.failing: str = ""

    async def read(self) -> int:
        return self.value

    async def write(self, revision: int) -> None:
        if self.failing:
            raise interface.StorageError(self.failing)
        self.writes.append(revision)
        self.value = max(self.value, revision)


class Backend:
    """Opens a fresh store on the same place (a restart), and takes the place back to a copy
    made earlier or to nothing (a store that went back)."""

    def __init__(self, kind: str, tmp_path: pathlib.Path) -> None:
        self.kind = kind
        self.tmp = tmp_path
        self.member: etcd.Etcd | None = None
        if kind == "etcd":
            self.member = etcd.Etcd(tmp_path / "etcd")
            self.member.start()

    @property
    def files(self) -> pathlib.Path:
        assert self.member is not None or self.kind == "sqlite"
        return self.member.directory / "data" if self.member else self.tmp / "db"

    def open(self) -> interface.Store:
        if self.member is None:
            return sqlite.Store(self.tmp / "db" / "store.db")
        config = etcd_client.Config(endpoints=(self.member.url,), prefix="/marks")
        return watchcache.Cache(etcd_store.Store(config, compaction_interval=0), ["/a/"])

    def copy(self) -> pathlib.Path:
        """A copy of the store as it is now (stopped: etcd is stopped and started again)."""
        saved = self.tmp / "copy"
        if self.member is not None:
            self.member.stop()
        shutil.copytree(self.files, saved)
        if self.member is not None:
            self.member.start()
        return saved

    def go_back(self, to: pathlib.Path | None) -> None:
        """The store replaced by ``to`` (a copy made earlier), or by nothing at all."""
        if self.member is not None:
            self.member.stop()
        shutil.rmtree(self.files)
        if to is not None:
            shutil.copytree(to, self.files)
        if self.member is not None:
            self.member.start()

    def close(self) -> None:
        if self.member is not None:
            self.member.kill()


@pytest.fixture(params=["sqlite", "etcd"])
def backend(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[Backend]:
    place = Backend(request.param, tmp_path)
    try:
        yield place
    finally:
        place.close()


@contextlib.asynccontextmanager
async def guarded(backend: Backend, mark: marks.Mark, *, gap: int = GAP,
                  told: list[marks.Fence] | None = None,
                  wait: float = 10.0) -> AsyncIterator[marks.Guarded]:
    async def tell(fence: marks.Fence) -> None:
        if told is not None:
            told.append(fence)

    store = marks.Guarded(backend.open(), [mark], gap=gap, delay=0.01, wait=wait,
                          on_fence=tell)
    await store.start()
    try:
        yield store
    finally:
        await store.close()


async def _until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(30):
        while not predicate():
            await asyncio.sleep(0.01)


async def _expired(store: interface.Store, after: int) -> bool:
    with contextlib.suppress(interface.Compacted):
        async with asyncio.timeout(30):
            async for _ in store.watch("/a/", after=after):
                return False
    return True


async def test_a_file_mark_is_durable_private_and_never_lowered(tmp_path: pathlib.Path) -> None:
    mark = marks.FileMark(tmp_path / "store.db-mark")
    assert await mark.read() == 0
    await mark.write(170)
    await mark.write(120)
    assert await mark.read() == 170
    assert (tmp_path / "store.db-mark").read_text() == "170\n"
    assert (tmp_path / "store.db-mark").stat().st_mode & 0o777 == 0o600
    (tmp_path / "store.db-mark").write_text("garbage")
    with pytest.raises(interface.StorageError, match="holds no revision"):
        await mark.read()


async def test_a_restart_of_an_intact_store_changes_nothing(backend: Backend) -> None:
    mark = Recorded()
    async with guarded(backend, mark) as store:
        first = await store.create("/a/x", b"1")
        listed = await store.list("/a/")
    assert mark.value == listed.revision  # recorded at the stop, exactly
    told: list[marks.Fence] = []
    async with guarded(backend, mark, told=told) as store:
        assert told == [] and store.fences == 0
        second = await store.create("/a/y", b"2")
        # a watch from before the restart resumes: nothing expired
        events = []
        async for event in store.watch("/a/", after=first.revision - 1):
            events.append(event.record)
            if len(events) == 2:
                break
        assert events == [first, second]


@pytest.mark.parametrize("how", ["emptied", "older copy"])
async def test_a_store_that_went_back_continues_above_the_mark_and_expires_the_rest(
        backend: Backend, how: str) -> None:
    mark = Recorded()
    async with guarded(backend, mark) as store:
        kept = await store.create("/a/kept", b"1")
    saved = backend.copy() if how == "older copy" else None
    async with guarded(backend, mark) as store:
        lost = await store.create("/a/lost", b"2")
        held = (await store.list("/a/")).revision  # what a client holds
        handed = [held]
    recorded = mark.value
    assert recorded >= held
    backend.go_back(saved)
    told: list[marks.Fence] = []
    async with guarded(backend, mark, told=told) as store:
        [fence] = told
        assert fence.mark == recorded
        assert fence.found < held and fence.continued > held + GAP
        assert store.fences == 1 and store.last_fence == fence
        assert await store.oldest_revision() == fence.continued
        # what the store holds now, and nothing else
        names = [r.key for r in (await store.list("/a/")).records]
        assert names == (["/a/kept"] if how == "older copy" else [])
        assert await store.get(lost.key) is None
        # every resourceVersion handed out before is expired: its clients list again
        for old in (*handed, kept.revision):
            assert await _expired(store, old)
            with pytest.raises(interface.Compacted):
                await store.list("/a/", revision=old)
        fresh = await store.create("/a/new", b"3")
        assert fresh.revision > held + GAP  # never a revision handed out before
    assert mark.value >= fresh.revision
    # once fenced, the next start finds the store at its mark: nothing more happens
    told.clear()
    async with guarded(backend, mark, told=told) as store:
        assert told == [] and await store.get("/a/new") == fresh


async def test_writes_wait_for_the_mark_and_are_refused_while_it_cannot_be_recorded(
        tmp_path: pathlib.Path) -> None:
    mark = Recorded()
    place = Backend("sqlite", tmp_path)
    async with guarded(place, mark, gap=4, wait=0.2) as store:
        start = mark.value
        mark.failing = "the Lease is away"
        written = [await store.create(f"/a/{n}", b"v") for n in range(4)]
        assert written[-1].revision == start + 4
        with pytest.raises(interface.Unavailable, match="the Lease is away"):
            await store.create("/a/refused", b"v")
        assert await store.get("/a/refused") is None  # refused before it was written
        mark.failing = ""
        passed = await store.create("/a/passed", b"v")
        assert mark.value >= passed.revision - 4


async def test_the_mark_follows_the_revisions_handed_out_in_few_writes(
        tmp_path: pathlib.Path) -> None:
    mark = Recorded()
    async with guarded(Backend("sqlite", tmp_path), mark, gap=10_000) as store:
        written = await asyncio.gather(*(store.create(f"/a/{n}", b"v") for n in range(200)))
        newest = max(record.revision for record in written)
        await _until(lambda: mark.value >= newest)
        assert len(mark.writes) < 50  # many revisions, one write of the mark for many


async def test_a_start_reads_the_highest_of_its_marks(tmp_path: pathlib.Path) -> None:
    # the file beside an emptyDir store is gone with it; the Lease's mark still says 176
    file_mark = marks.FileMark(tmp_path / "db" / "store.db-mark")
    lease = Recorded(176)
    store = marks.Guarded(sqlite.Store(tmp_path / "db" / "store.db"), [file_mark, lease],
                          gap=GAP)
    await store.start()
    try:
        assert store.last_fence is not None and store.last_fence.mark == 176
        assert store.last_fence.where == f"file {tmp_path / 'db' / 'store.db-mark'}, memory"
        current = await store.current_revision()
        assert current == 176 + GAP + 1
        assert await file_mark.read() == lease.value == current
        assert os.path.exists(tmp_path / "db" / "store.db-mark")
    finally:
        await store.close()


async def test_an_etcd_too_far_behind_is_refused_naming_what_to_do(
        tmp_path: pathlib.Path) -> None:
    # a new, empty etcd under a mark of millions: raising it one write at a time would take
    # too long; the server refuses to start and says how etcd is restored instead
    with etcd.running(tmp_path / "etcd") as member:
        config = etcd_client.Config(endpoints=(member.url,), prefix="/marks")
        store = marks.Guarded(etcd_store.Store(config, compaction_interval=0, fence_limit=100),
                              [Recorded(5_000_000)], gap=GAP)
        with pytest.raises(interface.StorageError) as refused:
            await store.start()
        message = str(refused.value)
        assert "behind the revision mark 5000000 (memory)" in message
        assert "etcdutl snapshot restore --bump-revision" in message
        assert "may instead start without the mark" in message
