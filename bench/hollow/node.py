"""One hollow node plugin: the real plugin's API side over a simulated disk.

What runs is the plugin's own code: ``artifacts.Informer`` over ``apiclient.KubeArtifactClient``
(list + watch of every ModelArtifact, relist on expiry), ``nodestore.source.Source`` over
``KubeStoreApi`` (list + watch of its own NodeModelStore), ``nodestore.reporter.Reporter`` with
``nodestore.compose.Composer`` (the status rules, the thresholds and the 256-entry cap), each node
with its own ``kube.Client`` from its own kubeconfig (its own Pod-bound token). Only the disk and
the hub are replaced, by ``disk.Disk``. Thin wrappers count what crosses the seams: events and
bookmarks received, how late a touched artifact arrived, and when a status write that published
a digest was acknowledged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import kube
from bench.hollow import disk
from nodeplugin import apiclient, artifacts
from nodeplugin.nodestore import apply, compose, reporter, source
from openapi import states, wire
from openapi.kinds import nodemodelstore
from timing import clock as clocks

SENT = "bench.gpustack.ai/sent"
"""The annotation the scenario stamps on an artifact it touches: the wall time of the write."""


@dataclasses.dataclass
class Counts:
    artifact_events: int = 0
    store_events: int = 0
    bookmarks: int = 0
    relists: int = 0
    """Lists of the artifacts or of the node's own store after the first (expiry, or trouble)."""
    lags: list[float] = dataclasses.field(default_factory=list)
    """Seconds from a touched artifact's write to its event here."""
    published: list[tuple[str, float]] = dataclasses.field(default_factory=list)
    """(digest, wall time the status write that first showed it Ready was acknowledged)."""
    writes_seen: int = 0
    progress_writes_seen: int = 0


class CountingArtifacts:
    """``apiclient.ArtifactClient`` around the real one, counting what it receives."""

    def __init__(self, inner: apiclient.ArtifactClient, counts: Counts) -> None:
        self._inner = inner
        self._counts = counts
        self._listed = 0

    async def list_page(self, *, limit: int, continue_token: str) -> apiclient.ListPage:
        page = await self._inner.list_page(limit=limit, continue_token=continue_token)
        if not continue_token:
            self._counts.relists += self._listed
            self._listed = 1
        return page

    async def watch(self, resource_version: str) -> AsyncIterator[apiclient.WatchEvent]:
        async for event in self._inner.watch(resource_version):
            if event["type"] == "BOOKMARK":
                self._counts.bookmarks += 1
            else:
                self._counts.artifact_events += 1
                sent = ((event["object"].get("metadata") or {}).get("annotations") or {}).get(SENT)
                if sent:
                    self._counts.lags.append(time.time() - float(sent))
            yield event

    async def aclose(self) -> None:
        await self._inner.aclose()


class CountingStore:
    """``source.StoreApi`` around the real one: counts its events, and notes when a write that
    shows a digest Ready for the first time was acknowledged."""

    def __init__(self, inner: source.KubeStoreApi, counts: Counts) -> None:
        self._inner = inner
        self._counts = counts
        self._ready: set[str] = set()
        self._listed = 0

    async def list_store(self, name: str) -> tuple[wire.Obj | None, str]:
        found = await self._inner.list_store(name)
        self._counts.relists += self._listed
        self._listed = 1
        return found

    async def watch_store(self, name: str, resource_version: str
                          ) -> AsyncIterator[tuple[str, wire.Obj]]:
        async for kind, obj in self._inner.watch_store(name, resource_version):
            if kind == "BOOKMARK":
                self._counts.bookmarks += 1
            else:
                self._counts.store_events += 1
            yield kind, obj

    async def write_status(self, name: str, status: wire.Obj) -> None:
        await self._inner.write_status(name, status)
        now = time.time()
        ready = {nodemodelstore.entry_digest(entry)
                 for entry in nodemodelstore.models(nodemodelstore.of_status(status))
                 if nodemodelstore.entry_state(entry) == states.READY}
        if self._ready:  # the first write after start shows what the node held: no news
            self._counts.published.extend((d, now) for d in sorted(ready - self._ready))
        self._ready = ready or {""}

    async def list_config_map(self, namespace: str, name: str) -> tuple[wire.Obj | None, str]:
        return await self._inner.list_config_map(namespace, name)

    def watch_config_map(self, namespace: str, name: str, resource_version: str
                         ) -> AsyncIterator[tuple[str, wire.Obj]]:
        return self._inner.watch_config_map(namespace, name, resource_version)


class HollowNode:
    def __init__(self, name: str, kubeconfig: pathlib.Path, *, namespace: str,
                 clock: clocks.Clock | None = None) -> None:
        self.name = name
        self.clock = clock or clocks.SystemClock()
        self.counts = Counts()
        self.disk = disk.Disk(time.monotonic)
        self.client = kube.Client.connect(kubeconfig)
        self.informer = artifacts.Informer(CountingArtifacts(
            apiclient.KubeArtifactClient(self.client, owns_client=False), self.counts))
        self.state = apply.NodeState()
        self.composer = compose.Composer(
            node=self.state, stock=self.disk, tree_facts=self.disk, materializer=self.disk,
            failures=disk.Nothing(), quarantined=disk.NoneHeld(), references=disk.NoMounts(),
            usage_store=disk.NoUsage(), ledger=self.disk, clock=self.clock,
            verdicts=compose.Verdicts(skipped=lambda: None, nothing_to_remove=lambda: False),
        )  # fmt: skip
        self.store = CountingStore(source.KubeStoreApi(self.client), self.counts)
        self.reporter = reporter.Reporter(self.composer.compose, self._write, clock=self.clock,
                                          enabled=lambda: self.state.present)
        self.disk.changed = self.reporter.changed
        self.source = source.Source(self.store, node=name, namespace=namespace,
                                    changed=self._changed, stale=self.reporter.reset)
        self._tasks: list[asyncio.Task[None]] = []

    async def _write(self, status: Mapping[str, Any]) -> None:
        await self.store.write_status(self.name, dict(status))

    async def _changed(self, obj: wire.Obj | None, ca: source.CA) -> None:
        """What the plugin's applier keeps of the object (a hollow node applies no spec)."""
        meta = (obj or {}).get("metadata") or {}
        previous = self.state.uid
        self.state.present = obj is not None
        self.state.uid = str(meta.get("uid") or "")
        self.state.observed_generation = int(meta["generation"]) if "generation" in meta else None
        if self.state.uid != previous:
            self.reporter.reset()
        else:
            self.reporter.changed()

    def start(self) -> None:
        for name, run in (("informer", self.informer.run), ("source", self.source.run),
                          ("reporter", self.reporter.run)):
            self._tasks.append(asyncio.create_task(run(), name=f"{self.name} {name}"))

    @property
    def ready(self) -> bool:
        """Synced with the artifacts and its first status written."""
        return self.informer.synced and self.reporter.writes > 0

    async def stop(self) -> None:
        self.disk.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.client.aclose()
