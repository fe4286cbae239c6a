"""Time, injected: the controllers, the node plugin's reporter, collection and scrub ask a
``Clock``, so tests advance time instead of sleeping (one manual clock drives them all).

``now`` is wall-clock UTC (written into status as RFC 3339 seconds); ``monotonic`` and
``call_later`` schedule work. ``SystemClock`` is the real one; tests use a manual clock whose
``advance`` runs what came due.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> datetime.datetime:
        """The current UTC time (timezone-aware)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back; only differences mean anything."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` (on the event loop) once ``delay`` seconds have passed."""
        ...


class SystemClock:
    def now(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback)


async def sleep(clock: Clock, seconds: float) -> None:
    """Sleep on ``clock`` (a manual clock wakes this when advanced past it)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not done.done():
            done.set_result(None)

    timer = clock.call_later(seconds, wake)
    try:
        await done
    finally:
        timer.cancel()


async def wait(event: asyncio.Event, clock: Clock, seconds: float) -> bool:
    """Wait for ``event`` at most ``seconds`` on ``clock``; True when it was set."""
    if event.is_set():
        return True
    sleeper = asyncio.ensure_future(sleep(clock, seconds))
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({sleeper, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sleeper, waiter):
            task.cancel()
        await asyncio.gather(sleeper, waiter, return_exceptions=True)
    return event.is_set()


def rfc3339(moment: datetime.datetime) -> str:
    """Kubernetes' ``metav1.Time`` form: UTC, to the second."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(value: object) -> datetime.datetime | None:
    """A ``metav1.Time`` string back to a datetime; None when absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return parsed
