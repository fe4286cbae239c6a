"""Published trees that failed an integrity check: taken out of ``objects/``, removed once unused.

A tree that fails the rule of ``cache.check`` (a flipped byte, a truncated or added file, a
stored manifest edited or gone) is quarantined at once (``cache.integrity`` holds the digest's
lock exclusive meanwhile): ``hold`` renames it out of ``objects/sha256/<hex>`` into
``quarantined/<hex>.<id>``, in one step on the same filesystem, so the Pods that mount it keep
their mounts (a bind mount follows its directory; it cannot be taken back from a running Pod
without breaking it) while the digest is no longer published: the next mount of it materializes
it again and publishes a good tree beside the held one. ``add`` then records why, for the
status and the metrics. Collection deletes a held tree once no mount shows it any more (the
mount table names the held path) and drops the record with the digest's last held tree.
Records live in ``state/`` (one small JSON file per digest, written atomically). Methods block
briefly; async callers use a thread.
"""

from __future__ import annotations

import dataclasses
import datetime
import errno
import json
import os
import pathlib
import secrets
import threading

from durable import disk
from nodeplugin.cache import layout, records

TreeId = tuple[int, int]
"""A tree directory's ``(st_dev, st_ino)``: which tree was judged."""


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    digest: str
    message: str
    """What was found, naming no path a tenant chose beyond the manifest's own (log only)."""
    since: datetime.datetime


class Quarantine:
    def __init__(self, cache: layout.Layout) -> None:
        self._cache = cache
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

    def hold(self, digest: str, tree: TreeId | None = None) -> pathlib.Path | None:
        """Rename the digest's published tree into ``quarantined/`` and return where it went;
        None when it is not published, or (``tree`` given) when the published tree is no
        longer the one judged. The caller holds the digest's lock exclusive."""
        path = self._cache.published_path(digest)
        if not self._cache.is_published(digest):
            return None
        if tree is not None:
            found = os.stat(path)
            if (found.st_dev, found.st_ino) != tree:
                return None
        os.makedirs(self._cache.held, mode=0o700, exist_ok=True)
        destination = self._cache.held / f"{path.name}.{secrets.token_hex(4)}"
        try:
            os.rename(path, destination)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            raise OSError(exc.errno, f"{self._cache.held} is not on the filesystem of "
                          f"{self._cache.objects}") from exc
        disk.fsync_path(path.parent)
        disk.fsync_path(destination.parent)
        return destination

    def held(self) -> list[tuple[str, pathlib.Path]]:
        """``(digest, path)`` of every tree held in ``quarantined/``."""
        found: list[tuple[str, pathlib.Path]] = []
        try:
            names = sorted(os.listdir(self._cache.held))
        except FileNotFoundError:
            return found
        for name in names:
            hexdigest, dot, rest = name.partition(".")
            try:
                digest = layout.digest_of_hex(hexdigest)
            except layout.LayoutError:
                continue
            if dot and rest:
                found.append((digest, self._cache.held / name))
        return found


def _decode(data: bytes) -> Entry:
    body = json.loads(data)
    digest = str(body["digest"])
    layout.hex_of(digest)
    return Entry(digest, str(body["message"]), datetime.datetime.fromisoformat(body["since"]))
