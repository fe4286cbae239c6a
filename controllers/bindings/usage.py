"""A binding's footprint, as upstream counts it: pure.

The digests are those the binding's prefetches (its namespace, ``bindingRef`` naming it) warm:
their artifacts' manifest digests. Each distinct digest counts at its full size (the artifact's
resolved ``sizeBytes``) for every node of the binding's stores holding it, whatever the entry's
state (a partial download holds its space too). A digest two namespaces share counts fully
against each: conservative, and impossible to game by warming what another tenant warmed. While
any referenced artifact has not resolved (or is missing), the figure is not measured: ``used``
is None (absent in status; zero is a measurement).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from openapi import wire
from openapi.kinds import modelartifact, modelprefetch, modelstorebinding


@dataclasses.dataclass(frozen=True, slots=True)
class Usage:
    used: int | None
    """Bytes; None while not measured."""
    unresolved: int
    """Referenced artifacts without a resolved digest and size."""
    digests: int


def usage(binding: wire.Readable, prefetches: Iterable[wire.Readable],
          artifact: Callable[[str, str], wire.Readable | None],
          holders: Callable[[str], Iterable[str]],
          store_of: Callable[[str], str]) -> Usage:
    """``artifact(namespace, name)``; ``holders(digest)``: the nodes listing it;
    ``store_of(node)``: the ModelStore its spec is merged from."""
    namespace, name = wire.key_of(binding)
    stores = set(modelstorebinding.store_names(binding))
    sizes: dict[str, int] = {}
    unresolved = 0
    for prefetch in prefetches:
        if wire.key_of(prefetch)[0] != namespace or modelprefetch.binding_name(prefetch) != name:
            continue
        if wire.dig(prefetch, "metadata", "deletionTimestamp"):
            continue
        found = artifact(namespace, modelprefetch.artifact_name(prefetch))
        digest = modelartifact.manifest_digest(found or {})
        size = modelartifact.size_bytes(found or {})
        if not digest or size is None:
            unresolved += 1
            continue
        sizes[digest] = size
    if unresolved:
        return Usage(None, unresolved, len(sizes))
    used = sum(size * sum(1 for node in holders(digest) if store_of(node) in stores)
               for digest, size in sizes.items())
    return Usage(used, 0, len(sizes))
