"""The nodes warm for a digest (``openapi.placement``'s rules), read from what every API server
watches: the digest index narrows the NodeModelStores to those listing the digest (O(those
nodes), never a walk over every store), and ``PluginNodes`` says where the plugin runs now (the
CSINodes listing the driver in a cluster, the ``--node`` names standalone). The Pod webhook
asks it (``apiserver/endpoints/podwebhook.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Protocol

from controllers.nodeview import index as nodeindex
from controllers.runtime import informer
from openapi import placement, wire


class PluginNodes(Protocol):
    def names(self) -> set[str]: ...

    async def wait_synced(self) -> None: ...


class StaticPluginNodes:
    """Standalone: the nodes ``--node`` names run the plugin."""

    def __init__(self, names: Iterable[str]) -> None:
        self._names = set(names)

    def names(self) -> set[str]:
        return set(self._names)

    async def wait_synced(self) -> None:
        return None


class CsiPluginNodes:
    """In a cluster: the CSINodes listing the driver, kept as a set from their informer."""

    def __init__(self, csinodes: informer.Informer) -> None:
        self.informer = csinodes
        self._names: set[str] = set()
        csinodes.add_handler(self._changed)

    def _changed(self, old: wire.Obj | None, new: wire.Obj | None) -> None:
        name = wire.text(new or old, "metadata", "name")
        if new is not None and placement.lists_driver(new):
            self._names.add(name)
        else:
            self._names.discard(name)

    def names(self) -> set[str]:
        return self._names

    async def wait_synced(self) -> None:
        await self.informer.synced.wait()


class WarmNodes:
    def __init__(self, index: nodeindex.DigestIndex, stores: informer.Informer,
                 plugins: PluginNodes) -> None:
        self._index = index
        self._stores = stores
        self._plugins = plugins

    async def wait_synced(self, timeout: float) -> bool:
        """True once the stores and the plugin nodes were read once (within ``timeout``)."""
        try:
            async with asyncio.timeout(timeout):
                await self._index.wait_synced()
                await self._plugins.wait_synced()
        except TimeoutError:
            return False
        return True

    def warm_nodes(self, digest: str) -> list[str]:
        """The nodes warm for ``digest``: ranked, at most ``placement.MAX_NODES``."""
        names = self._plugins.names()
        stores = (self._stores.get("", holding.node) for holding in self._index.holders(digest)
                  if holding.node in names)
        return placement.warm_nodes((s for s in stores if s is not None), digest, names)
