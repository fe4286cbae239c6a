"""When the status is written: on change at once, download progress on thresholds only.

Each report composes the whole status from the node (``compose``) and compares it with the last
one written:

- anything but progress changed (an entry's state, ``referenced``, the hour of
  ``lastUsedTime``, ``usedPercent``, a condition, ``observedGeneration``, an entry appearing or
  going): written at once, with the current progress;
- only progress changed (``downloadedBytes``, and ``storedBytes`` while a download runs):
  written only once 30 seconds passed since the last write and some download moved by 5% of
  its size since then, at most twenty times per download and at most twice a minute;
- nothing changed: nothing is written, so a quiet node writes nothing.

Reports run when something says it changed (``changed``) and on a tick (5 s), which is how
progress and usage that nobody announces are noticed. The plugin's own writes do not wake it:
the object's watch ignores status-only changes. The first report after start, or after the
object was recreated (``reset``), writes everything.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import kube
from nodeplugin.nodestore import status as statuses
from timing import clock as clocks

log = logging.getLogger(__name__)

TICK_SECONDS = 5.0
PROGRESS_INTERVAL = 30.0
PROGRESS_STEP = 0.05
PER_DOWNLOAD = 20
PER_MINUTE = 2
MINUTE = 60.0

Compose = Callable[[], Awaitable[Mapping[str, Any]]]
Write = Callable[[Mapping[str, Any]], Awaitable[None]]


class Reporter:
    def __init__(
        self,
        compose: Compose,
        write: Write,
        *,
        clock: clocks.Clock,
        enabled: Callable[[], bool] = lambda: True,
        tick: float = TICK_SECONDS,
    ) -> None:
        self._compose = compose
        self._write = write
        self._clock = clock
        self._enabled = enabled
        self._tick = tick
        self._wake = asyncio.Event()
        self._last: Mapping[str, Any] | None = None
        self._last_time = 0.0
        self._progress_times: collections.deque[float] = collections.deque()
        self._per_download: dict[str, int] = {}
        self.last_error = ""
        self._counted: list[str] = []
        self.writes = 0
        self.progress_writes = 0
        self.write_times: list[float] = []
        """Monotonic times of every write (tests and the benchmark count them)."""

    def changed(self) -> None:
        """Something the status shows may have changed: report soon."""
        self._wake.set()

    def reset(self) -> None:
        """The object is new (or was recreated): the next report writes everything."""
        self._last = None
        self._wake.set()

    async def run(self) -> None:
        while True:
            await clocks.wait(self._wake, self._clock, self._tick)
            self._wake.clear()
            try:
                await self.report()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("composing the status failed; trying again")

    async def report(self) -> bool:
        """Compose the status and write it if the rules say so; True when written."""
        if not self._enabled():
            self._last = None
            return False
        current = await self._compose()
        now = self._clock.monotonic()
        last = self._last
        progress = False
        if last is not None:
            if current == last:
                return False
            if statuses.without_progress(current) == statuses.without_progress(last):
                moved = self._moved(current, last, now)
                if not moved:
                    return False
                progress = True
        try:
            await self._write(current)
        except kube.NotFound:
            log.info("the NodeModelStore is gone; status waits for it to come back")
            self._last = None
            return False
        except kube.KubeError as exc:
            if str(exc) != self.last_error:
                log.warning("writing the status failed (trying again): %s", exc)
                self.last_error = str(exc)
            return False
        self.last_error = ""
        self._last, self._last_time = current, now
        self.writes += 1
        self.write_times.append(now)
        if progress:
            self.progress_writes += 1
            self._progress_times.append(now)
            for digest in self._counted:
                self._per_download[digest] = self._per_download.get(digest, 0) + 1
        running = statuses.progress_of(current)
        for digest in list(self._per_download):
            if digest not in running:
                del self._per_download[digest]
        return True

    def _moved(self, current: Mapping[str, Any], last: Mapping[str, Any], now: float) -> bool:
        """Whether a progress-only change may be written now (and which downloads count)."""
        self._counted = []
        if now - self._last_time < PROGRESS_INTERVAL:
            return False
        while self._progress_times and now - self._progress_times[0] >= MINUTE:
            self._progress_times.popleft()
        if len(self._progress_times) >= PER_MINUTE:
            return False
        before = statuses.progress_of(last)
        for digest, (received, size) in statuses.progress_of(current).items():
            if size <= 0 or self._per_download.get(digest, 0) >= PER_DOWNLOAD:
                continue
            if received - before.get(digest, (0, 0))[0] >= PROGRESS_STEP * size:
                self._counted.append(digest)
        return bool(self._counted)
