"""Wire the registry: one ResourceStore per stored resource over one storage backend."""

from __future__ import annotations

import dataclasses
from typing import Any

from apiserver.registry import progress, store, strategy
from apiserver.storage import interface
from openapi import resources


@dataclasses.dataclass(frozen=True, slots=True)
class Registry:
    storage: interface.Store
    modelartifacts: store.ResourceStore
    nodemodelstores: store.ResourceStore

    async def progress(self, namespace: str, name: str) -> dict[str, Any]:
        """``GET modelartifacts/{name}/progress``: computed now, never stored."""
        return await progress.read(self.modelartifacts, self.nodemodelstores, namespace, name)


def build(storage: interface.Store) -> Registry:
    return Registry(
        storage=storage,
        modelartifacts=store.ResourceStore(storage, strategy.ModelArtifactStrategy()),
        nodemodelstores=store.ResourceStore(storage,
                                            strategy.Strategy(resources.NODE_MODEL_STORE)),
    )
