"""A hollow node's cache: which digests it holds and which it is downloading, without a byte.

``Disk`` plays every piece the status composer reads (``nodestore.compose``'s Protocols: the
stock, the tree sizes, the running attempts, the filesystem's figures) from two tables: the
published digests with their sizes, and the running downloads, each receiving its size evenly
over a set number of seconds (the download model). When one ends its digest is published and
``changed`` is called, as the real materializer's completion wakes the reporter. The records a
quiet node has none of (failures, quarantine, live references, usage) are the empty ``Nothing``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable

from nodeplugin.cache import quarantine, usage
from nodeplugin.materialize import capacity, interface
from nodeplugin.materialize import failures as failure_records

TOTAL_BYTES = 8 << 40
"""Each hollow node's cache filesystem (8 TiB), so no watermark is ever passed."""


@dataclasses.dataclass(slots=True)
class Download:
    size: int
    started: float
    seconds: float


class Disk:
    def __init__(self, clock: Callable[[], float], changed: Callable[[], None] = lambda: None
                 ) -> None:
        self._clock = clock
        self.changed = changed
        self.published: dict[str, int] = {}
        self._running: dict[str, Download] = {}
        self._timers: list[asyncio.TimerHandle] = []

    def hold(self, digest: str, size: int) -> None:
        """A tree that was already on the node at start."""
        self.published[digest] = size

    def start(self, digest: str, size: int, seconds: float) -> None:
        """Begin downloading ``digest``; it is published ``seconds`` later."""
        if digest in self.published or digest in self._running:
            return
        self._running[digest] = Download(size, self._clock(), seconds)
        loop = asyncio.get_running_loop()
        self._timers.append(loop.call_later(seconds, self._finish, digest))
        self.changed()

    def _finish(self, digest: str) -> None:
        download = self._running.pop(digest, None)
        if download is not None:
            self.published[digest] = download.size
            self.changed()

    def close(self) -> None:
        for timer in self._timers:
            timer.cancel()

    # compose.Stock
    def digests(self) -> list[str]:
        return sorted(self.published)

    def stored_bytes(self, running: Iterable[tuple[str, int]]) -> int:
        return sum(self.published.values()) + sum(received for _, received in running)

    # compose.TreeFacts
    def size_bytes(self, digest: str) -> int | None:
        return self.published.get(digest)

    # compose.Running (and the /model/downloads answer)
    def running(self) -> list[interface.Progress]:
        now = self._clock()
        return [
            interface.Progress(
                digest, interface.State.DOWNLOADING,
                received_bytes=min(d.size, int(d.size * (now - d.started) / d.seconds)),
                total_bytes=d.size)
            for digest, d in sorted(self._running.items())
        ]

    # compose.Space
    def usage(self) -> capacity.Usage:
        return capacity.Usage(TOTAL_BYTES, self.stored_bytes(
            (p.digest, p.received_bytes) for p in self.running()))


class Nothing:
    """No failure, no quarantine, no usage record (``compose.Failures``, ``Held``,
    ``UsageRecords``)."""

    def all(self) -> list[failure_records.Failure]:
        return []


class NoneHeld:
    def all(self) -> list[quarantine.Entry]:
        return []


class NoUsage:
    def all(self) -> dict[str, usage.Usage]:
        return {}


class NoMounts:
    """No Pod mounts anything on a hollow node (``compose.Referenced``)."""

    def digests(self) -> set[str]:
        return set()
