"""Waiting on conditions in async tests: poll a predicate on the event loop (no wall-clock
assertions; the timeout is only a guard against a hang)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

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
