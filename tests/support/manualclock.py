"""A manual ``nodeplugin.clock.Clock``: time moves only when a test says so."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import heapq
import itertools
from collections.abc import Callable

START = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.UTC)


@dataclasses.dataclass
class _Timer:
    due: float
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    def __init__(self, start: datetime.datetime = START) -> None:
        self._start = start
        self._elapsed = 0.0
        self._timers: list[tuple[float, int, _Timer]] = []
        self._order = itertools.count()

    def now(self) -> datetime.datetime:
        return self._start + datetime.timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        return self._elapsed

    def call_later(self, delay: float, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(self._elapsed + max(0.0, delay), callback)
        heapq.heappush(self._timers, (timer.due, next(self._order), timer))
        return timer

    def advance(self, seconds: float) -> int:
        """Move time forward, running every timer that came due, in order; how many ran."""
        target = self._elapsed + seconds
        fired = 0
        while self._timers and self._timers[0][0] <= target:
            due, _, timer = heapq.heappop(self._timers)
            self._elapsed = max(self._elapsed, due)
            if not timer.cancelled:
                timer.callback()
                fired += 1
        self._elapsed = target
        return fired

    def pending(self) -> int:
        return sum(1 for _, _, t in self._timers if not t.cancelled)


async def settle(rounds: int = 20) -> None:
    """Let the event loop run what became ready (no wall-clock waiting)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
