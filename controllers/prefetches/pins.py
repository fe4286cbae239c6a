"""The nodes' pins, per node: ``spec.pinned`` is the union of the digests every live, pinned
prefetch targeting that node asks for (this controller is the field's only writer; the node
stores controller keeps it as it is). A prefetch being deleted, or whose pin lapsed
(``ttlAfterLastUse``), drops out of the union on the next pass, and the node's collection
reclaims the bytes once nothing references them and their grace passed.

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
from openapi.kinds import nodemodelstore
from timing import clock as clocks

log = logging.getLogger(__name__)

RESYNC_SECONDS = 60.0


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
        watched.stores.add_handler(self._node_changed)
        if nodes is not None:
            nodes.add_handler(self._node_changed)
        self.pin_writes = 0

    # triggers -----------------------------------------------------------------------------

    def _wake(self, prefetch: wire.Obj) -> None:
        for node in self._inputs.targets(prefetch):
            self.controller.enqueue(node)

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
        if sorted(nodemodelstore.pinned(store)) != wanted:
            spec = nodemodelstore.spec_pinning(store, wanted)
            try:
                await self._api.update(clients.NODE_MODEL_STORES, dict(store, spec=spec))
            except errors.Conflict:
                return runtime.Result(retry=True)  # the informer brings the fresh copy
            except errors.NotFound:
                return runtime.DONE
            self.pin_writes += 1
            log.info("NodeModelStore %s: %d digest(s) pinned", node, len(wanted))
        after = RESYNC_SECONDS if wake is None else min(RESYNC_SECONDS, max(wake, 1.0))
        return runtime.Result(requeue_after=after)

    def _pins_of(self, node: str, store: wire.Obj) -> list[prefetchplan.Pin]:
        found = []
        names = self._inputs.store_names()
        for prefetch in self._prefetches.items():
            metadata = prefetch.get("metadata") or {}
            if metadata.get("deletionTimestamp") or not prefetchplan.pinned(prefetch):
                continue
            artifact = self._inputs.artifact(prefetch)
            if not artifact.digest:
                continue
            if node not in prefetchplan.targets(prefetch, names, self._inputs.labels.labels):
                continue
            found.append(prefetchplan.Pin(
                artifact.digest, str(metadata.get("creationTimestamp") or ""),
                prefetchplan.pin_until(prefetch, store, artifact.digest)))
        return found
