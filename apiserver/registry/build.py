"""Wire the registry: one ResourceStore per served resource over one storage backend.

The resources come from the one table, ``openapi.resources.SERVED``; each gets the one strategy
(wrapped so every write records its field manager, ``fieldmanager.tracking``) and the admission
chain the caller built (``apiserver.admission.chain.build``). The routes and
discovery are built from the same table, so a new resource needs its row there, its schema and
(only if it has rules beyond the schema) an admission rule.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from apiserver.registry import copies, manifests, nodecounts, progress, store, strategy
from apiserver.registry.fieldmanager import tracking
from apiserver.storage import interface
from openapi import resources
from openapi.kinds import copies as copiesview
from openapi.kinds import manifest as manifestview
from openapi.kinds import progress as progressview


@dataclasses.dataclass(frozen=True, slots=True)
class Registry:
    storage: interface.Store
    stores: Mapping[str, store.ResourceStore]
    """By URL plural, in the table's order."""
    progress_view: progress.Slot = dataclasses.field(default_factory=progress.Slot)
    """Where the progress view plugs in (it watches this registry, so it comes later)."""
    copies_view: copies.Slot = dataclasses.field(default_factory=copies.Slot)
    """Where the copies view plugs in, with the progress view."""
    node_counts: nodecounts.Presenter = dataclasses.field(default_factory=nodecounts.Presenter)
    """The artifacts' ``status.nodes`` on every read; its view plugs in with the progress
    view."""

    @property
    def modelartifacts(self) -> store.ResourceStore:
        return self.stores[resources.MODEL_ARTIFACT.plural]

    @property
    def nodemodelstores(self) -> store.ResourceStore:
        return self.stores[resources.NODE_MODEL_STORE.plural]

    @property
    def modelprefetches(self) -> store.ResourceStore:
        return self.stores[resources.MODEL_PREFETCH.plural]

    @property
    def modelstores(self) -> store.ResourceStore:
        return self.stores[resources.MODEL_STORE.plural]

    @property
    def modelstorebindings(self) -> store.ResourceStore:
        return self.stores[resources.MODEL_STORE_BINDING.plural]

    async def progress(self, namespace: str,
                       name: str) -> progressview.ModelArtifactProgress:
        """``GET modelartifacts/{name}/progress``: computed now, never stored."""
        return await progress.read(self.modelartifacts, self.progress_view, namespace, name)

    async def copies(self, namespace: str, name: str) -> copiesview.ModelArtifactCopies:
        """``GET modelartifacts/{name}/copies``: computed now, never stored."""
        return await copies.read(self.modelartifacts, self.modelprefetches, self.copies_view,
                                 namespace, name)

    async def manifest(self, namespace: str, name: str) -> manifestview.ModelArtifactManifest:
        """``GET modelartifacts/{name}/manifest``: the files the resolver kept for its digest."""
        return await manifests.read(self.storage, self.modelartifacts, namespace, name)


def build(storage: interface.Store,
          served: Sequence[resources.ResourceInfo] = resources.SERVED, *,
          admission: strategy.Admission, fresh_wait: float = store.FRESH_WAIT) -> Registry:
    """``admission``: the chain (``apiserver.admission.chain.build``), with the cluster's facts;
    ``fresh_wait``: ``store.FRESH_WAIT``."""
    counts = nodecounts.Presenter()

    def present(info: resources.ResourceInfo) -> store.Present:
        return counts.present if info.plural == resources.MODEL_ARTIFACT.plural else store.as_stored

    return Registry(
        storage=storage,
        stores={info.plural: store.ResourceStore(
            storage, tracking.Tracking(info), admission=admission, fresh_wait=fresh_wait,
            present=present(info))
            for info in served},
        node_counts=counts,
    )
