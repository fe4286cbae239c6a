"""What both prefetch controllers read: the prefetches (indexed by the artifact they name), their
artifacts, the NodeModelStores and, in a cluster, the Nodes' labels (``nodeSelector``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from controllers.prefetches import plan as prefetchplan
from controllers.runtime import client as clients
from controllers.runtime import informer
from openapi import wire

ARTIFACT_INDEX = "artifact"


class Labels(Protocol):
    def labels(self, node: str) -> Mapping[str, str]: ...


class NoLabels:
    """Standalone: no Node objects, so a node has no labels (only ``{}`` selects it)."""

    def labels(self, node: str) -> Mapping[str, str]:
        return {}


class NodeLabels:
    """In a cluster: the Nodes' labels, from an informer."""

    def __init__(self, nodes: informer.Informer) -> None:
        self._nodes = nodes

    def labels(self, node: str) -> Mapping[str, str]:
        found = self._nodes.get("", node)
        held = ((found or {}).get("metadata") or {}).get("labels")
        return held if isinstance(held, dict) else {}


def _artifact_key(prefetch: wire.Obj) -> list[str]:
    name = prefetchplan.artifact_name(prefetch)
    return [f"{prefetchplan.namespace(prefetch)}/{name}"] if name else []


class Inputs:
    def __init__(self, prefetches: informer.Informer, artifacts: informer.Informer,
                 stores: informer.Informer, labels: Labels | None = None) -> None:
        self.prefetches = prefetches
        self.artifacts = artifacts
        self.stores = stores
        self.labels = labels if labels is not None else NoLabels()
        prefetches.add_index(ARTIFACT_INDEX, _artifact_key)

    def store_names(self) -> list[str]:
        return sorted(clients.key_of(obj)[1] for obj in self.stores.items())

    def targets(self, prefetch: wire.Obj) -> list[str]:
        return prefetchplan.targets(prefetch, self.store_names(), self.labels.labels)

    def artifact(self, prefetch: wire.Obj) -> prefetchplan.Artifact:
        found = self.artifacts.get(prefetchplan.namespace(prefetch),
                                   prefetchplan.artifact_name(prefetch))
        return prefetchplan.artifact_of(prefetch, found)

    def on_prefetch(self, wake: Callable[[wire.Obj], None]) -> None:
        """Call ``wake(prefetch)`` for every prefetch a change touches: the prefetch itself
        (before and after) and the prefetches naming a changed artifact."""

        def prefetch_changed(old: wire.Obj | None, new: wire.Obj | None) -> None:
            for each in (old, new):
                if each is not None:
                    wake(each)

        def artifact_changed(old: wire.Obj | None, new: wire.Obj | None) -> None:
            namespace, name = clients.key_of(new or old or {})
            for key in self.prefetches.index_keys(ARTIFACT_INDEX, f"{namespace}/{name}"):
                found = self.prefetches.get(*key)
                if found is not None:
                    wake(found)

        self.prefetches.add_handler(prefetch_changed)
        self.artifacts.add_handler(artifact_changed)

    async def synced(self) -> None:
        for each in (self.prefetches, self.artifacts, self.stores):
            await each.synced.wait()
