"""Waiting on conditions: poll a predicate on the event loop in async tests, or in a blocking
test against processes (no wall-clock assertions; the timeout is only a guard against a hang)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

GUARD = 30.0


async def until(predicate: Callable[[], object], *, guard: float = GUARD,
                what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + guard
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"{what} not reached within the {guard}s guard")
        await asyncio.sleep(0.005)


async def until_async(read: Callable[[], Awaitable[object]], wanted: object, *,
                      guard: float = GUARD) -> None:
    """Until ``await read()`` equals ``wanted`` (polled on the loop; ``guard`` against a hang)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + guard
    seen: object = None
    while (seen := await read()) != wanted:
        if loop.time() > deadline:
            raise AssertionError(f"wanted {wanted!r}, still {seen!r} after the {guard}s guard")
        await asyncio.sleep(0.01)


def polled(what: str, check: Callable[[], T | None], timeout: float = 60.0) -> T:
    """Blocking: ``check()`` every 50 ms until it gives something true, which is returned."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.05)
