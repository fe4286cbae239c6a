"""A work queue per controller, after client-go's: a key is queued at most once, never handed to
two workers at a time (a key added while in flight is handed out again once ``done``), delayed
adds keep the earliest due time, and failures requeue with a per-key exponential backoff.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Hashable
from typing import Generic, TypeVar

from timing import backoff as backoffs
from timing import clock as clocks

K = TypeVar("K", bound=Hashable)

DEFAULT_BACKOFF = backoffs.Backoff(1.0, 300.0)
"""A key's consecutive failed reconciles: 1 s doubling to 5 min."""


class WorkQueue(Generic[K]):
    def __init__(self, clock: clocks.Clock,
                 backoff: backoffs.Backoff = DEFAULT_BACKOFF) -> None:
        self._clock = clock
        self._backoff = backoff
        self._queue: collections.deque[K] = collections.deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._waiting: dict[K, tuple[float, clocks.Timer]] = {}
        self._failures: dict[K, int] = {}
        self._ready = asyncio.Event()
        self._closed = False

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def closed(self) -> bool:
        return self._closed

    def add(self, key: K) -> None:
        if self._closed or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # handed out again by done()
        self._queue.append(key)
        self._ready.set()

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` once ``delay`` seconds passed; an earlier pending add wins."""
        if self._closed:
            return
        if delay <= 0:
            self.add(key)
            return
        due = self._clock.monotonic() + delay
        pending = self._waiting.get(key)
        if pending is not None:
            if pending[0] <= due:
                return
            pending[1].cancel()
        timer = self._clock.call_later(delay, lambda: self._fire(key, due))
        self._waiting[key] = (due, timer)

    def _fire(self, key: K, due: float) -> None:
        pending = self._waiting.get(key)
        if pending is not None and pending[0] == due:
            del self._waiting[key]
            self.add(key)

    def add_rate_limited(self, key: K) -> float:
        """Requeue after this key's next backoff delay; returns the delay."""
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        delay = self._backoff.delay(failures)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """The key succeeded: its next failure starts the backoff over."""
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> K | None:
        """The next key (now in flight until ``done``), or None once the queue is shut down."""
        while not self._queue:
            if self._closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty and not self._closed:
            self._queue.append(key)
            self._ready.set()

    def shutdown(self) -> None:
        """Hand out nothing more; waiting workers get None. Pending delayed adds are dropped."""
        self._closed = True
        for _, timer in self._waiting.values():
            timer.cancel()
        self._waiting.clear()
        self._queue.clear()
        self._dirty.clear()
        self._ready.set()
