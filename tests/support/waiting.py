"""Waiting on conditions in async tests: poll a predicate on the event loop (no wall-clock
assertions; the timeout is only a guard against a hang)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

GUARD = 30.0


async def until(predicate: Callable[[], object], *, guard: float = GUARD,
                what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + guard
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"{what} not reached within the {guard}s guard")
        await asyncio.sleep(0.005)
