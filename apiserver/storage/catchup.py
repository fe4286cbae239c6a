"""The other processes' commits (``--processes N`` on one SQLite file): when to read them.

Each process keeps the live records and the watch ring in its own memory and learns of the
others' commits from the log itself. The shared counter (``counter.Counter``), raised after every
durable COMMIT and before any of its writes is acknowledged, says when there is more: before any
read the store asks ``behind()`` and, when the counter is past the revision it has applied,
``catch_up()`` reads the log tail (in a reader thread) and applies it first, so no process answers
with a state older than a write acknowledged by another. Watchers hear of the others' commits
through a wake-up (``wakeups.Wakeups``: after its commit a writer writes a byte into each other
process's FIFO), and a slow poll of the counter (``poll`` seconds) covers a lost one. What a
writer reads of the others' commits inside its own transaction is ``groupcommit``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable

from apiserver.storage import counter, interface, wakeups

_log = logging.getLogger(__name__)


@dataclasses.dataclass(eq=False)
class Follower:
    """Catch-up reads and the watchers' feed of one store on a shared file."""

    shared: counter.Counter
    _: dataclasses.KW_ONLY
    wake: wakeups.Wakeups | None
    poll: float
    applied: Callable[[], int]
    """The newest revision the store has applied."""
    apply_tail: Callable[[int], Awaitable[None]]
    """Reads the log after a revision (off the loop) and applies it."""
    _tail_lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock, init=False)
    _nudged: asyncio.Event = dataclasses.field(default_factory=asyncio.Event, init=False)
    _task: asyncio.Task[None] | None = dataclasses.field(default=None, init=False)
    _stopped: bool = dataclasses.field(default=False, init=False)

    def behind(self) -> bool:
        """Whether another process has committed past what this store has applied."""
        return self.shared.read() > self.applied()

    def compacted(self) -> int:
        """The newest compaction mark any process on the file has published."""
        return self.shared.compacted()

    async def catch_up(self) -> None:
        """Apply what the log holds beyond this process's revision. One read at a time: a read
        that queued behind another finds itself caught up by it, or reads once more (a read
        started after the counter was seen includes every commit it counted)."""
        wanted = self.shared.read()
        async with self._tail_lock:
            if self.applied() >= wanted:
                return
            await self.apply_tail(self.applied())

    def start(self) -> None:
        """On the loop: follow the others' commits for the watchers until ``stop``."""
        self._task = asyncio.create_task(self._follow(), name="sqlite follow")
        if self.wake is not None:
            asyncio.get_running_loop().add_reader(self.wake.fileno(), self._woken)

    async def stop(self) -> None:
        self._stopped = True
        if self.wake is not None and self._task is not None:
            asyncio.get_running_loop().remove_reader(self.wake.fileno())
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _woken(self) -> None:
        assert self.wake is not None
        self.wake.drain()
        self._nudged.set()

    async def _follow(self) -> None:
        """Feed the watchers: look at the counter when woken, or every ``poll`` seconds."""
        while not self._stopped:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._nudged.wait(), self.poll)
            self._nudged.clear()
            if not self.behind():
                continue
            try:
                await self.catch_up()
            except interface.StorageError:
                if self._stopped:
                    return
                _log.warning("reading other processes' commits failed", exc_info=True)
