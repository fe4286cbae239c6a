"""Receiving a part in a worker thread: the downloader's fast path.

When the source can read ranges blocking (``hub.source.BlockingRanges``), each part's request is
sent and its body read by a thread of the node's receive pool straight into 1 MiB buffers
(``readinto``, no intermediate bytes objects); each filled buffer is handed to the event loop,
which queues it on the part exactly as the async path does (``ranges.deliver``). The event loop
then only moves buffers, so receiving, hashing and writing run on every core instead of sharing
one loop.

Everything around it stays as it is: the request slot is held on the loop for the whole request
(``download.concurrency``), the retry policy is ``ranges.fetch_with``'s, the look-ahead budget is
charged on delivery, and the node's rate limit is paid after every buffer (the thread waits for
the bucket). A part's stall timeout is the socket's read timeout. Cancelling the waiting task
aborts the request (its socket is shut down) and waits for the thread, so nothing outlives an
attempt.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from hub import errors as hub_errors
from nodeplugin.materialize import limits, ranges
from openapi import reasons

BUFFER_BYTES = 1 << 20
FRONTIER_BACKLOG = 1 << 20
"""Bytes of a frontier part (booked nothing) that may wait for its consumer before its thread
stops reading: the excess then stays with the sender, not in memory here, and it bounds what a
crash loses beyond the look-ahead budget."""

class Body(Protocol):
    """A range's body as ``hub.blocking.RangeBody`` reads it."""

    def readinto(self, buffer: memoryview) -> int:
        """One receive (blocking); raises when the connection breaks or the body ends early."""
        ...

    def abort(self) -> None:
        """Unblock ``readinto`` from another thread."""
        ...

    def close(self) -> None: ...


OpenBody = Callable[[int, int, float], Body]
"""``open(start, end_inclusive, stall_seconds)`` -> the range's body (blocking)."""


class BufferPool:
    """Reusable receive buffers, so steady streaming allocates (and page-faults) nothing.

    Any thread may take or give back; at most ``keep`` idle buffers are retained.
    """

    def __init__(self, size: int = BUFFER_BYTES, keep: int = 32) -> None:
        self.size = size
        self._keep = keep
        self._idle: collections.deque[bytearray] = collections.deque()

    def take(self) -> bytearray:
        try:
            return self._idle.pop()
        except IndexError:
            return bytearray(self.size)

    def give_back(self, chunks: Sequence[ranges.Chunk]) -> None:
        """Return the pool's buffers among consumed chunks (others are left to the collector)."""
        for chunk in chunks:
            base = chunk.obj if isinstance(chunk, memoryview) else chunk
            if (isinstance(base, bytearray) and len(base) == self.size
                    and len(self._idle) < self._keep):
                self._idle.append(base)


class _Request:
    """One request's thread side: reads the body into pooled buffers, hands them to the loop."""

    def __init__(self, part: ranges.Part, open_body: OpenBody, rate: limits.RateLimiter,
                 budget: limits.Budget | None, pool: BufferPool, stall: float,
                 loop: asyncio.AbstractEventLoop) -> None:
        self._part = part
        self._open = open_body
        self._rate = rate
        self._budget = budget
        self._pool = pool
        self._stall = stall
        self._loop = loop
        self._start = part.start + part.received
        self._received = part.received
        """The part's received bytes as this thread knows them (deliveries land later)."""
        self._lock = threading.Lock()
        self._body: Body | None = None
        self._aborted = False

    def abort(self) -> None:
        """Stop the request from the loop: the thread fails out of any wait on the socket."""
        with self._lock:
            self._aborted = True
            body = self._body
        if body is not None:
            body.abort()
        with self._part.flow:
            self._part.flow.notify_all()

    def _hold_back(self) -> None:
        """A frontier part waits while ``FRONTIER_BACKLOG`` of its bytes are not yet taken by
        its consumer (which is taking them: this is its file's frontier, so no deadlock)."""
        part = self._part
        if part.reserved:
            return
        with part.flow:
            while self._received - part.taken >= FRONTIER_BACKLOG and not self._aborted:
                part.flow.wait(1.0)

    def run(self) -> None:
        part = self._part
        body = self._open(self._start, part.end - 1, self._stall)
        with self._lock:
            self._body = body
            aborted = self._aborted
        try:
            if aborted:
                raise hub_errors.HubError(reasons.SOURCE_UNAVAILABLE, "the request was aborted")
            left = part.end - self._start
            while left > 0:
                self._hold_back()
                filled = self._fill(body, min(left, self._pool.size))
                self._received += filled
                left -= filled
                if self._rate.rate:
                    asyncio.run_coroutine_threadsafe(
                        self._rate.consume(filled), self._loop
                    ).result()
                if self._aborted:
                    raise hub_errors.HubError(reasons.SOURCE_UNAVAILABLE, "the request was aborted")
        finally:
            body.close()

    def _fill(self, body: Body, wanted: int) -> int:
        """Receive ``wanted`` bytes into one buffer and hand it over; what arrived before an
        error is handed over too, so a retry starts right after it."""
        buffer = self._pool.take()
        view = memoryview(buffer)
        filled = 0
        try:
            while filled < wanted:
                try:
                    filled += body.readinto(view[filled:wanted])
                except TimeoutError as exc:
                    raise TimeoutError(f"no progress for {self._stall:g}s") from exc
        finally:
            if filled:
                chunk: ranges.Chunk = buffer if filled == len(buffer) else memoryview(buffer)[
                    :filled]
                self._loop.call_soon_threadsafe(ranges.deliver, self._part, chunk, self._budget)
        return filled


async def fetch(
    part: ranges.Part,
    open_body: OpenBody,
    requests: limits.RequestLimiter,
    rate: limits.RateLimiter,
    policy: ranges.Policy,
    *,
    what: str,
    executor: concurrent.futures.Executor,
    pool: BufferPool,
    budget: limits.Budget | None = None,
) -> None:
    """``ranges.fetch`` with each request read by a thread of ``executor``."""

    async def once() -> None:
        loop = asyncio.get_running_loop()
        request = _Request(part, open_body, rate, budget, pool, policy.stall_seconds, loop)
        future = loop.run_in_executor(executor, request.run)
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            request.abort()
            await _settle(future)
            raise
        # Every buffer the thread handed over was queued before its end was (FIFO callbacks).

    await ranges.fetch_with(part, once, requests, policy, what=what)


async def _settle(future: asyncio.Future[None]) -> None:
    """Wait for an aborted request's thread to end (it ends promptly), whatever it raised."""
    while not future.done():
        try:
            await asyncio.wait([future])
        except asyncio.CancelledError:
            continue
    if not future.cancelled():
        future.exception()  # retrieved, so it is not reported as never retrieved
