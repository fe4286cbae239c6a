"""Group commit: the SQLite store's one writer thread and the writes queued for it.

Writes queued on the event loop while the writer is busy go in one transaction together, checked
and inserted as a group (``logwrites.apply``: a refused write fails alone), under one fsync'd
COMMIT (``synchronous=FULL``), so concurrent writers do not queue behind one fsync each. No write
is acknowledged before the COMMIT holding it is durable: after it (and, with ``--processes``, after
the shared counter was raised past it and the other processes were woken) the writer hands the
group's outcomes to the loop in one callback, which applies the events in commit (= revision)
order *before* it resolves the writes' futures.

The loop hands work to the thread only when no turn is queued already (a flag, not a task per
write): under load the writer finds the next group waiting when its COMMIT returns, and the loop
pays for one thread wake-up per group rather than per write.
"""

from __future__ import annotations

import asyncio
import collections
import sqlite3
from collections.abc import Callable
from concurrent import futures

from apiserver.storage import counter, interface, logtable, logwrites, wakeups

GROUP = 256
"""Most writes committed in one transaction."""

Job = tuple[logwrites.Write, "asyncio.Future[interface.Event]"]
Deliver = Callable[[list[Job], list[logwrites.Outcome], "logtable.Tail | None"], None]
"""On the loop: apply a group's outcomes (and, shared, what others committed before it)."""


class GroupCommit:
    """The queue of writes and the writer thread's turns on ``conn`` (made on the loop, once the
    store has applied what the file holds); ``shared`` and ``wake``: the counter and the FIFOs of
    ``--processes``, None for a store alone on its file."""

    def __init__(
        self,
        *,
        thread: futures.ThreadPoolExecutor,
        conn: sqlite3.Connection,
        deliver: Deliver,
        applied: Callable[[], int],
        shared: counter.Counter | None = None,
        wake: wakeups.Wakeups | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = thread
        self._pending: collections.deque[Job] = collections.deque()
        """Appended on the loop, taken by the writer thread."""
        self._queued = False
        """A turn is queued on the thread and has not yet looked at ``_pending``."""
        self._conn = conn
        self._deliver = deliver
        self._applied = applied
        """The newest revision the loop has applied (read from the thread)."""
        self._delivered = applied()
        """The newest revision handed to the loop so far: where the writer's own reads of the
        others' commits start (``shared``)."""
        self._counter = shared
        self._wakeups = wake

    def submit(self, write: logwrites.Write) -> asyncio.Future[interface.Event]:
        """On the loop: queue ``write``; the future resolves once it is durable (or refused)."""
        future: asyncio.Future[interface.Event] = self._loop.create_future()
        self._pending.append((write, future))
        if not self._queued:
            self._queued = True
            self._thread.submit(self._turn)
        return future

    def _turn(self) -> None:
        """Writer thread: commit groups until nothing is pending. Never raises (a failure
        belongs to the writes' futures)."""
        while True:
            # Cleared before looking: a write queued from here on queues a turn of its own
            # (which then may find nothing left to do); one queued before is seen below.
            self._queued = False
            if not self._pending:
                return
            group: list[Job] = []
            while self._pending and len(group) < GROUP:
                group.append(self._pending.popleft())
            self._commit(group)

    def _commit(self, group: list[Job]) -> None:
        conn = self._conn
        writes = [write for write, _ in group]
        foreign: logtable.Tail | None = None
        try:
            with logtable.transaction(conn, write=True):
                if self._counter is not None:
                    # Others' commits first, so the loop applies every revision in order.
                    # Everything up to the loop's revision is applied already.
                    foreign = logtable.tail(conn, max(self._delivered, self._applied()))
                outcomes = _run(conn, writes)
        except sqlite3.Error as exc:
            outcomes = [_write_failed(exc) for _ in group]
        except Exception as exc:  # a bug: rolled back, no write of the group landed
            outcomes = [exc for _ in group]
        if self._counter is not None:
            committed = [o.record.revision for o in outcomes if isinstance(o, interface.Event)]
            if foreign is not None:
                self._delivered = max(self._delivered, foreign.current)
            if committed:
                self._delivered = max(self._delivered, committed[-1])
                # Durable now; published before any of these writes is acknowledged.
                self._counter.publish(committed[-1])
                if self._wakeups is not None:
                    self._wakeups.notify()
        self._loop.call_soon_threadsafe(self._deliver, group, outcomes, foreign)


def _run(conn: sqlite3.Connection, writes: list[logwrites.Write]) -> list[logwrites.Outcome]:
    """The group's outcomes inside the open transaction; raises only when SQLite rolled the
    whole transaction back (then every write failed)."""
    try:
        return logwrites.apply(conn, writes)
    except sqlite3.Error as exc:
        if not conn.in_transaction:
            raise
        return [_write_failed(exc) for _ in writes]  # nothing of the group was written


def _write_failed(exc: sqlite3.Error) -> interface.StorageError:
    failure = interface.StorageError(f"sqlite write failed: {exc}")
    failure.__cause__ = exc
    return failure
