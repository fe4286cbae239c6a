"""The nodes' pins, per node: ``spec.pinned`` is the union of the digests every live, pinned
prefetch targeting that node asks for (this controller is the field's only writer; the node
stores controller keeps it as it is). A prefetch being deleted, or whose pin lapsed
(``ttlAfterLastUse``), drops out of the union on the next pass, and the node's collection
reclaims the bytes once nothing references them and their grace passed.

A prefetch deleted with ``retention.cleanupOnDelete`` asks for more: its digest goes into
``spec.evict`` of each node it targeted (unless a live prefetch pins it there), so the node removes
it at once, whatever its watermarks, as soon as no Pod mounts it; the digest leaves ``spec.evict``
when the node no longer lists it, or after ``EVICT_FOR``. What is being evicted is kept in this
process's memory: a restart of the worker in between leaves what was written in the specs until
the node no longer lists it.

It writes a NodeModelStore's spec, which only the in-process client can (``client.ReadWrite``),
so it runs in the API server; each node is looked at again every minute.
"""

from __future__ import annotations

import logging

from controllers.prefetches import inputs
from controllers.prefetches import plan as prefetchplan
from controllers.runtime import client as clients
from controllers.runtime import controller as runtime
from controllers.runtime import errors, informer
from openapi import wire
from openapi.kinds import modelprefetch, nodemodelstore
from timing import clock as clocks

log = logging.getLogger(__name__)

RESYNC_SECONDS = 60.0
EVICT_FOR = 3600.0
"""How long a deleted prefetch's digest stays in a node's ``spec.evict`` at most (a Pod may
keep it mounted)."""


class Pins(runtime.Runs[str]):
    name = "prefetch pins"

    def __init__(
        self,
        api: clients.ReadWrite,
        watched: inputs.Inputs,
        clock: clocks.Clock,
        *,
        nodes: informer.Informer | None = None,
    ) -> None:
        """``watched``: what the pins are computed from; ``nodes``: the Nodes' informer (run by
        the caller), whose changes move selectors."""
        self._api = api
        self._inputs = watched
        self._prefetches = watched.prefetches
        self._stores = watched.stores
        self._clock = clock
        self.controller: runtime.Controller[str] = runtime.Controller(
            self.name, self.reconcile_pins, clock, keys=self._inputs.store_names, concurrency=1)
        self._inputs.on_prefetch(self._wake)
        self._evicting: dict[str, dict[str, float]] = {}
        """node -> digest -> until (monotonic): deleted prefetches' cleanupOnDelete."""
        watched.prefetches.add_handler(self._prefetch_deleted)
        watched.stores.add_handler(self._node_changed)
        if nodes is not None:
            nodes.add_handler(self._node_changed)
        self.pin_writes = 0

    # triggers -----------------------------------------------------------------------------

    def _wake(self, prefetch: wire.Obj) -> None:
        for node in self._inputs.targets(prefetch):
            self.controller.enqueue(node)

    def _prefetch_deleted(self, old: wire.Obj | None, new: wire.Obj | None) -> None:
        """A prefetch with cleanupOnDelete left (or is being deleted): evict its digest from
        the nodes it targeted."""
        gone = new is None or bool((new.get("metadata") or {}).get("deletionTimestamp"))
        last = new or old
        if not gone or last is None or not modelprefetch.cleanup_on_delete(last):
            return
        digest = modelprefetch.manifest_digest(last) or self._inputs.artifact(last).digest
        if not digest:
            return
        until = self._clock.monotonic() + EVICT_FOR
        nodes = set(self._inputs.targets(last)) | {
            name for entry in modelprefetch.node_entries(last)
            if (name := modelprefetch.node_name(entry))}
        for node in nodes:
            self._evicting.setdefault(node, {})[digest] = until
            self.controller.enqueue(node)

    def _evict(self, node: str, store: wire.Obj, wanted: list[str]) -> list[str]:
        """The digests this node should remove now; forgets those it no longer lists."""
        asked = self._evicting.get(node)
        if not asked:
            return []
        now = self._clock.monotonic()
        for digest, until in list(asked.items()):
            if until <= now or nodemodelstore.entry(store, digest) is None:
                del asked[digest]
        if not asked:
            del self._evicting[node]
        return sorted(d for d in asked if d not in wanted)

    def _node_changed(self, old: wire.Obj | None, new: wire.Obj | None) -> None:
        """A node's store or its Node changed."""
        _, node = clients.key_of(new or old or {})
        if node:
            self.controller.enqueue(node)

    # one node -----------------------------------------------------------------------------

    async def reconcile_pins(self, node: str) -> runtime.Result:
        await self._inputs.synced()
        store = self._stores.get("", node)
        if store is None:
            return runtime.DONE
        wanted, wake = prefetchplan.pins(self._pins_of(node, store), self._clock.now())
        evict = self._evict(node, store, wanted)
        if sorted(nodemodelstore.pinned(store)) != wanted or \
                sorted(nodemodelstore.evict(store)) != evict:
            spec = nodemodelstore.spec_pinning(store, wanted, evict)
            try:
                await self._api.update(clients.NODE_MODEL_STORES, dict(store, spec=spec))
            except errors.Conflict:
                return runtime.Result(retry=True)  # the informer brings the fresh copy
            except errors.NotFound:
                return runtime.DONE
            self.pin_writes += 1
            log.info("NodeModelStore %s: %d digest(s) pinned, %d to remove now", node,
                     len(wanted), len(evict))
        after = RESYNC_SECONDS if wake is None else min(RESYNC_SECONDS, max(wake, 1.0))
        return runtime.Result(requeue_after=after)

    def _pins_of(self, node: str, store: wire.Obj) -> list[prefetchplan.Pin]:
        found = []
        for prefetch in self._prefetches.items():
            metadata = prefetch.get("metadata") or {}
            if metadata.get("deletionTimestamp") or not prefetchplan.pinned(prefetch):
                continue
            artifact = self._inputs.artifact(prefetch)
            if not artifact.digest:
                continue
            if self._inputs.binding_problem(prefetch) is not None:
                continue
            if node not in self._inputs.targets(prefetch):
                continue
            found.append(prefetchplan.Pin(
                artifact.digest, str(metadata.get("creationTimestamp") or ""),
                prefetchplan.pin_until(prefetch, store, artifact.digest),
                prefetchplan.namespace(prefetch)))
        return found
