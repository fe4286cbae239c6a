"""``lastUsedTime`` (truncated to the hour) and ``referenced`` per digest, kept in ``state/``.

Collection orders trees by ``lastUsedTime`` and the status report lists both, so they must survive
restarts. The file is rewritten atomically, and only when a value changes: a digest's first
reference, its last unreference, or a new hour; so fifty mounts of one digest write at most once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import logging
import pathlib
from collections.abc import Callable, Iterable

from durable import disk

log = logging.getLogger(__name__)
FILE_NAME = "usage.json"


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def hour_of(moment: datetime.datetime) -> datetime.datetime:
    return moment.astimezone(datetime.UTC).replace(minute=0, second=0, microsecond=0)


def format_time(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclasses.dataclass(frozen=True, slots=True)
class Usage:
    last_used: datetime.datetime
    """Truncated to the hour, UTC."""
    referenced: bool


class UsageStore:
    def __init__(
        self, path: pathlib.Path, *, clock: Callable[[], datetime.datetime] = utcnow
    ) -> None:
        self._path = path
        self._clock = clock
        self._entries: dict[str, Usage] = {}
        self._write_lock = asyncio.Lock()
        self._activity: dict[str, datetime.datetime] = {}
        self._listeners: list[Callable[[set[str]], None]] = []
        self._hour = (datetime.datetime.min.replace(tzinfo=datetime.UTC),) * 2

    def add_listener(self, listener: Callable[[set[str]], None]) -> None:
        """Call ``listener(digests)`` after each change that was stored (a first reference, a
        last unreference, a new hour), on the event loop."""
        self._listeners.append(listener)

    def last_activity(self, digest: str) -> datetime.datetime | None:
        """When this process last saw the digest mounted, unmounted or asked for (exact, not
        truncated); None when it has not since it started."""
        return self._activity.get(digest)

    def load(self) -> None:
        """Read the file; a missing or unreadable one starts empty (logged, then rebuilt)."""
        try:
            raw = json.loads(self._path.read_bytes())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", self._path, exc)
            return
        entries: dict[str, Usage] = {}
        for digest, item in (raw.get("digests") or {}).items():
            try:
                moment = datetime.datetime.strptime(item["lastUsedTime"], "%Y-%m-%dT%H:%M:%SZ")
                entries[digest] = Usage(moment.replace(tzinfo=datetime.UTC),
                                        bool(item["referenced"]))
            except (KeyError, TypeError, ValueError):
                log.warning("ignoring a malformed usage entry for %s", digest)
        self._entries = entries

    def get(self, digest: str) -> Usage | None:
        return self._entries.get(digest)

    def all(self) -> dict[str, Usage]:
        return dict(self._entries)

    def is_current(self, digest: str, *, referenced: bool) -> bool:
        """True when ``mark`` would change nothing now (the entry holds this hour and flag and
        no change is queued)."""
        entry = self._entries.get(digest)
        if entry is None or entry.referenced is not referenced or self._write_lock.locked():
            return False
        return entry.last_used == self._this_hour()

    def _this_hour(self) -> datetime.datetime:
        """``hour_of`` the clock's now; computed again only once the hour is over (a warm mount
        asks for it every time)."""
        now = self._clock()
        hour, ends = self._hour
        if not hour <= now < ends:
            hour = hour_of(now)
            self._hour = (hour, hour + datetime.timedelta(hours=1))
        return hour

    async def mark(self, digest: str, *, referenced: bool) -> None:
        """Record a use now; writes only on a change. Raises OSError when it cannot be stored."""
        moment = self._clock()
        self._activity[digest] = moment
        if self.is_current(digest, referenced=referenced):
            # Nothing queued (every change holds the lock while it waits) and nothing to change:
            # the fifty mounts of a warm digest skip the lock. With a change queued, which may
            # be the opposite one, the mark waits its turn below.
            return
        entry = Usage(hour_of(moment), referenced)

        def change(entries: dict[str, Usage]) -> None:
            entries[digest] = entry

        await self._commit(change)

    async def touch(self, digest: str) -> None:
        """A mount asked for the digest (published or not): it counts as used now.

        ``referenced`` keeps its value; partial downloads nobody asked for in 24 hours become
        removable by this time (``stale.removable_partials``).
        """
        moment = self._clock()
        self._activity[digest] = moment
        now = hour_of(moment)

        def change(entries: dict[str, Usage]) -> None:
            previous = entries.get(digest)
            entries[digest] = Usage(now, previous.referenced if previous else False)

        await self._commit(change)

    async def reconcile(self, referenced: Iterable[str], known: Iterable[str]) -> None:
        """At start: flags from the live mounts; referenced digests count as used now."""
        moment = self._clock()
        now = hour_of(moment)
        live = set(referenced)
        every = live | set(known)
        for digest in live:
            self._activity[digest] = moment

        def change(entries: dict[str, Usage]) -> None:
            for digest in every:
                previous = entries.get(digest)
                if digest in live:
                    entries[digest] = Usage(now, True)
                elif previous is None or previous.referenced:
                    # Unreferenced since some moment during the restart: count it as used now.
                    entries[digest] = Usage(now, False)

        await self._commit(change)

    async def _commit(self, change: Callable[[dict[str, Usage]], None]) -> None:
        # The change is applied under the lock so concurrent marks of different digests compose.
        async with self._write_lock:
            entries = dict(self._entries)
            change(entries)
            if entries == self._entries:
                return
            body = {
                "digests": {
                    d: {"lastUsedTime": format_time(u.last_used), "referenced": u.referenced}
                    for d, u in sorted(entries.items())
                }
            }
            data = json.dumps(body, indent=1).encode() + b"\n"
            await asyncio.to_thread(disk.write_atomic, self._path, data)
            changed = {d for d in entries.keys() | self._entries.keys()
                       if entries.get(d) != self._entries.get(d)}
            self._entries = entries
        for listener in self._listeners:
            try:
                listener(changed)
            except Exception:
                log.exception("a usage listener failed")

    async def forget(self, digests: Iterable[str]) -> None:
        """Drop the records of these digests (collection removed everything of them), in one
        write."""
        dropped = set(digests)
        for digest in dropped:
            self._activity.pop(digest, None)

        def change(entries: dict[str, Usage]) -> None:
            for digest in dropped:
                entries.pop(digest, None)

        await self._commit(change)
