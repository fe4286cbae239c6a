"""ModelStoreBinding status: ``usedBytes`` (``usage.usage``) and ``OverQuota`` (True past
``quota.bytes``, False within it, Unknown while not measured), per binding, when a binding, a
prefetch, an artifact or a node's holdings change and every minute. It writes only the status,
so it runs wherever controllers run."""

from __future__ import annotations

import logging

from controllers.bindings import usage as usages
from controllers.nodeview import index as nodeindex
from controllers.runtime import client as clients
from controllers.runtime import conditions, informer, status
from controllers.runtime import controller as runtime
from openapi import reasons, wire
from openapi.kinds import modelstorebinding, nodemodelstore
from timing import clock as clocks

log = logging.getLogger(__name__)

Key = tuple[str, str]
RESYNC_SECONDS = 60.0


class Bindings(runtime.Runs[Key]):
    name = "bindings"

    def __init__(self, api: clients.Client, bindings: informer.Informer,
                 prefetches: informer.Informer, artifacts: informer.Informer,
                 stores: informer.Informer, index: nodeindex.DigestIndex,
                 clock: clocks.Clock) -> None:
        self._api = api
        self._bindings = bindings
        self._prefetches = prefetches
        self._artifacts = artifacts
        self._stores = stores
        self._index = index
        self._clock = clock
        self.writes = 0
        self.controller: runtime.Controller[Key] = runtime.Controller(
            self.name, self.reconcile, clock, keys=bindings.keys, concurrency=1)
        bindings.add_handler(lambda old, new: self._namespace(new or old))
        prefetches.add_handler(lambda old, new: self._namespace(new or old))
        artifacts.add_handler(lambda old, new: self._namespace(new or old))
        stores.add_handler(lambda old, new: self._all())
        index.subscribe(lambda digest: self._all())

    def _namespace(self, obj: wire.Obj | None) -> None:
        namespace = wire.key_of(obj or {})[0]
        listed = self._bindings.keys
        for key in listed():
            if key[0] == namespace:
                self.controller.enqueue(key)

    def _all(self) -> None:
        listed = self._bindings.keys
        for key in listed():
            self.controller.enqueue(key)

    def _store_of(self, node: str) -> str:
        return nodemodelstore.store(self._stores.get("", node) or {})

    async def reconcile(self, key: Key) -> runtime.Result:
        for each in (self._bindings, self._prefetches, self._artifacts, self._stores):
            await each.synced.wait()
        binding = self._bindings.get(*key)
        if binding is None or wire.dig(binding, "metadata", "deletionTimestamp"):
            return runtime.DONE
        found = usages.usage(binding, self._prefetches.items(), self._artifacts.get,
                             lambda d: [h.node for h in self._index.holders(d)],
                             self._store_of)
        quota = modelstorebinding.quota_bytes(binding)
        generation = wire.integer(binding, "metadata", "generation")
        now = self._clock.now()

        def change(current: wire.Obj) -> None:
            current["observedGeneration"] = generation or 0
            if found.used is None:
                current.pop("usedBytes", None)
                conditions.put(current, reasons.OVER_QUOTA, "Unknown", reasons.USAGE_UNKNOWN,
                               f"{found.unresolved} referenced artifact(s) not resolved: their "
                               "size is unknown, so the footprint is not counted",
                               now=now, generation=generation)
                return
            current["usedBytes"] = found.used
            if quota is not None and found.used > quota:
                conditions.put(current, reasons.OVER_QUOTA, "True", reasons.QUOTA_EXCEEDED,
                               f"{found.used} bytes held past the budget of {quota} bytes",
                               now=now, generation=generation)
            else:
                conditions.put(current, reasons.OVER_QUOTA, "False", reasons.WITHIN_QUOTA,
                               f"{found.used} of {quota} bytes held", now=now,
                               generation=generation)

        try:
            written = await status.write(self._api, clients.MODEL_STORE_BINDINGS, *key, change,
                                         uid=str(wire.dig(binding, "metadata", "uid") or ""),
                                         first=binding)
        except status.Gone:
            return runtime.DONE
        if written is not None:
            self.writes += 1
        return runtime.Result(requeue_after=RESYNC_SECONDS)
