"""Range planning, and a part fetched again from its last byte after resets and stalls."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

import pytest

from hub import errors as hub_errors
from nodeplugin.materialize import limits, ranges

FAST = ranges.Policy(stall_seconds=0.2, max_failures=3, retry_base_seconds=0.0)


def test_plan_cuts_from_the_offset() -> None:
    parts = ranges.plan(25, 5, 8)
    assert [(p.start, p.end) for p in parts] == [(5, 13), (13, 21), (21, 25)]
    assert [p.index for p in parts] == [0, 1, 2]
    assert ranges.plan(10, 10, 8) == []


class Server:
    """A file served in 1000-byte chunks with one fault per request in ``faults``."""

    def __init__(self, data: bytes, faults: list[str]) -> None:
        self.data = data
        self.faults = faults
        self.requests: list[tuple[int, int]] = []
        self.open_streams = 0
        """Streams started and not closed yet (a response whose connection is still held)."""
        self.first_chunk = asyncio.Event()

    async def open(self, start: int, end: int) -> AsyncIterator[bytes]:
        self.requests.append((start, end))
        fault = self.faults.pop(0) if self.faults else ""
        sent = 0
        self.open_streams += 1
        try:
            for offset in range(start, end + 1, 1000):
                if sent >= 2500 and fault == "reset":
                    raise hub_errors.HubError("SourceUnavailable", "network error (ReadError)")
                if sent >= 2500 and fault in ("stall", "hold"):
                    await asyncio.sleep(30)
                if sent >= 2500 and fault == "short":
                    return
                if fault == "denied":
                    raise hub_errors.HubError("AccessDenied", "refused", status=403)
                chunk = self.data[offset : min(end + 1, offset + 1000)]
                sent += len(chunk)
                yield chunk
                self.first_chunk.set()
            if fault == "long":
                yield b"x"
        finally:
            self.open_streams -= 1


async def _fetch(server: Server, part: ranges.Part) -> bytes:
    await ranges.fetch(
        part, server.open, limits.RequestLimiter(2), limits.RateLimiter(0), FAST, what="f"
    )
    return b"".join(part.chunks)


@pytest.mark.parametrize("fault", ["reset", "stall", "short"])
async def test_retries_from_the_last_byte(fault: str) -> None:
    data = os.urandom(10_000)
    server = Server(data, [fault, fault])
    part = ranges.Part(0, 1000, 9000)
    assert await _fetch(server, part) == data[1000:9000]
    assert server.requests == [(1000, 8999), (4000, 8999), (7000, 8999)]


@pytest.mark.parametrize("fault", ["", "reset", "stall", "short", "long", "denied"])
async def test_every_stream_is_closed_whatever_happens(fault: str) -> None:
    server = Server(os.urandom(10_000), [fault] * 3)
    with contextlib.suppress(hub_errors.HubError, OSError, TimeoutError, EOFError):
        await _fetch(server, ranges.Part(0, 0, 10_000))
    assert server.requests
    assert server.open_streams == 0


@pytest.mark.parametrize("where", ["reading", "pacing"])
async def test_a_cancelled_fetch_closes_its_stream(where: str) -> None:
    """Cancelled inside the stream (waiting for bytes) or outside it (the rate limit's sleep,
    with the stream suspended after a chunk): either way the stream is closed at once."""
    server = Server(os.urandom(10_000), ["hold"])
    pacing = asyncio.Event()

    async def sleep_forever(seconds: float) -> None:
        pacing.set()
        await asyncio.Event().wait()

    rate = limits.RateLimiter(1 if where == "pacing" else 0, sleep=sleep_forever)
    task = asyncio.create_task(ranges.fetch(
        ranges.Part(0, 0, 10_000), server.open, limits.RequestLimiter(1), rate, FAST, what="f"
    ))
    async with asyncio.timeout(10):
        await (pacing.wait() if where == "pacing" else server.first_chunk.wait())
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert server.open_streams == 0


async def test_refusals_are_not_retried() -> None:
    server = Server(os.urandom(5000), ["denied"])
    with pytest.raises(hub_errors.HubError) as refused:
        await _fetch(server, ranges.Part(0, 0, 5000))
    assert refused.value.reason == "AccessDenied"
    assert len(server.requests) == 1


async def test_gives_up_after_repeated_failures_without_progress() -> None:
    class Dead:
        calls = 0

        async def open(self, start: int, end: int) -> AsyncIterator[bytes]:
            self.calls += 1
            raise hub_errors.HubError("SourceUnavailable", "hub answered 503", status=503)
            yield b""  # pragma: no cover - makes this an async generator

    dead = Dead()
    with pytest.raises(hub_errors.HubError):
        await ranges.fetch(
            ranges.Part(0, 0, 10), dead.open, limits.RequestLimiter(1), limits.RateLimiter(0),
            FAST, what="f",
        )
    assert dead.calls == FAST.max_failures


def test_schedule_starts_every_file_before_reading_ahead() -> None:
    schedule = ranges.Schedule([("a", ranges.plan(30, 0, 10)), ("b", ranges.plan(20, 0, 10)),
                                ("c", [])])
    handed = []
    for _ in range(3):
        item = schedule.next()
        assert item is not None
        handed.append(item)
    # One part of each file first, then the earliest remaining part (read-ahead in "a").
    assert [(owner, part.start) for _, owner, part in handed] == [("a", 0), ("b", 0), ("a", 10)]
    schedule.done(handed[1][0])  # b's first part arrived: b streams on before a reads further
    item = schedule.next()
    assert item is not None and (item[1], item[2].start) == ("b", 10)
    item = schedule.next()
    assert item is not None and (item[1], item[2].start) == ("a", 20)
    assert schedule.next() is None


async def test_unbooked_bytes_are_charged_and_booked_ones_are_not() -> None:
    data = os.urandom(10_000)
    budget = limits.Budget(1 << 20)
    frontier = ranges.Part(0, 0, 4000)  # acquired nothing: its bytes are charged as they arrive
    await ranges.fetch(frontier, Server(data, []).open, limits.RequestLimiter(2),
                       limits.RateLimiter(0), FAST, what="f", budget=budget)
    assert (frontier.booked, budget.used) == (4000, 4000)
    ahead = ranges.Part(1, 4000, 10_000)
    ahead.booked = await budget.acquire(ahead.length, lambda: False)
    await ranges.fetch(ahead, Server(data, []).open, limits.RequestLimiter(2),
                       limits.RateLimiter(0), FAST, what="f", budget=budget)
    assert (ahead.booked, budget.used) == (6000, 10_000)
    assert b"".join(frontier.chunks) + b"".join(ahead.chunks) == data
