"""Small records kept per digest in the cache's ``state/`` directory: one JSON file a digest,
named ``<prefix><hex>.json`` and written atomically, so a restart finds them. A record that
cannot be read or decoded (torn, foreign) is skipped with a warning: it must not stop the
plugin. The failure backoff and the quarantine keep theirs here."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from typing import TypeVar

from durable import disk
from nodeplugin.cache import layout

log = logging.getLogger(__name__)
T = TypeVar("T")
DECODE_ERRORS = (OSError, ValueError, KeyError, TypeError)


class DigestRecords:
    def __init__(self, cache: layout.Layout, prefix: str, kind: str) -> None:
        self._cache = cache
        self._prefix = prefix
        self._kind = kind
        """What the records are, for the warning about an unreadable one."""

    def path(self, digest: str) -> os.PathLike[str]:
        return self._cache.state_file(self._prefix + layout.hex_of(digest) + ".json")

    def write(self, digest: str, body: bytes) -> None:
        disk.write_atomic(self.path(digest), body)

    def delete(self, digest: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(digest))

    def load(self, decode: Callable[[bytes], T]) -> list[T]:
        """Every record ``decode`` accepts; ``decode`` raises one of ``DECODE_ERRORS`` for a
        record it refuses."""
        try:
            names = sorted(os.listdir(self._cache.state))
        except FileNotFoundError:
            return []
        found: list[T] = []
        for name in names:
            if not (name.startswith(self._prefix) and name.endswith(".json")):
                continue
            try:
                found.append(decode((self._cache.state / name).read_bytes()))
            except DECODE_ERRORS as exc:
                log.warning("ignoring unreadable %s record %s: %s", self._kind, name, exc)
        return found
