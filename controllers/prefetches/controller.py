"""ModelPrefetch status and delivery, per prefetch: resolves the targets (``plan.targets``), asks
the delivery to warm every target node that does not hold the digest yet (a warm-up Pod per node
in a cluster, ``warmup.py``; the request to each ``--node`` plugin standalone,
``plugindelivery.py``), and writes ``status`` (counts and conditions; it names no node). A
node whose pinned copy lapsed past ``ttlAfterLastUse`` is not warmed again (``Lapsed``). Each
prefetch is looked at again every minute.

It writes only a ModelPrefetch's status, so it runs wherever the resolver runs (in the API
server, or in ``python -m controllers``); the nodes' pins (``pins.py``) need the in-process
client and run in the API server.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

from controllers.prefetches import inputs
from controllers.prefetches import plan as prefetchplan
from controllers.runtime import client as clients
from controllers.runtime import controller as runtime
from controllers.runtime import informer, status
from openapi import states, wire
from openapi.kinds import nodemodelstore
from timing import clock as clocks

log = logging.getLogger(__name__)

Key = tuple[str, str]
RESYNC_SECONDS = 60.0


class Delivery(Protocol):
    async def warm(self, prefetch: wire.Obj, artifact: prefetchplan.Artifact,
                   nodes: Sequence[str]) -> Mapping[str, prefetchplan.Hold]:
        """Have each of ``nodes`` (with a NodeModelStore, not holding the digest yet) download
        the artifact through its ordinary path; returns node -> why its warm-up failed or is
        not made."""
        ...


class NoDelivery:
    """Nothing is asked of the nodes: a node warms when a Pod mounts the artifact there; the
    status and the pins still follow the prefetch (standalone mode, docs/controllers.md)."""

    async def warm(self, prefetch: wire.Obj, artifact: prefetchplan.Artifact,
                   nodes: Sequence[str]) -> Mapping[str, prefetchplan.Hold]:
        return {}


class Prefetches(runtime.Runs[Key]):
    name = "prefetches"

    def __init__(
        self,
        api: clients.Client,
        watched: inputs.Inputs,
        clock: clocks.Clock,
        *,
        nodes: informer.Informer | None = None,
        delivery: Delivery | None = None,
        owned: informer.Informer | None = None,
        failed_recheck: float = RESYNC_SECONDS,
        concurrency: int = 2,
    ) -> None:
        """``watched``: the prefetches, artifacts, node stores and labels read; ``nodes``: the
        Nodes' informer whose changes wake the prefetches (``watched.labels`` reads it);
        ``owned``: objects a prefetch owns (its warm-up Pods) whose changes wake their owner;
        both run by the caller. A prefetch whose delivery failed somewhere is looked at again
        after ``failed_recheck`` seconds (at most a minute), when a failed delivery is
        retried."""
        self._api = api
        self._inputs = watched
        self._prefetches = watched.prefetches
        self._stores = watched.stores
        self._clock = clock
        self._delivery = delivery if delivery is not None else NoDelivery()
        self._failed_recheck = min(RESYNC_SECONDS, failed_recheck)
        self.controller: runtime.Controller[Key] = runtime.Controller(
            "prefetch status", self.reconcile_status, clock, keys=watched.prefetches.keys,
            concurrency=concurrency)
        self._inputs.on_prefetch(self._wake)
        watched.stores.add_handler(self._store_changed)
        if nodes is not None:
            nodes.add_handler(self._node_changed)
        if owned is not None:
            owned.add_handler(self._owned_changed)
        self.status_writes = 0

    # triggers -----------------------------------------------------------------------------

    def _wake(self, prefetch: wire.Obj) -> None:
        self.controller.enqueue(clients.key_of(prefetch))

    def _store_changed(self, old: wire.Obj | None, new: wire.Obj | None) -> None:
        _, node = clients.key_of(new or old or {})
        if not node:
            return
        for prefetch in self._prefetches.items():
            if node in self._inputs.targets(prefetch):
                self.controller.enqueue(clients.key_of(prefetch))

    def _node_changed(self, old: wire.Obj | None, new: wire.Obj | None) -> None:
        """A Node's labels move selectors; its taints and cordon move where warm-up Pods go, so
        every prefetch looks again."""
        for prefetch in self._prefetches.items():
            self._wake(prefetch)

    def _owned_changed(self, old: wire.Obj | None, new: wire.Obj | None) -> None:
        metadata = (new or old or {}).get("metadata") or {}
        for owner in metadata.get("ownerReferences") or []:
            if owner.get("kind") == clients.MODEL_PREFETCHES.kind and metadata.get("namespace"):
                self.controller.enqueue((metadata["namespace"], str(owner.get("name"))))

    # one prefetch -------------------------------------------------------------------------

    async def reconcile_status(self, key: Key) -> runtime.Result:
        await self._inputs.synced()
        prefetch = self._prefetches.get(*key)
        if prefetch is None or prefetch["metadata"].get("deletionTimestamp"):
            return runtime.DONE
        artifact = self._inputs.artifact(prefetch)
        problem = self._inputs.binding_problem(prefetch)
        nodes = [] if problem else self._inputs.targets(prefetch)
        now = self._clock.now()
        lapsed = {n for n in nodes if not self._ready(n, artifact.digest)
                  and self._lapsed(prefetch, self._stores.get("", n), artifact.digest, now)}
        failures: Mapping[str, prefetchplan.Hold] = {}
        if not artifact.problem and not problem:
            cold = [n for n in nodes if self._stores.get("", n) is not None
                    and not self._ready(n, artifact.digest) and n not in lapsed]
            if cold:
                failures = await self._delivery.warm(prefetch, artifact, cold)
        entries = [prefetchplan.node_entry(node, self._stores.get("", node), artifact,
                                           failures.get(node)) for node in nodes]

        def change(current: wire.Obj) -> None:
            wanted = prefetchplan.status(prefetch, entries, artifact, now=now, base=current,
                                         lapsed=len(lapsed), problem=problem)
            current.clear()
            current.update(wanted)

        try:
            written = await status.write(self._api, clients.MODEL_PREFETCHES, *key, change,
                                         uid=str(prefetch["metadata"].get("uid")),
                                         first=prefetch)
        except status.Gone:
            return runtime.DONE
        if written is not None:
            self.status_writes += 1
        return runtime.Result(requeue_after=self._failed_recheck if failures else RESYNC_SECONDS)

    def _ready(self, node: str, digest: str) -> bool:
        entry = prefetchplan.model_entry(self._stores.get("", node), digest)
        return entry is not None and nodemodelstore.entry_state(entry) == states.READY

    def _lapsed(self, prefetch: wire.Obj, store: wire.Obj | None, digest: str,
                now: datetime.datetime) -> bool:
        """The prefetch's pin on this node lapsed past ``ttlAfterLastUse``."""
        if store is None or not digest or not prefetchplan.pinned(prefetch):
            return False
        until = prefetchplan.pin_until(prefetch, store, digest)
        return until is not None and until <= now
