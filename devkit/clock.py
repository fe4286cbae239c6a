"""A manual ``timing.clock.Clock`` for tests: time moves only when ``advance`` says so."""

from __future__ import annotations

import dataclasses
import datetime
import heapq
import itertools
from collections.abc import Callable

START = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


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
        """Move time forward and run every timer that came due, in order; returns how many."""
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

    def pending(self) -> list[float]:
        """Delays from now of the timers still waiting (for assertions)."""
        return sorted(t.due - self._elapsed for _, _, t in self._timers if not t.cancelled)
