"""The node-store side of a running plugin, assembled: spec in, status out, collection, scrub.

``NodeStore`` takes the pieces the CSI side already runs (cache, references, usage, locks, the
materializer behind its gate, the capacity ledger, the inventory) and adds its own long-lived
tasks: the object's watch (``source``), the status reporter, collection and the integrity scrub.
Without a ``StoreApi`` (unit tests of the CSI side, or a plugin told to run without the API) the
source and the reporter are absent: the start-up flags then stay in force, nothing is collected
(no spec applied) and the scrub still runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from nodeplugin import scrub
from nodeplugin.cache import integrity, inventory, layout, locks, quarantine, refs, trees, usage
from nodeplugin.materialize import capacity
from nodeplugin.materialize import failures as failure_records
from nodeplugin.nodestore import apply, collect, compose, gate, reporter, source
from openapi import states
from timing import clock as clocks


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    node_name: str
    namespace: str
    kubelet_dir: str
    scrub_interval: float = scrub.DEFAULT_INTERVAL
    scrub_bytes_per_second: int = scrub.DEFAULT_BYTES_PER_SECOND
    ca_bundle: str | None = None
    """The deploy-time hub CA bundle (``--ca-bundle``), while the spec names no ConfigMap."""


log = logging.getLogger(__name__)


class NodeStore:
    def __init__(
        self,
        options: Options,
        *,
        cache: layout.Layout,
        references: refs.References,
        usage_store: usage.UsageStore,
        digest_locks: locks.DigestLocks,
        materializer: gate.Gate,
        failures: failure_records.Failures,
        quarantined: quarantine.Quarantine,
        checks: integrity.Integrity,
        ledger: capacity.Capacity,
        stock: inventory.Inventory,
        tree_facts: trees.Trees,
        clock: clocks.Clock,
        api: source.StoreApi | None,
        make_hub: apply.MakeHub | None,
        read_mountinfo: Any = refs.read_mountinfo,
        origins: Callable[[], Mapping[str, states.Origin]] = dict,
        peer: Callable[[], str] | None = None,
    ) -> None:
        """``peer``: the published URL of this node's peer port (``compose.Composer``)."""
        self.options = options
        self.state = apply.NodeState()
        self.collector = collect.Collector(
            cache, references=references, usage_store=usage_store, digest_locks=digest_locks,
            failures=failures, quarantined=quarantined,
            running=lambda: [p.digest for p in materializer.running()], ledger=ledger,
            stock=stock, tree_facts=tree_facts, node=self.state, clock=clock,
            read_mountinfo=read_mountinfo, removed=lambda digests: self.changed(),
        )  # fmt: skip
        ledger.make_room = self.collector.make_room
        self.composer = compose.Composer(
            node=self.state, stock=stock, tree_facts=tree_facts, materializer=materializer,
            failures=failures, quarantined=quarantined, references=references,
            usage_store=usage_store, ledger=ledger, clock=clock, origins=origins,
            peer=peer, verdicts=compose.Verdicts(
                skipped=lambda: self.collector.skipped,
                nothing_to_remove=lambda: self.collector.nothing_to_remove,
                over_high=self.collector.observe,
            ),
        )  # fmt: skip
        self.api = api
        self.reporter: reporter.Reporter | None = None
        self.source: source.Source | None = None
        self.applier = apply.Applier(
            cache, gate=materializer, ledger=ledger, kubelet_dir=options.kubelet_dir,
            state=self.state, namespace=options.namespace, make_hub=make_hub,
            notify=self.changed, applied=self._applied, default_ca_bundle=options.ca_bundle,
        )  # fmt: skip
        if api is not None:
            self.reporter = reporter.Reporter(
                self.composer.compose, self._write, clock=clock,
                enabled=lambda: self.state.present,
            )
            self.source = source.Source(
                api, node=options.node_name, namespace=options.namespace,
                changed=self._changed_object, stale=self.reporter.reset,
            )
        self.scrubber = scrub.Scrubber(
            cache, checks, clock=clock, interval=options.scrub_interval,
            bytes_per_second=options.scrub_bytes_per_second,
        )  # fmt: skip
        self._quarantine = quarantined
        self._rehashed: str | None = None
        """The last rehashRequest seen (None before the first spec: a value already there at
        start is not a new request; the start checks cover it)."""
        self._tasks: list[asyncio.Task[None]] = []
        usage_store.add_listener(self._usage_changed)

    def changed(self) -> None:
        if self.reporter is not None:
            self.reporter.changed()

    async def _changed_object(self, obj: Mapping[str, Any] | None, ca: source.CA) -> None:
        previous = self.state.uid
        await self.applier.changed(dict(obj) if obj is not None else None, ca)
        if self.reporter is not None and self.state.uid != previous:
            self.reporter.reset()

    async def _applied(self) -> None:
        # A new spec's watermarks may put usage over the high one: collect now.
        self.collector.poke()
        # An operator's new rehashRequest (spec.operations): a full re-hash pass now.
        applied = self.state.applied
        if applied is None:
            return
        request = applied.rehash_request
        if request and self._rehashed is not None and request != self._rehashed:
            log.warning("re-hash requested by spec.operations.rehashRequest (%s)", request[:63])
            self.scrubber.request()
        self._rehashed = request

    async def _write(self, status: Mapping[str, Any]) -> None:
        assert self.api is not None
        await self.api.write_status(self.options.node_name, dict(status))

    def _usage_changed(self, digests: set[str]) -> None:
        self.changed()
        evict = self.state.applied.evict if self.state.applied is not None else frozenset()
        if any(d in self._quarantine or d in evict for d in digests):
            self.collector.poke()  # a quarantined or evicted tree may have lost its last Pod

    def quarantined(self, digest: str) -> None:
        """A tree was quarantined: report it, and let collection remove the held copy once no
        Pod mounts it."""
        self.changed()
        self.collector.poke()

    def start(self, *, settled: asyncio.Future[None] | asyncio.Task[None] | None = None) -> None:
        """Start the long-lived tasks; the reporter waits for ``settled`` (the inventory's
        first measurement) so its first write is complete."""
        if self.source is not None:
            self._tasks.append(asyncio.create_task(self.source.run(), name="node store watch"))
        if self.reporter is not None:
            self._tasks.append(asyncio.create_task(self._report(settled), name="status reporter"))
        self._tasks.append(asyncio.create_task(self.collector.run(), name="collection"))
        self._tasks.append(asyncio.create_task(self.scrubber.run(), name="integrity scrub"))

    async def _report(self, settled: asyncio.Future[None] | asyncio.Task[None] | None) -> None:
        assert self.reporter is not None
        if settled is not None:
            await asyncio.gather(asyncio.shield(settled), return_exceptions=True)
        await self.reporter.run()

    async def stop(self) -> None:
        self.scrubber.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
