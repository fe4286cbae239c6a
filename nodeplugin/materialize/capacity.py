"""Reservations of disk space for downloads against the cache filesystem's high watermark.

A download reserves what it has yet to write. Admission counts the filesystem's current usage plus
what every running download has yet to write, so two downloads that each fit but not together are
never both admitted: the check and the booking happen in one step on the event loop. A
reservation that does not fit asks ``make_room`` (the plugin's collection) to remove unused
content first, then tries once more; what still does not fit fails.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Awaitable, Callable

from nodeplugin import errors
from openapi import nodestore


class InsufficientCapacity(errors.Shown):
    """The reservation does not fit under the high watermark."""

    def __init__(self, message: str, *, needed: int, available: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.available = available


@dataclasses.dataclass(frozen=True, slots=True)
class Usage:
    total_bytes: int
    used_bytes: int


def statvfs_usage(path: str | os.PathLike[str]) -> Usage:
    st = os.statvfs(path)
    total = st.f_blocks * st.f_frsize
    return Usage(total, total - st.f_bfree * st.f_frsize)


class Reservation:
    """Space booked for one download; ``wrote`` moves bytes from booked to used."""

    def __init__(self, ledger: Capacity, key: str, size: int) -> None:
        self._ledger = ledger
        self.key = key
        self.remaining = size

    def wrote(self, size: int) -> None:
        self.remaining = max(0, self.remaining - size)

    def release(self) -> None:
        self._ledger._release(self)


class Capacity:
    """The node's space ledger for one cache filesystem."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        high_percent: int = nodestore.HIGH_PERCENT.default,
        usage: Callable[[str | os.PathLike[str]], Usage] = statvfs_usage,
        make_room: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        self._root = root
        self._usage = usage
        self.high_percent = high_percent
        self.make_room = make_room
        """Called with the bytes a reservation needs when it does not fit (collection)."""
        self._held: dict[int, Reservation] = {}

    def usage(self) -> Usage:
        return self._usage(self._root)

    def outstanding(self) -> int:
        """What running downloads have booked and not written yet."""
        return sum(r.remaining for r in self._held.values())

    def reserve(self, key: str, size: int) -> Reservation:
        """Book ``size`` bytes or raise ``InsufficientCapacity``; never awaits, so it is atomic."""
        usage = self._usage(self._root)
        limit = usage.total_bytes * self.high_percent // 100
        available = max(0, limit - usage.used_bytes - self.outstanding())
        if size > available:
            raise InsufficientCapacity(
                f"needs {size} bytes, {available} available under the {self.high_percent}% "
                "high watermark",
                needed=size,
                available=available,
            )
        reservation = Reservation(self, key, size)
        self._held[id(reservation)] = reservation
        return reservation

    async def admit(self, key: str, size: int) -> Reservation:
        """``reserve``, making room first when it does not fit (one more try after that)."""
        try:
            return self.reserve(key, size)
        except InsufficientCapacity:
            if self.make_room is None:
                raise
        await self.make_room(size)
        return self.reserve(key, size)

    def _release(self, reservation: Reservation) -> None:
        self._held.pop(id(reservation), None)
