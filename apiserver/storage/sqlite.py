"""The embedded storage backend: a kine-style revision log in one SQLite file (WAL).

SQLite work never runs on the event loop: one writer thread owns the only writing connection
(writes are serialised, so compare-and-swap needs no retries; ``groupcommit`` commits the writes
queued meanwhile in one transaction and one fsync, acknowledging none before its COMMIT is
durable), and a few reader threads (``readpool``) each hold a read connection, which in WAL
mode read a snapshot without waiting for the writer. After a commit the events reach the loop
*before* the writes' futures resolve, so once ``create()`` returns its event is already visible
to watchers, and events reach the broadcast ring in commit (= revision) order. History is
compacted in the background in small steps that queue behind writes like any other write, keeping
at least the last ``history`` revisions.

The store keeps the live records in memory (``live.Live``, loaded at start, updated on the loop
with each commit before the write is acknowledged): a get and a list at the current revision are
answered from memory without a thread hop, and are exactly what a read snapshot taken at that
moment would hold. Reads of an older revision, history and watch replays read the log. The memory
cost is the live objects' stored bytes, as a watch cache over etcd holds them.

``shared=True`` (``--processes N``): several processes, one Store each, on one file. SQLite
serialises their writers (``BEGIN IMMEDIATE``), so revisions still come from the one log in one
order; each writer reads what the others committed before its own writes, in the same
transaction, and hands both to the loop in revision order (``groupcommit``), and before any read
a store catches up with what the shared counter says the others committed (``catchup``). Without
``shared`` a second process writing the file would still be kept honest by the log's unique
index, but this Store would not see its writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import pathlib
import sqlite3
from collections.abc import AsyncIterator, Callable
from concurrent import futures
from typing import TypeVar

from apiserver.storage import (
    broadcast,
    catchup,
    counter,
    groupcommit,
    interface,
    live,
    logtable,
    logwrites,
    readpool,
    wakeups,
)

_T = TypeVar("_T")

_log = logging.getLogger(__name__)

_REPLAY_BATCH = 1000
"""Revisions read from the log per query when a watcher replays or catches up."""

_COMPACT_STEP = 500
"""Revisions compacted per writer transaction, so a compaction never holds writers for long."""

_Group = list[groupcommit.Job]
_Outcomes = list[logwrites.Outcome]

POLL = 1.0
"""Seconds between two looks at the shared counter for watchers when no wake-up came
(``shared``); reads never wait for it."""


class Closed(interface.StorageError):
    """The store was used before start() or after close()."""


class Store(interface.Store):
    """SQLite-backed ``interface.Store``; see the module docstring for the threading model.

    ``history``: revisions kept for list-at-revision and watch resume (at least 1).
    ``ring``: recent events kept in memory for live watchers; a watcher further behind catches up
    from the log instead. ``readers``: reader threads (connections). ``shared``: other processes
    write the same file (see the module docstring); ``poll``: how often watchers look for them
    without a wake-up; ``wake``: whether the others' commits wake them (else only the poll).
    """

    def __init__(
        self,
        path: pathlib.Path,
        *,
        history: int = 10_000,
        ring: int = 4096,
        readers: int = 3,
        shared: bool = False,
        poll: float = POLL,
        wake: bool = True,
    ) -> None:
        if history < 1:
            raise ValueError("history must keep at least one revision")
        self._path = path
        self._history = history
        self._ring_size = ring
        self._reader_count = readers
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writer: futures.ThreadPoolExecutor | None = None
        self._readers: readpool.ReadPool | None = None
        self._write_conn: sqlite3.Connection | None = None
        self._ring = broadcast.Ring(1, last=0)
        self._live = live.Live()
        self._groups: groupcommit.GroupCommit | None = None
        self._compacted = 0
        self._compactor: asyncio.Task[None] | None = None
        self._open = False
        self._shared = shared
        self._poll = poll
        self._counter: counter.Counter | None = None
        self._wake = wake
        self._wakeups: wakeups.Wakeups | None = None
        self._follower: catchup.Follower | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        if self._open or self._writer is not None:
            raise Closed("store already started")
        self._loop = asyncio.get_running_loop()
        self._writer = futures.ThreadPoolExecutor(1, thread_name_prefix="sqlite-writer")
        self._readers = readpool.ReadPool(self._path, self._reader_count)
        try:
            current, compacted, records = await self._loop.run_in_executor(
                self._writer, self._open_writer
            )
        except BaseException:
            await asyncio.to_thread(self._shutdown)
            raise
        self._ring = broadcast.Ring(self._ring_size, last=current)
        self._live = live.Live(records)
        self._compacted = compacted
        assert self._write_conn is not None
        self._groups = groupcommit.GroupCommit(
            thread=self._writer, conn=self._write_conn, deliver=self._settle,
            applied=self._applied, shared=self._counter, wake=self._wakeups,
        )  # fmt: skip
        self._open = True
        if self._counter is not None:
            self._follower = catchup.Follower(
                self._counter, wake=self._wakeups, poll=self._poll, applied=self._applied,
                apply_tail=self._apply_tail,
            )  # fmt: skip
            self._follower.start()

    async def close(self) -> None:
        if not self._open:
            return
        self._open = False
        self._ring.close()
        if self._follower is not None:
            await self._follower.stop()
        if self._compactor is not None:
            self._compactor.cancel()
            await asyncio.gather(self._compactor, return_exceptions=True)
        await asyncio.to_thread(self._shutdown)

    def _open_writer(self) -> tuple[int, int, list[interface.Record]]:
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            _owner_only(self._path)
            conn = logtable.connect(self._path, writer=True)
            self._write_conn = conn
            if self._shared:
                self._counter = counter.Counter(counter.path_for(self._path), mode=FILE_MODE)
                with logtable.transaction(conn, write=True):  # no commit lands meanwhile
                    self._counter.reset(logtable.current(conn), logtable.compacted(conn))
                if self._wake:
                    self._wakeups = wakeups.Wakeups(wakeups.path_for(self._path))
            everything = logtable.list_at(conn, "", 0, "", 0)  # one snapshot
            with logtable.transaction(conn, write=False):
                compacted = logtable.compacted(conn)
            return everything.revision, compacted, everything.records
        except (OSError, sqlite3.Error) as exc:
            raise interface.StorageError(f"cannot open {self._path}: {exc}") from exc

    def _shutdown(self) -> None:
        assert self._writer is not None and self._readers is not None
        self._writer.shutdown(wait=True)
        self._readers.close()
        if self._write_conn is not None:
            try:
                # Fold the WAL back into the main file so a clean stop leaves one small file;
                # shared, other processes may be reading it: fold what can be, wait for none
                # (SQLite removes the WAL when the last connection closes).
                mode = "PASSIVE" if self._shared else "TRUNCATE"
                self._write_conn.execute(f"PRAGMA wal_checkpoint({mode})")
            except sqlite3.Error:
                _log.warning("WAL checkpoint at close failed", exc_info=True)
            self._write_conn.close()
        if self._counter is not None:
            self._counter.close()
        if self._wakeups is not None:
            self._wakeups.close()

    # -- reads -----------------------------------------------------------------------------

    async def current_revision(self) -> int:
        self._check_open()
        if self._follower is not None and self._follower.behind():
            await self._follower.catch_up()
        return self._ring.last

    async def oldest_revision(self) -> int:
        self._check_open()
        return self._oldest()

    async def get(self, key: str) -> interface.Record | None:
        self._check_open()
        if self._follower is not None and self._follower.behind():
            await self._follower.catch_up()
        return self._live.get(key)

    async def list(
        self,
        prefix: str,
        *,
        revision: int = 0,
        start_after: str = "",
        limit: int = 0,
    ) -> interface.Page:
        if revision < 0 or limit < 0:
            raise ValueError("revision and limit must not be negative")
        self._check_open()
        if self._follower is not None and self._follower.behind():
            await self._follower.catch_up()
        current = self._ring.last
        if revision in (0, current):
            return self._live.page(prefix, current, start_after=start_after, limit=limit)
        return await self._read(
            lambda conn: logtable.list_at(conn, prefix, revision, start_after, limit)
        )

    # -- writes ----------------------------------------------------------------------------

    async def create(self, key: str, value: bytes) -> interface.Record:
        event = await self._write(logwrites.Write(key, value))
        return event.record

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> interface.Record:
        event = await self._write(logwrites.Write(key, value, expected_revision))
        return event.record

    async def delete(self, key: str, *, expected_revision: int) -> interface.Record:
        event = await self._write(logwrites.Write(key, b"", expected_revision, delete=True))
        return event.record

    async def compact(self, revision: int) -> None:
        current = await self.current_revision()
        if revision > current:
            raise interface.FutureRevision(revision, current)
        await self._compact_to(revision)

    async def fence(self, revision: int) -> int:
        """See ``interface.Store.fence``; with ``shared`` the other processes learn it from the
        counter (their watchers from before it end with Compacted, as after a compaction)."""
        self._check_open()
        assert self._loop is not None and self._write_conn is not None
        reached: int = await self._loop.run_in_executor(
            self._writer, logwrites.fence, self._write_conn, revision)
        if self._counter is not None:
            self._counter.publish(reached)
            self._counter.publish_compacted(reached)
            if self._wakeups is not None:
                self._wakeups.notify()
        # everything before ``reached`` is history now: the state read again at it, the ring
        # restarted there (its watchers read the log, which answers Compacted)
        await self._apply_tail(self._ring.last)
        return reached

    # -- watch -----------------------------------------------------------------------------

    async def watch(self, prefix: str, *, after: int) -> AsyncIterator[interface.Event]:
        """See ``interface.Store.watch``. A revision ``after`` newer than the current one is not
        an error: the watch waits for it, as an etcd watch does."""
        self._check_open()
        if after < 0:
            raise ValueError("after must not be negative")
        if self._follower is not None and self._follower.behind():
            await self._follower.catch_up()
        oldest = self._oldest()
        if after < oldest:
            raise interface.Compacted(after, oldest)
        ring = self._ring
        cursor = after
        while not ring.closed:
            if cursor >= ring.last:
                woke = await ring.wait(cursor, prefix)
                if woke is not None and woke - 1 > cursor:
                    cursor = woke - 1  # nothing under the prefix came in between
                continue
            if ring.covers(cursor):
                batch = ring.since(cursor, prefix)
                cursor = ring.last
            else:
                # Behind the ring (a resume from an old revision, or a slow consumer): read the
                # log up to where the ring starts; Compacted if that history is gone.
                upto = min(ring.first - 1, cursor + _REPLAY_BATCH)
                batch = await self._read(
                    functools.partial(logtable.events, prefix=prefix, after=cursor, upto=upto)
                )
                cursor = upto
            for event in batch:
                yield event

    # -- internals -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if not self._open:
            raise Closed("store is not open")

    def _oldest(self) -> int:
        if self._follower is not None:
            return max(self._compacted, self._follower.compacted())
        return self._compacted

    def _applied(self) -> int:
        """The newest revision applied to the live records and the ring (any thread)."""
        return self._ring.last

    # -- other processes' commits (``shared``) ---------------------------------------------

    async def _apply_tail(self, after: int) -> None:
        self._absorb(await self._read(functools.partial(logtable.tail, after=after)))

    def _absorb(self, tail: logtable.Tail | None) -> None:
        """On the loop: apply a tail of the log, skipping what is applied already (the writer
        and the readers may both have read a revision; whoever is first applies it)."""
        if tail is None:
            return
        self._compacted = max(self._compacted, tail.compacted)
        if tail.state is not None:
            if tail.current > self._ring.last:
                self._live = live.Live(tail.state)
                self._ring.restart(tail.current)
            return
        for event in tail.events:
            self._publish(event)

    async def _read(self, job: Callable[[sqlite3.Connection], _T]) -> _T:
        self._check_open()
        assert self._readers is not None
        return await self._readers.run(job)

    async def _write(self, write: logwrites.Write) -> interface.Event:
        self._check_open()
        assert self._groups is not None
        return await self._groups.submit(write)

    def _settle(
        self,
        group: _Group,
        outcomes: _Outcomes,
        foreign: logtable.Tail | None,
    ) -> None:
        """On the loop, one call per commit: the others' commits first, then the group's events
        in commit order, each applied before its write's future resolves."""
        self._absorb(foreign)
        for (_, future), outcome in zip(group, outcomes, strict=True):
            if isinstance(outcome, interface.Event):
                self._publish(outcome)
                if not future.done():
                    future.set_result(outcome)
            elif not future.done():
                future.set_exception(outcome)

    def _publish(self, event: interface.Event) -> None:
        revision = event.record.revision
        if revision <= self._ring.last:
            return  # shared: applied already, read from the log by a catch-up
        self._live.apply(event)
        self._ring.publish(event)
        # Compact in bursts of at least a tenth of the history, not after every write.
        slack = max(1, self._history // 10)
        due = revision - self._history - self._compacted >= slack
        if due and self._open and (self._compactor is None or self._compactor.done()):
            self._compactor = asyncio.create_task(self._compact_in_background(revision))

    async def _compact_in_background(self, revision: int) -> None:
        try:
            await self._compact_to(revision - self._history)
        except asyncio.CancelledError:
            raise
        except Exception:
            _log.exception("background compaction failed")

    async def _compact_to(self, target: int) -> None:
        assert self._loop is not None and self._write_conn is not None
        conn = self._write_conn
        while self._compacted < target and self._open:
            mark = await self._loop.run_in_executor(
                self._writer, logwrites.compact_step, conn, target, _COMPACT_STEP
            )
            if self._counter is not None:
                self._counter.publish_compacted(mark)
            if mark <= self._compacted:
                return
            self._compacted = mark


FILE_MODE = 0o600
"""The store holds every object, Secrets' names included: only the server's user reads it."""


def _owner_only(path: pathlib.Path) -> None:
    """Create the database file 0600 before SQLite opens it (SQLite gives its -wal and -shm files
    the database file's mode), and bring files left by an older run down to 0600."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE))
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(name, FILE_MODE)
