"""status.nodes from the NodeModelStores listing the digest: counts, the mean in steps of 5, no
write when nothing changed, never a node name; and the digest index kept from the watch."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apiserver.auth import user as users
from apiserver.registry import build
from apiserver.wiring import inprocess
from controllers.aggregate import controller as aggregate
from controllers.nodeview import index as nodeindex
from controllers.runtime import client as clients
from controllers.runtime import informer
from devkit import clock as manual
from tests.support import waiting
from tests.unit.controllers.conftest import WORKER

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


class World:
    def __init__(self, registry: build.Registry) -> None:
        self.registry = registry
        self.clock = clock = manual.ManualClock()
        api = inprocess.RegistryClient(registry, user=users.UserInfo(WORKER),
                                       worker_username=WORKER)
        self.artifacts = informer.Informer(api, clients.MODEL_ARTIFACTS, clock)
        self.stores = informer.Informer(api, clients.NODE_MODEL_STORES, clock)
        self.index = nodeindex.DigestIndex(self.stores)
        self.aggregator = aggregate.Aggregator(api, self.artifacts, self.index, clock)
        self.tasks = [asyncio.create_task(self.artifacts.run()),
                      asyncio.create_task(self.stores.run())]

    async def artifact(self, name: str, digest: str, size: int = 1000) -> None:
        created = await self.registry.modelartifacts.create(
            {"metadata": {"name": name},
             "spec": {"source": {"huggingFace": {"repository": "org/m"}}}}, namespace="a")
        created["status"] = {"resolved": {"manifestDigest": digest, "sizeBytes": size}}
        await self.registry.modelartifacts.update_status(created, namespace="a", name=name)

    async def node(self, name: str, *models: dict[str, Any]) -> None:
        try:
            current = await self.registry.nodemodelstores.get("", name)
        except Exception:
            current = await self.registry.nodemodelstores.create(
                {"metadata": {"name": name}, "spec": {}})
        current["status"] = {"models": list(models)}
        await self.registry.nodemodelstores.update_status(current, name=name)

    async def settle(self) -> None:
        """Wait until both informers hold exactly what storage holds (their handlers have run,
        so the keys are queued), then drain the queue, a write's spacing passed first."""
        self.clock.advance(aggregate.SPACING)
        for inf, store in ((self.artifacts, self.registry.modelartifacts),
                           (self.stores, self.registry.nodemodelstores)):
            stored = {clients.key_of(o): o["metadata"]["resourceVersion"]
                      for o in (await store.list()).items()}
            await waiting.until(lambda inf=inf, stored=stored: {
                k: informer.version_of(o) for k, o in zip(inf.keys(), inf.items(), strict=True)
            } == stored)
        queue = self.aggregator.controller.queue
        while len(queue):
            key = await queue.get()
            assert key is not None
            await self.aggregator.controller.process_one(key)
            queue.done(key)

    async def nodes(self, name: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = (
            await self.registry.modelartifacts.get("a", name)).get("status", {}).get("nodes")
        return found


@pytest.fixture
async def world(registry: build.Registry) -> AsyncIterator[World]:
    running = World(registry)
    await running.artifacts.synced.wait()
    await running.stores.synced.wait()
    running.aggregator.controller.open()
    try:
        yield running
    finally:
        for task in running.tasks:
            task.cancel()
        await asyncio.gather(*running.tasks, return_exceptions=True)


def model(state: str, have: int = 0, size: int = 1000, reason: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {"digest": DIGEST, "state": state, "sizeBytes": size,
                             "downloadedBytes": have}
    if reason:
        entry["reason"] = reason
    return entry


async def test_counts_and_the_mean_in_steps_of_five(world: World) -> None:
    await world.artifact("m", DIGEST)
    await world.node("n1", model("Ready", 1000))
    await world.node("n2", model("Downloading", 230))
    await world.node("n3", model("Downloading", 570))
    await world.node("n4", model("Failed", reason="SourceUnavailable"),
                     {"digest": OTHER, "state": "Ready"})
    await world.settle()
    nodes = await world.nodes("m")
    assert nodes == {"ready": 1, "downloading": 2, "failed": 1, "downloadingPercent": 40}
    stored = json.dumps(await world.registry.modelartifacts.get("a", "m"))
    assert "n1" not in stored and "n2" not in stored


async def test_no_write_until_a_step_is_crossed(world: World) -> None:
    await world.artifact("m", DIGEST)
    await world.node("n1", model("Downloading", 100))
    await world.settle()
    assert (await world.nodes("m")) == {"ready": 0, "downloading": 1, "failed": 0,
                                        "downloadingPercent": 10}
    writes = world.aggregator.writes
    await world.node("n1", model("Downloading", 140))  # 14%: still the 10 step
    await world.settle()
    assert world.aggregator.writes == writes
    await world.node("n1", model("Downloading", 150))
    await world.settle()
    assert world.aggregator.writes == writes + 1
    assert (await world.nodes("m"))["downloadingPercent"] == 15
    await world.node("n1", model("Ready", 1000))
    await world.settle()
    assert (await world.nodes("m")) == {"ready": 1, "downloading": 0, "failed": 0}


async def test_artifacts_with_the_same_digest_see_the_same_nodes(world: World) -> None:
    await world.artifact("m", DIGEST)
    await world.artifact("twin", DIGEST)
    await world.artifact("other", OTHER)
    await world.node("n1", model("Ready", 1000))
    await world.settle()
    assert (await world.nodes("m")) == (await world.nodes("twin")) == {
        "ready": 1, "downloading": 0, "failed": 0}
    assert (await world.nodes("other")) == {"ready": 0, "downloading": 0, "failed": 0}


async def test_the_index_follows_adds_changes_and_deletes(world: World) -> None:
    await world.node("n1", model("Downloading", 10))
    await world.node("n2", model("Ready", 1000))
    await world.settle()
    assert [h.node for h in world.index.holders(DIGEST)] == ["n1", "n2"]
    await world.node("n1")  # the entry is gone
    await world.settle()
    assert [h.node for h in world.index.holders(DIGEST)] == ["n2"]
    await world.registry.nodemodelstores.delete("", "n2")
    await world.settle()
    assert world.index.holders(DIGEST) == [] and DIGEST not in world.index.digests()


async def test_one_write_per_artifact_per_spacing_merging_the_changes_between(world: World
                                                                             ) -> None:
    """Many nodes changing one model within the spacing cost its watchers one write, made once
    the spacing passed, with everything they changed."""
    await world.artifact("m", DIGEST)
    await world.node("n1", model("Ready", 1000))
    await world.settle()
    writes = world.aggregator.writes
    for name in ("n2", "n3", "n4"):
        await world.node(name, model("Ready", 1000))
        await drain(world)
    assert world.aggregator.writes == writes  # within the spacing: nothing written yet
    assert (await world.nodes("m")) == {"ready": 1, "downloading": 0, "failed": 0}
    world.clock.advance(aggregate.SPACING)  # the deferred key comes back
    await drain(world)
    assert world.aggregator.writes == writes + 1
    assert (await world.nodes("m")) == {"ready": 4, "downloading": 0, "failed": 0}


async def drain(world: World) -> None:
    """What settle does, without moving the clock."""
    stored = {clients.key_of(o): o["metadata"]["resourceVersion"]
              for o in (await world.registry.nodemodelstores.list()).items()}
    await waiting.until(lambda: {
        k: informer.version_of(o) for k, o in zip(world.stores.keys(), world.stores.items(),
                                                  strict=True)} == stored)
    queue = world.aggregator.controller.queue
    while len(queue):
        key = await queue.get()
        assert key is not None
        await world.aggregator.controller.process_one(key)
        queue.done(key)
