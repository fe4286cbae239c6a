"""Published trees that failed an integrity check: refused to new mounts, removed once unused.

A tree whose bytes no longer match its manifest (a flipped byte, a truncated or added file) is
quarantined at once: new mounts of its digest are refused with the reason, Pods that mount it
keep their mounts (a bind mount cannot be taken back from a running Pod without breaking it), and
collection removes the tree as soon as no Pod references it, after which the next mount
downloads the digest again. Records live in ``state/`` (one small JSON file per digest, written
atomically) so a restart keeps refusing. Methods block briefly; async callers use a thread.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import threading

from nodeplugin.cache import layout, records


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    digest: str
    message: str
    """What was found, naming no path a tenant chose beyond the manifest's own (log only)."""
    since: datetime.datetime


class Quarantine:
    def __init__(self, cache: layout.Layout) -> None:
        self._records = records.DigestRecords(cache, "quarantine-", "quarantine")
        self._lock = threading.Lock()
        self._entries = {entry.digest: entry for entry in self._records.load(_decode)}
        self.added = 0
        """Trees this process quarantined (the metrics' counter; records loaded at start are
        not counted again)."""

    def get(self, digest: str) -> Entry | None:
        return self._entries.get(digest)

    def __contains__(self, digest: object) -> bool:
        return digest in self._entries

    def all(self) -> list[Entry]:
        return list(self._entries.values())

    def add(self, digest: str, message: str, now: datetime.datetime) -> Entry:
        with self._lock:
            existing = self._entries.get(digest)
            if existing is not None:
                return existing
            entry = Entry(digest, message, now)
            body = {"digest": digest, "message": message, "since": now.isoformat()}
            self._records.write(digest, json.dumps(body, sort_keys=True).encode())
            self._entries[digest] = entry
            self.added += 1
            return entry

    def remove(self, digest: str) -> None:
        with self._lock:
            if self._entries.pop(digest, None) is not None:
                self._records.delete(digest)


def _decode(data: bytes) -> Entry:
    body = json.loads(data)
    digest = str(body["digest"])
    layout.hex_of(digest)
    return Entry(digest, str(body["message"]), datetime.datetime.fromisoformat(body["since"]))
