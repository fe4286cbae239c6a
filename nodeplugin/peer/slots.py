"""The peer port's stream slots: how many file answers run at once, overall and per caller, and
how long a request waits for its turn.

- At most ``streams`` answers run at once, and at most ``per_peer`` of them for one caller (a
  ``reviews.Identity.key``: one plugin Pod), so no single caller holds every slot.
- A request that cannot run yet waits its turn, first come first served among those allowed to
  run; at most ``max_waiting`` wait at once, and a caller has at most ``per_peer_open`` answers
  open (running or waiting).
- A wait ends after ``wait_seconds``. Then, or when the queue is full, the request is refused
  ``503`` (busy) with ``Retry-After``; a caller past its own bound is refused ``429``.

A slot is taken before the file is opened and before the status line is sent (``server.py``),
and given back exactly once when the answer ends, however it ends (``Slot.release``). Waiting
holds no file: only the request's connection.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses

RETRY_AFTER_SECONDS = 5
WAIT_SECONDS = 20.0
"""Below the pulling side's 30 s read timeout, so a refusal reaches a puller still listening."""
MAX_WAITING = 256
PER_PEER_OPEN = 64
"""The largest ``spec.download.concurrency`` a pulling plugin can have: its streams all wait
their turn rather than being refused."""


@dataclasses.dataclass(frozen=True, slots=True)
class Busy:
    """A refusal: ``code`` 429 (this caller has too many open) or 503 (the port is busy)."""

    code: int
    reason: str
    message: str
    retry_after: int = RETRY_AFTER_SECONDS


class Slot:
    def __init__(self, slots: Slots, peer: str) -> None:
        self._slots = slots
        self._peer = peer
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._slots._release(self._peer)


class Slots:
    def __init__(self, streams: int, *, per_peer: int | None = None,
                 per_peer_open: int = PER_PEER_OPEN, max_waiting: int = MAX_WAITING,
                 wait_seconds: float = WAIT_SECONDS) -> None:
        """``per_peer``: None gives half of ``streams`` (at least one)."""
        self.streams = max(1, streams)
        self.per_peer = max(1, per_peer if per_peer is not None else self.streams // 2)
        self.per_peer_open = max(self.per_peer, per_peer_open)
        self.max_waiting = max_waiting
        self.wait_seconds = wait_seconds
        self.running = 0
        self.refused = 0
        self._running: collections.Counter[str] = collections.Counter()
        self._open: collections.Counter[str] = collections.Counter()
        self._waiters: collections.deque[tuple[str, asyncio.Future[None]]] = collections.deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def running_of(self, peer: str) -> int:
        return self._running[peer]

    def open_of(self, peer: str) -> int:
        return self._open[peer]

    def _may_run(self, peer: str) -> bool:
        return self.running < self.streams and self.running_of(peer) < self.per_peer

    def _grant(self, peer: str) -> None:
        self.running += 1
        self._running[peer] += 1

    def _close(self, peer: str) -> None:
        self._open[peer] -= 1
        if self._open[peer] <= 0:
            del self._open[peer]

    def _busy(self, code: int, reason: str, message: str) -> Busy:
        self.refused += 1
        return Busy(code, reason, message)

    async def take(self, peer: str) -> Slot | Busy:
        """A slot for ``peer`` (at once or after waiting its turn), or why not."""
        if self.open_of(peer) >= self.per_peer_open:
            return self._busy(429, "TooManyRequests",
                              f"this caller already has {self.per_peer_open} answers open here; "
                              "retry once one ends")
        self._open[peer] += 1
        if self._may_run(peer):
            self._grant(peer)
            return Slot(self, peer)
        if len(self._waiters) >= self.max_waiting:
            self._close(peer)
            return self._busy(503, "ServiceUnavailable",
                              f"{self.max_waiting} requests already wait for one of "
                              f"{self.streams} streams; retry later")
        entry = (peer, asyncio.get_running_loop().create_future())
        self._waiters.append(entry)
        cancelled = False
        try:
            await asyncio.wait({entry[1]}, timeout=self.wait_seconds)
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            granted = entry[1].done() and not entry[1].cancelled()
            if not granted:
                self._waiters.remove(entry)
                entry[1].cancel()
                self._close(peer)
            elif cancelled:
                self._release(peer)  # granted as the wait was cancelled: given back at once
        if granted:
            return Slot(self, peer)
        return self._busy(503, "ServiceUnavailable",
                          f"every one of {self.streams} streams stayed busy for "
                          f"{self.wait_seconds:g}s; retry later")

    def _release(self, peer: str) -> None:
        self.running -= 1
        self._running[peer] -= 1
        if self._running[peer] <= 0:
            del self._running[peer]
        self._close(peer)
        for entry in list(self._waiters):
            if self.running >= self.streams:
                break
            waiter, future = entry
            if self._may_run(waiter):
                self._waiters.remove(entry)
                self._grant(waiter)
                future.set_result(None)
