"""Where each published tree's bytes came from (``Hub`` or ``Peer``), kept across restarts.

The downloader records the origin when it publishes a tree (``origin-<hex>.json`` under
``state/``, through ``records``); the status report reads it from memory for the tree's
``status.models[].source``. A tree with no record (imported, or published before records were
kept) has no ``source`` in its entry. A record whose tree is gone is harmless and is replaced
when the digest is published again.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import cast

from nodeplugin.cache import layout, records
from openapi import states

Origin = states.Origin
ORIGINS = states.ORIGINS


def _decode(data: bytes) -> tuple[str, Origin]:
    body = json.loads(data)
    origin = body["origin"]
    if origin not in ORIGINS:
        raise ValueError(f"unknown origin {origin!r}")
    return str(body["digest"]), cast(Origin, origin)


class Origins:
    def __init__(self, cache: layout.Layout) -> None:
        self._records = records.DigestRecords(cache, "origin-", "origin")
        self._lock = threading.Lock()
        self._known: dict[str, Origin] = dict(self._records.load(_decode))

    def record(self, digest: str, origin: Origin) -> None:
        """Blocking (an atomic write); call it in a thread."""
        with self._lock:
            if self._known.get(digest) == origin:
                return
            body = {"digest": digest, "origin": origin}
            self._records.write(digest, json.dumps(body, sort_keys=True).encode())
            self._known[digest] = origin

    def all(self) -> Mapping[str, Origin]:
        return dict(self._known)
