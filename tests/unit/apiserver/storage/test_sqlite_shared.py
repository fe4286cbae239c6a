"""``sqlite.Store(shared=True)``: several processes on one file (``--workers N``).

A peer process writes; this process's store must answer each acknowledged write at once, feed
its watchers every write in revision order, survive the peer's restart, and reload its state
when it fell behind compacted history. The contract suite runs the same guarantees through two
stores in one process (``shared_pair``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import signal
import stat
import sys
from collections.abc import AsyncIterator

import pytest

from apiserver.storage import counter, interface, sqlite, wakeups

_WRITER = pathlib.Path(__file__).with_name("shared_writer.py")
_ROOT = pathlib.Path(__file__).parents[4]
_PATIENCE = 60.0


class Peer:
    """The writer child; ``acks()`` yields its acknowledged writes as they are printed."""

    def __init__(self, child: asyncio.subprocess.Process) -> None:
        self.child = child

    @classmethod
    async def start(cls, path: pathlib.Path, count: int) -> Peer:
        env = dict(os.environ, PYTHONPATH=str(_ROOT))
        child = await asyncio.create_subprocess_exec(
            sys.executable, str(_WRITER), str(path), str(count), env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        peer = cls(child)
        assert await peer.line() == "ready"
        return peer

    async def line(self) -> str:
        assert self.child.stdout is not None
        raw = await asyncio.wait_for(self.child.stdout.readline(), _PATIENCE)
        assert raw, "the peer exited on its own"
        return raw.decode().strip()

    async def stop(self, *, kill: bool = False) -> None:
        if self.child.returncode is None:
            if kill:
                self.child.send_signal(signal.SIGKILL)
            else:
                assert self.child.stdin is not None
                self.child.stdin.close()
        await asyncio.wait_for(self.child.wait(), _PATIENCE)


async def test_a_write_acknowledged_by_a_peer_is_read_here_at_once(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "s.db"
    # no wake-ups and a poll far longer than the test: only the read's own look at the
    # counter can catch up
    here = sqlite.Store(path, shared=True, poll=3600, wake=False)
    await here.start()
    peer = await Peer.start(path, 60)
    try:
        while (line := await peer.line()) != "done":
            _, key, revision = line.split()
            record = await here.get(key)  # this write, or the peer's update of it since
            assert record is not None and record.revision >= int(revision)
            page = await here.list("/w/")
            assert page.revision >= int(revision) and key in [r.key for r in page.records]
            assert await here.current_revision() >= int(revision)
    finally:
        await peer.stop()
        await here.close()


async def test_a_watch_here_sees_a_peers_writes_in_order(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.db"
    here = sqlite.Store(path, shared=True, poll=3600)  # only the peer's wake-ups feed the watch
    await here.start()
    start = await here.current_revision()
    seen: list[tuple[str, int]] = []

    async def watch(count: int) -> None:
        async for event in here.watch("/w/", after=start):
            seen.append((event.record.key, event.record.revision))
            if len(seen) == count:
                return

    watching = asyncio.create_task(watch(40))
    peer = await Peer.start(path, 30)  # 30 creates and 10 updates
    acked: list[tuple[str, int]] = []
    try:
        while (line := await peer.line()) != "done":
            _, key, revision = line.split()
            acked.append((key, int(revision)))
        await asyncio.wait_for(watching, _PATIENCE)
    finally:
        await peer.stop()
        await here.close()
    assert seen == acked
    assert [r for _, r in seen] == sorted(r for _, r in seen)


async def test_writes_here_and_in_a_peer_share_one_order_and_survive_a_restart(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "s.db"
    here = sqlite.Store(path, shared=True)
    await here.start()
    start = await here.current_revision()
    peer = await Peer.start(path, 1000)
    mine: list[interface.Record] = []
    try:
        for n in range(20):  # meanwhile the peer writes too
            mine.append(await here.create(f"/mine/{n}", b"m"))
            await peer.line()
        await peer.stop(kill=True)  # a crash: whatever it acknowledged is committed
        peer = await Peer.start(path, 0)  # a restarted worker on the same file
        assert await peer.line() == "done"
        mine.append(await here.create("/mine/after", b"m"))
        history = [event async for event in _until(here, start, mine[-1].revision)]
        revisions = [e.record.revision for e in history]
        assert revisions == list(range(start + 1, mine[-1].revision + 1))  # no gap, no repeat
        assert {r.revision for r in mine} <= set(revisions)
        everything = await here.list("")
        assert len(everything.records) == len({e.record.key for e in history})
    finally:
        await peer.stop()
        await here.close()
    reopened = sqlite.Store(path, shared=True)
    await reopened.start()
    try:
        assert (await reopened.list("")).records == everything.records
    finally:
        await reopened.close()


async def _until(store: sqlite.Store, after: int, last: int) -> AsyncIterator[interface.Event]:
    async for event in store.watch("", after=after):
        yield event
        if event.record.revision >= last:
            return


async def test_a_store_behind_compacted_history_reloads_its_state(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.db"
    writer = sqlite.Store(path, shared=True, history=5)
    idle = sqlite.Store(path, shared=True, poll=3600, wake=False)
    await writer.start()
    await idle.start()
    try:
        first = await writer.create("/k/gone", b"v")
        await idle.get("/k/gone")  # idle is at first.revision now
        await writer.delete("/k/gone", expected_revision=first.revision)
        kept = await writer.create("/k/kept", b"v")
        for n in range(40):
            kept = await writer.update("/k/kept", f"{n}".encode(), expected_revision=kept.revision)
        await writer.compact(kept.revision - 1)
        assert await idle.oldest_revision() == kept.revision - 1
        assert await idle.get("/k/gone") is None
        assert await idle.get("/k/kept") == kept
        assert [r.key for r in (await idle.list("/k/")).records] == ["/k/kept"]
        with pytest.raises(interface.Compacted):
            async for _ in idle.watch("/k/", after=first.revision):
                pass
    finally:
        await idle.close()
        await writer.close()


@contextlib.asynccontextmanager
async def _started(path: pathlib.Path) -> AsyncIterator[sqlite.Store]:
    store = sqlite.Store(path, shared=True)
    await store.start()
    try:
        yield store
    finally:
        await store.close()


async def test_the_counter_file_is_the_owners_only(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.db"
    async with _started(path) as store:
        record = await store.create("/a", b"v")
        shared = counter.path_for(path)
        assert stat.S_IMODE(shared.stat().st_mode) == 0o600
        assert counter.Counter(shared).read() == record.revision


async def test_a_wake_up_left_by_a_dead_process_is_removed(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.db"
    async with _started(path) as store:
        stale = wakeups.path_for(path) / "1-dead"
        os.mkfifo(stale, 0o600)  # nobody reads it
        await store.create("/a", b"v")
        assert not stale.exists()
        assert len(list(wakeups.path_for(path).iterdir())) == 1  # the store's own
    assert list(wakeups.path_for(path).iterdir()) == []
