"""Published trees that failed an integrity check: refused to new mounts, removed once unused.

A tree whose bytes no longer match its manifest (a flipped byte, a truncated or added file) is
quarantined at once: new mounts of its digest are refused with the reason, Pods that mount it
keep their mounts (a bind mount cannot be taken back from a running Pod without breaking it), and
collection removes the tree as soon as no Pod references it, after which the next mount
downloads the digest again. Records live in ``state/`` (one small JSON file per digest, written
atomically) so a restart keeps refusing. Methods block briefly; async callers use a thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import logging
import os
import threading

from durable import disk
from nodeplugin.cache import layout

log = logging.getLogger(__name__)
_PREFIX = "quarantine-"


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    digest: str
    message: str
    """What was found, naming no path a tenant chose beyond the manifest's own (log only)."""
    since: datetime.datetime


class Quarantine:
    def __init__(self, cache: layout.Layout) -> None:
        self._cache = cache
        self._lock = threading.Lock()
        self._entries: dict[str, Entry] = {}
        self._load()

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
            disk.write_atomic(self._path(digest), json.dumps(body, sort_keys=True).encode())
            self._entries[digest] = entry
            return entry

    def remove(self, digest: str) -> None:
        with self._lock:
            if self._entries.pop(digest, None) is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._path(digest))

    def _path(self, digest: str) -> os.PathLike[str]:
        return self._cache.state_file(_PREFIX + layout.hex_of(digest) + ".json")

    def _load(self) -> None:
        try:
            names = os.listdir(self._cache.state)
        except FileNotFoundError:
            return
        for name in names:
            if not (name.startswith(_PREFIX) and name.endswith(".json")):
                continue
            try:
                body = json.loads((self._cache.state / name).read_bytes())
                digest = str(body["digest"])
                layout.hex_of(digest)
                entry = Entry(digest, str(body["message"]),
                              datetime.datetime.fromisoformat(body["since"]))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring unreadable quarantine record %s: %s", name, exc)
                continue
            self._entries[digest] = entry
