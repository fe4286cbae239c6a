"""digest -> the NodeModelStores listing it, kept from the NodeModelStore watch.

Progress and the ``status.nodes`` counts read only the nodes holding one digest, so a request
costs O(those nodes), never a walk over every NodeModelStore. Listeners hear which digests a
NodeModelStore change touched; ``version`` tells a reader whether a digest's holdings changed
since it last looked (the counts' cache, ``apiserver/registry/nodecounts.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from controllers.runtime import informer
from openapi import wire
from openapi.kinds import nodemodelstore

Listener = Callable[[str], None]


@dataclasses.dataclass(frozen=True, slots=True)
class Holding:
    """One node's entry for a digest (``status.models[]``)."""

    node: str
    state: str
    size_bytes: int
    downloaded_bytes: int
    reason: str
    source: str = ""
    message: str = ""
    retry_time: str = ""
    referenced: bool = False
    last_used: str = ""
    pinned: bool = False
    """The node's ``spec.pinned`` names the digest."""


def _entries(obj: wire.Obj | None) -> dict[str, Holding]:
    if obj is None:
        return {}
    node = str((obj.get("metadata") or {}).get("name") or "")
    pins = set(nodemodelstore.pinned(obj))
    found: dict[str, Holding] = {}
    for entry in nodemodelstore.models(obj):
        digest = wire.dig(entry, "digest")
        if not isinstance(digest, str):
            continue
        found[digest] = Holding(
            node=node,
            state=nodemodelstore.entry_state(entry),
            size_bytes=_count(nodemodelstore.entry_size(entry)),
            downloaded_bytes=_count(nodemodelstore.entry_downloaded(entry)),
            reason=nodemodelstore.entry_reason(entry),
            source=nodemodelstore.entry_source(entry),
            message=nodemodelstore.entry_message(entry),
            retry_time=nodemodelstore.entry_retry_time(entry),
            referenced=nodemodelstore.entry_referenced(entry),
            last_used=nodemodelstore.entry_last_used(entry),
            pinned=digest in pins,
        )
    return found


def _count(value: int | None) -> int:
    return value if value is not None and value > 0 else 0


class DigestIndex:
    def __init__(self, stores: informer.Informer) -> None:
        self._informer = stores
        self._by_digest: dict[str, dict[str, Holding]] = {}
        self._listeners: list[Listener] = []
        self._versions: dict[str, int] = {}
        self._stamp = 0
        stores.add_handler(self._changed)

    @property
    def synced(self) -> bool:
        return self._informer.synced.is_set()

    async def wait_synced(self) -> None:
        await self._informer.synced.wait()

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def holders(self, digest: str) -> list[Holding]:
        """The nodes listing ``digest``, by node name."""
        held = self._by_digest.get(digest)
        return [] if not held else [held[node] for node in sorted(held)]

    def digests(self) -> list[str]:
        return list(self._by_digest)

    def version(self, digest: str) -> int:
        """Changes whenever the holdings of ``digest`` change, never back to an earlier value
        (0: nobody holds it)."""
        return self._versions.get(digest, 0)

    def _changed(self, old: wire.Obj | None, new: wire.Obj | None) -> None:
        before, after = _entries(old), _entries(new)
        node = str(((new or old) or {}).get("metadata", {}).get("name") or "")
        touched = [d for d in before.keys() | after.keys() if before.get(d) != after.get(d)]
        for digest in touched:
            holding = after.get(digest)
            nodes = self._by_digest.setdefault(digest, {})
            if holding is None:
                nodes.pop(node, None)
                if not nodes:
                    del self._by_digest[digest]
            else:
                nodes[node] = holding
            if digest in self._by_digest:
                self._stamp += 1
                self._versions[digest] = self._stamp
            else:
                self._versions.pop(digest, None)
        for digest in touched:
            for listener in self._listeners:
                listener(digest)
