"""Byte ranges of a file: how a file is cut into parts, and fetching one part reliably.

A part is one HTTP range request. Its bytes go, in order, into the part's queue, from which the
file's single consumer hashes and writes them. A part whose stream makes no progress for the
stall timeout, ends early or fails with a retryable hub error is requested again from its last
received byte; after ``max_failures`` consecutive failures without progress the error stands.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

from hub import errors as hub_errors
from nodeplugin.materialize import limits
from openapi import reasons
from timing import backoff as backoffs

log = logging.getLogger(__name__)
T = TypeVar("T")

OpenStream = Callable[[int, int], AsyncIterator[bytes]]
"""``open(start, end_inclusive)`` -> the bytes of that range of the file, in order."""
Chunk = bytes | bytearray | memoryview
"""Received bytes: ``bytes`` from the async path, pooled buffers from ``receive``."""


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    stall_seconds: float = 30.0
    max_failures: int = 5
    retry_base_seconds: float = 0.5
    retry_cap_seconds: float = 30.0

    @property
    def retry(self) -> backoffs.Backoff:
        """The wait after a part's n-th failure in a row: the base doubling to the cap."""
        return backoffs.Backoff(self.retry_base_seconds, self.retry_cap_seconds)


class Part:
    """One range ``[start, end)`` of a file; received bytes wait in ``chunks`` until consumed."""

    def __init__(self, index: int, start: int, end: int) -> None:
        self.index = index
        self.start = start
        self.end = end
        self.received = 0
        self.booked = 0
        """Budget bytes this part holds; given back as the consumer takes its chunks."""
        self.done = False
        self.error: BaseException | None = None
        self.chunks: collections.deque[Chunk] = collections.deque()
        self.queued = 0
        """Bytes in ``chunks``."""
        self.reserved = False
        """Its whole length was booked before its request (look-ahead); else it is its file's
        frontier, whose bytes are charged as they arrive and which a reader thread holds back
        (``receive``) once ``FRONTIER_BACKLOG`` bytes wait for the consumer."""
        self.taken = 0
        """Bytes the consumer took so far; ``flow`` is notified on every take."""
        self.flow = threading.Condition()
        self._wanted = 1
        self._ready = asyncio.Event()

    @property
    def length(self) -> int:
        return self.end - self.start

    def push(self, chunk: Chunk) -> None:
        self.chunks.append(chunk)
        self.queued += len(chunk)
        if self.queued >= self._wanted:
            self._ready.set()

    def take(self, limit: int, max_chunks: int) -> list[Chunk]:
        """Up to ``limit`` bytes (at least one chunk) of queued chunks, oldest first."""
        batch: list[Chunk] = []
        size = 0
        while self.chunks and size < limit and len(batch) < max_chunks:
            chunk = self.chunks.popleft()
            batch.append(chunk)
            size += len(chunk)
        self.queued -= size
        if size:
            with self.flow:
                self.taken += size
                self.flow.notify_all()
        return batch

    def finish(self, error: BaseException | None = None) -> None:
        self.done = True
        self.error = error
        self._ready.set()

    async def wait(self, wanted: int = 1) -> None:
        """Until ``wanted`` bytes (or all the part has left) are queued, or the part ended."""
        self._wanted = max(1, min(wanted, self.length - self.received + self.queued))
        while self.queued < self._wanted and not self.done:
            self._ready.clear()
            await self._ready.wait()


class _Stream(Generic[T]):
    def __init__(self, owner: T, parts: list[Part]) -> None:
        self.owner = owner
        self.parts = collections.deque(parts)
        self.in_flight = 0


class Schedule(Generic[T]):
    """Hands out the parts of several files to a pool of workers.

    A free worker first starts a file with nothing in flight: that part is at (or next to) its
    file's hash frontier and needs no look-ahead memory, so many files stream at once for free.
    Only when every file with parts left already has one in flight does a worker take the
    earliest remaining part, reading ahead within a file (which books look-ahead memory).
    """

    def __init__(self, files: list[tuple[T, list[Part]]]) -> None:
        self._streams: dict[int, _Stream[T]] = {}
        for owner, parts in files:
            if parts:
                stream = _Stream(owner, parts)
                self._streams[id(stream)] = stream

    def next(self) -> tuple[_Stream[T], T, Part] | None:
        chosen: _Stream[T] | None = None
        for stream in self._streams.values():
            if chosen is None:
                chosen = stream
            if stream.in_flight == 0:
                chosen = stream
                break
        if chosen is None:
            return None
        part = chosen.parts.popleft()
        chosen.in_flight += 1
        if not chosen.parts:
            del self._streams[id(chosen)]
        return chosen, chosen.owner, part

    def done(self, stream: _Stream[T]) -> None:
        """The part handed out with ``stream`` has been fetched (or failed)."""
        stream.in_flight -= 1


