"""ModelStore status: how many nodes each store wins and ``SelectorOverlap`` (docs/api.md,
"ModelStore").

The nodes counted are those running the plugin (a NodeModelStore exists). A store whose selector
matches a node another store matches too reports ``SelectorOverlap=True`` naming the other
stores (never a node); the alphabetically first wins the shared nodes (``pools.verdict``). Every
store is checked again when a store, a NodeModelStore or a node's labels change, and every
minute. Only the status is written, so this runs wherever controllers run.
"""

from __future__ import annotations

import logging

from controllers.nodestores import pools as poollayer
from controllers.runtime import client as clients
from controllers.runtime import conditions, informer, status
from controllers.runtime import controller as runtime
from openapi import reasons, wire
from timing import clock as clocks

log = logging.getLogger(__name__)

RESYNC_SECONDS = 60.0
MAX_NAMED = 8


class StoreStatus(runtime.Runs[str]):
    name = "nodestores.pools"

    def __init__(self, api: clients.Client, pools: poollayer.Pools,
                 node_stores: informer.Informer, clock: clocks.Clock) -> None:
        self._api = api
        self._pools = pools
        self._node_stores = node_stores
        self._clock = clock
        self.writes = 0
        self.controller: runtime.Controller[str] = runtime.Controller(
            self.name, self.reconcile, clock, keys=self._keys, concurrency=1)
        pools.add_handler(lambda node: self._all())
        node_stores.add_handler(lambda old, new: self._all() if old is None or new is None
                                else None)

    def _keys(self) -> list[str]:
        return sorted(clients.key_of(obj)[1] for obj in self._pools.stores.items())

    def _all(self) -> None:
        for name in self._keys():
            self.controller.enqueue(name)

    async def reconcile(self, name: str) -> runtime.Result:
        await self._pools.synced()
        await self._node_stores.synced.wait()
        obj = self._pools.stores.get("", name)
        if obj is None or wire.dig(obj, "metadata", "deletionTimestamp"):
            return runtime.DONE
        nodes = sorted(clients.key_of(o)[1] for o in self._node_stores.items())
        shared, won = poollayer.overlaps(self._pools.stores.items(), nodes,
                                         self._pools.labels.labels)
        others = sorted(shared.get(name, ()))
        generation = wire.integer(obj, "metadata", "generation")
        now = self._clock.now()

        def change(current: wire.Obj) -> None:
            current["observedGeneration"] = generation or 0
            current["nodes"] = won.get(name, 0)
            if others:
                named = ", ".join(others[:MAX_NAMED]) + (
                    f" and {len(others) - MAX_NAMED} more" if len(others) > MAX_NAMED else "")
                first = min([name, *others])
                verdict = ("this store wins them (its name sorts first)" if first == name
                           else f"{first} wins them (its name sorts first)")
                conditions.put(current, reasons.SELECTOR_OVERLAP, "True", reasons.OVERLAPS,
                               f"nodeSelector matches nodes that ModelStore {named} also "
                               f"matches; {verdict}. Fix the selectors: the order is a "
                               "tie-break, not a policy.", now=now, generation=generation)
            else:
                conditions.put(current, reasons.SELECTOR_OVERLAP, "False", reasons.DISJOINT,
                               "No other ModelStore matches any node this one matches.",
                               now=now, generation=generation)

        try:
            written = await status.write(self._api, clients.MODEL_STORES, "", name, change,
                                         uid=str(wire.dig(obj, "metadata", "uid") or ""),
                                         first=obj)
        except status.Gone:
            return runtime.DONE
        if written is not None:
            self.writes += 1
        return runtime.Result(requeue_after=RESYNC_SECONDS)
