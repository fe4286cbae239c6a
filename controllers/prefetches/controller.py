"""ModelPrefetches: per-node status, the nodes' pins, and the warm-up of each target node.

Inputs: the prefetches, their artifacts, the NodeModelStores (``status.models`` for the phases,
``spec.pinned`` for the pins) and, in a cluster, the Nodes' labels (``nodeSelector``). Two
controllers share them:

- **status**, per prefetch: resolves the targets (``prefetchplan.targets``), asks the delivery to
  warm every target node that does not hold the digest yet (a warm-up Pod per node in a cluster,
  ``warmup.py``), and writes ``status`` (counts, one entry per node, conditions);
- **pins**, per node: writes ``spec.pinned`` as the union of the digests every live, pinned
  prefetch targeting that node asks for (this controller is the field's only writer; the node
  stores controller keeps it as it is). A prefetch being deleted, or whose pin lapsed
  (``ttlAfterLastUse``), drops out of the union on the next pass, and the node's collection
  reclaims the bytes once nothing references them and their grace passed.

Both run where the node stores run (in the API server: only its in-process client writes a
NodeModelStore's spec), and each key is looked at again every minute.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

from controllers.nodestores import controller as nodestores
from controllers.prefetches import plan as prefetchplan
from controllers.runtime import client as clients
from controllers.runtime import controller as runtime
from controllers.runtime import errors, informer, status
from timing import clock as clocks

log = logging.getLogger(__name__)

Obj = clients.Obj
Key = tuple[str, str]
RESYNC_SECONDS = 60.0
ARTIFACT_INDEX = "artifact"


class Delivery(Protocol):
    async def warm(self, prefetch: Obj, artifact: prefetchplan.Artifact,
                   nodes: Sequence[str]) -> Mapping[str, prefetchplan.Hold]:
        """Have each of ``nodes`` (with a NodeModelStore, not holding the digest yet) download
        the artifact through its ordinary path; returns node -> why its warm-up failed or is
        not made."""
        ...


class NoDelivery:
    """Nothing is asked of the nodes: a node warms when a Pod mounts the artifact there; the
    status and the pins still follow the prefetch (standalone mode, docs/controllers.md)."""

    async def warm(self, prefetch: Obj, artifact: prefetchplan.Artifact,
                   nodes: Sequence[str]) -> Mapping[str, prefetchplan.Hold]:
        return {}


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


def _artifact_key(prefetch: Obj) -> list[str]:
    name = prefetchplan.artifact_name(prefetch)
    return [f"{prefetchplan.namespace(prefetch)}/{name}"] if name else []


class Prefetches:
    name = "prefetches"

    def __init__(
        self,
        api: nodestores.Api,
        prefetches: informer.Informer,
        artifacts: informer.Informer,
        stores: informer.Informer,
        clock: clocks.Clock,
        *,
        labels: Labels | None = None,
        nodes: informer.Informer | None = None,
        delivery: Delivery | None = None,
        owned: informer.Informer | None = None,
        failed_recheck: float = RESYNC_SECONDS,
        workers: int = 2,
    ) -> None:
        """``nodes``: the Nodes' informer whose changes wake the prefetches (``labels`` reads
        it); ``owned``: objects a prefetch owns (its warm-up Pods) whose changes wake their
        owner; both run by the caller. A prefetch whose delivery failed somewhere is looked at
        again after ``failed_recheck`` seconds (at most a minute), when a failed delivery is
        retried."""
        self._api = api
        self._prefetches = prefetches
        self._artifacts = artifacts
        self._stores = stores
        self._clock = clock
        self._labels = labels if labels is not None else NoLabels()
        self._delivery = delivery if delivery is not None else NoDelivery()
        self._failed_recheck = min(RESYNC_SECONDS, failed_recheck)
        self.statuses: runtime.Controller[Key] = runtime.Controller(
            "prefetch status", self.reconcile_status, clock, keys=prefetches.keys,
            workers=workers)
        self.pins: runtime.Controller[str] = runtime.Controller(
            "prefetch pins", self.reconcile_pins, clock, keys=self._store_names, workers=1)
        prefetches.add_index(ARTIFACT_INDEX, _artifact_key)
        prefetches.add_handler(self._prefetch_changed)
        artifacts.add_handler(self._artifact_changed)
        stores.add_handler(self._store_changed)
        if nodes is not None:
            nodes.add_handler(self._node_changed)
        if owned is not None:
            owned.add_handler(self._owned_changed)
        self.pin_writes = 0
        self.status_writes = 0

    # runtime.Runnable ---------------------------------------------------------------------

    async def run(self) -> None:
        await asyncio.gather(self.statuses.run(), self.pins.run())

    def stop(self) -> None:
        self.statuses.stop()
        self.pins.stop()

    # what the informers hold --------------------------------------------------------------

    def _store_names(self) -> list[str]:
        return sorted(clients.key_of(obj)[1] for obj in self._stores.items())

    def _targets(self, prefetch: Obj) -> list[str]:
        return prefetchplan.targets(prefetch, self._store_names(), self._labels.labels)

    def _artifact(self, prefetch: Obj) -> prefetchplan.Artifact:
        found = self._artifacts.get(prefetchplan.namespace(prefetch),
                                    prefetchplan.artifact_name(prefetch))
        return prefetchplan.artifact_of(prefetch, found)

    # triggers -----------------------------------------------------------------------------

    def _wake(self, prefetch: Obj | None) -> None:
        if prefetch is None:
            return
        self.statuses.enqueue(clients.key_of(prefetch))
        for node in self._targets(prefetch):
            self.pins.enqueue(node)

    def _prefetch_changed(self, old: Obj | None, new: Obj | None) -> None:
        self._wake(old)
        self._wake(new)

    def _artifact_changed(self, old: Obj | None, new: Obj | None) -> None:
        namespace, name = clients.key_of(new or old or {})
        for key in self._prefetches.index_keys(ARTIFACT_INDEX, f"{namespace}/{name}"):
            self._wake(self._prefetches.get(*key))

    def _store_changed(self, old: Obj | None, new: Obj | None) -> None:
        _, node = clients.key_of(new or old or {})
        if not node:
            return
        self.pins.enqueue(node)
        for prefetch in self._prefetches.items():
            if node in self._targets(prefetch):
                self.statuses.enqueue(clients.key_of(prefetch))

    def _node_changed(self, old: Obj | None, new: Obj | None) -> None:
        """A Node's labels move selectors; its taints and cordon move where warm-up Pods go, so
        the prefetches naming it look again too."""
        _, node = clients.key_of(new or old or {})
        for prefetch in self._prefetches.items():
            targets = (prefetch.get("spec") or {}).get("targets") or {}
            if targets.get("nodeSelector") is not None or node in (targets.get("nodeNames") or []):
                self._wake(prefetch)
        if node:
            self.pins.enqueue(node)

    def _owned_changed(self, old: Obj | None, new: Obj | None) -> None:
        metadata = (new or old or {}).get("metadata") or {}
        for owner in metadata.get("ownerReferences") or []:
            if owner.get("kind") == clients.MODEL_PREFETCHES.kind and metadata.get("namespace"):
                self.statuses.enqueue((metadata["namespace"], str(owner.get("name"))))

    # one prefetch -------------------------------------------------------------------------

    async def reconcile_status(self, key: Key) -> runtime.Result:
        await self._synced()
        prefetch = self._prefetches.get(*key)
        if prefetch is None or prefetch["metadata"].get("deletionTimestamp"):
            return runtime.DONE
        artifact = self._artifact(prefetch)
        nodes = self._targets(prefetch)
        failures: Mapping[str, prefetchplan.Hold] = {}
        if not artifact.problem:
            cold = [n for n in nodes if self._stores.get("", n) is not None and
                    (prefetchplan.model_entry(self._stores.get("", n), artifact.digest)
                     or {}).get("state") != "Ready"]
            if cold:
                failures = await self._delivery.warm(prefetch, artifact, cold)
        now = self._clock.now()
        entries = []
        for node in nodes:
            store = self._stores.get("", node)
            entry = prefetchplan.node_entry(node, store, artifact, failures.get(node))
            entry["pinned"] = self._pinned_here(prefetch, store, artifact.digest, now)
            entries.append(entry)

        def change(current: Obj) -> None:
            wanted = prefetchplan.status(prefetch, entries, artifact, now=now, base=current)
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

    def _pinned_here(self, prefetch: Obj, store: Obj | None, digest: str,
                     now: datetime.datetime) -> bool:
        if store is None or not digest or not prefetchplan.pinned(prefetch):
            return False
        if digest not in ((store.get("spec") or {}).get("pinned") or []):
            return False
        until = prefetchplan.pin_until(prefetch, store, digest)
        return until is None or until > now

    # one node -----------------------------------------------------------------------------

    async def reconcile_pins(self, node: str) -> runtime.Result:
        await self._synced()
        store = self._stores.get("", node)
        if store is None:
            return runtime.DONE
        wanted, wake = prefetchplan.pins(self._pins_of(node, store), self._clock.now())
        spec = dict(store.get("spec") or {})
        current = spec.get("pinned") or []
        if sorted(current) != wanted:
            if wanted:
                spec["pinned"] = wanted
            else:
                spec.pop("pinned", None)
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

    def _pins_of(self, node: str, store: Obj) -> list[prefetchplan.Pin]:
        found = []
        names = self._store_names()
        for prefetch in self._prefetches.items():
            metadata = prefetch.get("metadata") or {}
            if metadata.get("deletionTimestamp") or not prefetchplan.pinned(prefetch):
                continue
            artifact = self._artifact(prefetch)
            if not artifact.digest:
                continue
            if node not in prefetchplan.targets(prefetch, names, self._labels.labels):
                continue
            found.append(prefetchplan.Pin(
                artifact.digest, str(metadata.get("creationTimestamp") or ""),
                prefetchplan.pin_until(prefetch, store, artifact.digest)))
        return found

    async def _synced(self) -> None:
        for each in (self._prefetches, self._artifacts, self._stores):
            await each.synced.wait()
