"""The node-wide download limits: at most N hub requests at once, one bytes/second budget.

Both are shared by every attempt on the node (``download.concurrency``, ``download.bytesPerSecond``)
and both can be changed while downloads run, since the node's spec can change under them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable


class RequestLimiter:
    """A resizable semaphore for open hub requests; ``peak`` records the most ever open at once."""

    def __init__(self, limit: int) -> None:
        self._limit = max(1, limit)
        self._open = 0
        self.peak = 0
        self._changed = asyncio.Condition()

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def open(self) -> int:
        return self._open

    async def set_limit(self, limit: int) -> None:
        async with self._changed:
            self._limit = max(1, limit)
            self._changed.notify_all()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(lambda: self._open < self._limit)
            self._open += 1
            self.peak = max(self.peak, self._open)
        try:
            yield
        finally:
            # Shielded so a cancelled request still gives its slot back.
            await asyncio.shield(self._release())

    async def _release(self) -> None:
        async with self._changed:
            self._open -= 1
            self._changed.notify_all()


class RateLimiter:
    """A token bucket over bytes; 0 bytes/second means unlimited.

    ``consume(n)`` is called after ``n`` bytes arrived: the bucket may go into debt and the caller
    then sleeps until it is repaid, so long transfers converge on the rate whatever the chunk size,
    while the burst stays at a quarter second's worth.
    """

    BURST_SECONDS = 0.25

    def __init__(
        self,
        bytes_per_second: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._lock = asyncio.Lock()
        self._rate = 0
        self._tokens = 0.0
        self._stamp = clock()
        self.set_rate(bytes_per_second)

    @property
    def rate(self) -> int:
        return self._rate

    def set_rate(self, bytes_per_second: int) -> None:
        self._rate = max(0, bytes_per_second)
        self._tokens = min(self._tokens, self._burst())
        self._stamp = self._clock()

    def _burst(self) -> float:
        return self._rate * self.BURST_SECONDS

    async def consume(self, size: int) -> None:
        if self._rate == 0:
            return
        # One waiter at a time keeps the order fair and the debt single-owned.
        async with self._lock:
            now = self._clock()
            self._tokens = min(self._burst(), self._tokens + (now - self._stamp) * self._rate)
            self._stamp = now
            self._tokens -= size
            if self._tokens < 0 and self._rate:
                await self._sleep(-self._tokens / self._rate)


class Budget:
    """Bytes received and not yet hashed, bounded node-wide.

    A part books its size before its request starts, so a request never waits on memory while it
    holds a request slot. The part at its file's frontier never waits (``bypass``), which is what
    keeps the pipeline from deadlocking when the budget is spent; but what it receives faster than
    its file is hashed is ``charge``d, so a slow consumer holds back look-ahead instead of letting
    memory (and what a crash loses) grow by a part per file beyond the limit.
    """

    def __init__(self, limit_bytes: int) -> None:
        self.limit = max(1, limit_bytes)
        self.used = 0
        self.peak = 0
        self._waiters: set[asyncio.Event] = set()

    async def acquire(self, size: int, bypass: Callable[[], bool]) -> int:
        """Book ``size`` bytes, or nothing once ``bypass()`` holds; returns what was booked."""
        while True:
            if bypass():
                return 0
            if self.used == 0 or self.used + size <= self.limit:
                self.used += size
                self.peak = max(self.peak, self.used)
                return size
            event = asyncio.Event()
            self._waiters.add(event)
            try:
                await event.wait()
            finally:
                self._waiters.discard(event)

    def charge(self, size: int) -> None:
        """Count bytes that arrived without a booking (the frontier part's); never waits."""
        if size > 0:
            self.used += size
            self.peak = max(self.peak, self.used)

    def release(self, size: int) -> None:
        if size:
            self.used -= size
            self.wake()

    def wake(self) -> None:
        """Let waiters re-check (bytes released or a frontier moved)."""
        for event in self._waiters:
            event.set()
