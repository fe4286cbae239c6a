"""What both prefetch controllers read: the prefetches (indexed by the artifact they name), their
artifacts, the NodeModelStores, the ModelStoreBindings (the stores a prefetch may target) and,
in a cluster, the Nodes' labels (``placement.nodeSelector``)."""

from __future__ import annotations

from collections.abc import Callable

from controllers.prefetches import plan as prefetchplan
from controllers.runtime import client as clients
from controllers.runtime import informer
from controllers.sources import nodelabels
from openapi import reasons, wire
from openapi.kinds import modelprefetch, modelstorebinding, nodemodelstore

ARTIFACT_INDEX = "artifact"


Labels = nodelabels.Labels
NoLabels = nodelabels.HostnameOnly
"""Standalone: no Node objects, so a node carries only kubelet's hostname label."""
NodeLabels = nodelabels.NodeLabels


def _artifact_key(prefetch: wire.Obj) -> list[str]:
    name = prefetchplan.artifact_name(prefetch)
    return [f"{prefetchplan.namespace(prefetch)}/{name}"] if name else []


class Inputs:
    def __init__(self, prefetches: informer.Informer, artifacts: informer.Informer,
                 stores: informer.Informer, labels: Labels | None = None,
                 bindings: informer.Informer | None = None) -> None:
        """``bindings``: None holds no prefetch to stores (a caller without the pool layer)."""
        self.prefetches = prefetches
        self.artifacts = artifacts
        self.stores = stores
        self.bindings = bindings
        self.labels = labels if labels is not None else NoLabels()
        prefetches.add_index(ARTIFACT_INDEX, _artifact_key)

    def store_names(self) -> list[str]:
        return sorted(clients.key_of(obj)[1] for obj in self.stores.items())

    def plugin_nodes(self) -> list[tuple[str, str]]:
        """(node, the ModelStore its spec is merged from) for every NodeModelStore."""
        return sorted((clients.key_of(obj)[1], nodemodelstore.store(obj))
                      for obj in self.stores.items())

    def allowed(self, prefetch: wire.Obj) -> set[str] | None:
        """The stores the prefetch's binding names (empty when the binding is gone); None for a
        prefetch without a binding (stored before the pool layer) or without the pool layer."""
        name = modelprefetch.binding_name(prefetch)
        if not name or self.bindings is None:
            return None
        found = self.bindings.get(prefetchplan.namespace(prefetch), name)
        return set(modelstorebinding.store_names(found)) if found is not None else set()

    def binding_problem(self, prefetch: wire.Obj) -> tuple[str, str] | None:
        """Why the prefetch warms nothing because of its binding; None when it may."""
        name = modelprefetch.binding_name(prefetch)
        if not name or self.bindings is None:
            return None
        if self.bindings.get(prefetchplan.namespace(prefetch), name) is None:
            return (reasons.BINDING_NOT_FOUND,
                    f"ModelStoreBinding {prefetchplan.namespace(prefetch)}/{name} does not "
                    "exist: nothing is warmed or pinned under it")
        return None

    def targets(self, prefetch: wire.Obj) -> list[str]:
        return prefetchplan.targets(prefetch, self.plugin_nodes(), self.labels.labels,
                                    self.allowed(prefetch))

    def artifact(self, prefetch: wire.Obj) -> prefetchplan.Artifact:
        found = self.artifacts.get(prefetchplan.namespace(prefetch),
                                   prefetchplan.artifact_name(prefetch))
        return prefetchplan.artifact_of(prefetch, found)

    def on_prefetch(self, wake: Callable[[wire.Obj], None]) -> None:
        """Call ``wake(prefetch)`` for every prefetch a change touches: the prefetch itself
        (before and after), the prefetches naming a changed artifact, and those of a changed
        binding's namespace."""

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

        def binding_changed(old: wire.Obj | None, new: wire.Obj | None) -> None:
            namespace, name = clients.key_of(new or old or {})
            for prefetch in self.prefetches.items():
                if (prefetchplan.namespace(prefetch) == namespace
                        and modelprefetch.binding_name(prefetch) == name):
                    wake(prefetch)

        self.prefetches.add_handler(prefetch_changed)
        self.artifacts.add_handler(artifact_changed)
        if self.bindings is not None:
            self.bindings.add_handler(binding_changed)

    async def synced(self) -> None:
        for each in (self.prefetches, self.artifacts, self.stores):
            await each.synced.wait()
        if self.bindings is not None:
            await self.bindings.synced.wait()