def plan(size: int, offset: int, part_size: int) -> list[Part]:
    """Cut ``[offset, size)`` into parts of ``part_size`` bytes (the last one shorter)."""
    step = max(1, part_size)
    return [
        Part(index, start, min(size, start + step))
        for index, start in enumerate(range(offset, size, step))
    ]


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, hub_errors.HubError):
        return exc.reason == reasons.SOURCE_UNAVAILABLE
    return isinstance(exc, (OSError, TimeoutError, EOFError))


async def fetch(
    part: Part,
    open_stream: OpenStream,
    requests: limits.RequestLimiter,
    rate: limits.RateLimiter,
    policy: Policy,
    *,
    what: str,
    budget: limits.Budget | None = None,
) -> None:
    """Fetch ``part`` into its queue, retrying from the last byte; raises when it keeps failing.

    ``what`` is a safe description for logs (a path, never a URL). With ``budget``, queued bytes
    beyond the part's booking are charged to it (``Part.booked`` grows; the consumer gives back).
    """

    async def once() -> None:
        await _stream_once(part, open_stream, rate, policy, budget)

    await fetch_with(part, once, requests, policy, what=what)


async def fetch_with(
    part: Part,
    once: Callable[[], Awaitable[None]],
    requests: limits.RequestLimiter,
    policy: Policy,
    *,
    what: str,
) -> None:
    """The retry loop of ``fetch`` around ``once()``, one request from the part's last byte
    (``receive`` uses it with requests read in threads)."""
    failures = 0
    while part.received < part.length:
        before = part.received
        try:
            async with requests.slot():
                await once()
            if part.received < part.length:
                raise EOFError("the range ended early")
        except (hub_errors.HubError, OSError, TimeoutError, EOFError) as exc:
            if part.received > before:
                failures = 0
            failures += 1
            if not _retryable(exc) or failures >= policy.max_failures:
                raise
            wait = policy.retry.delay(failures)
            if isinstance(exc, hub_errors.HubError) and exc.retry_after is not None:
                wait = min(policy.retry_cap_seconds, max(wait, exc.retry_after))
            log.info(
                "%s bytes %d-%d: %s; retrying from byte %d in %.1fs",
                what, part.start, part.end - 1, _describe(exc),
                part.start + part.received, wait,
            )
            await asyncio.sleep(wait)


async def _stream_once(
    part: Part,
    open_stream: OpenStream,
    rate: limits.RateLimiter,
    policy: Policy,
    budget: limits.Budget | None,
) -> None:
    stream = open_stream(part.start + part.received, part.end - 1)
    try:
        while part.received < part.length:
            try:
                async with asyncio.timeout(policy.stall_seconds):
                    chunk = await anext(stream)
            except StopAsyncIteration:
                return
            except TimeoutError as exc:
                raise TimeoutError(f"no progress for {policy.stall_seconds:g}s") from exc
            room = part.length - part.received
            if len(chunk) > room:
                raise hub_errors.HubError(
                    reasons.SOURCE_UNAVAILABLE, "the hub sent more bytes than the range holds"
                )
            deliver(part, chunk, budget)
            await rate.consume(len(chunk))
        # Read the response to its end so its connection goes back to the pool for reuse.
        async with asyncio.timeout(policy.stall_seconds):
            async for _extra in stream:
                raise hub_errors.HubError(
                    reasons.SOURCE_UNAVAILABLE, "the hub sent more bytes than the range holds"
                )
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


def deliver(part: Part, chunk: Chunk, budget: limits.Budget | None) -> None:
    """Queue received bytes on their part (on the event loop); with ``budget``, what the part
    holds beyond its booking is charged to it."""
    part.received += len(chunk)
    part.push(chunk)
    unbooked = part.queued - part.booked
    if budget is not None and unbooked > 0:
        budget.charge(unbooked)
        part.booked += unbooked


def _describe(exc: BaseException) -> str:
    if isinstance(exc, hub_errors.HubError):
        return exc.message
    return f"{type(exc).__name__}: {exc}"
