"""status.nodes from the NodeModelStores listing the digest, computed when the artifact is read:
counts, the mean in steps of 5, never a node name, no artifact write when a node changes; and
the digest index kept from the watch, with the version a cached answer is checked against."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apiserver.auth import user as users
from apiserver.registry import build
from apiserver.wiring import inprocess
from controllers.nodeview import counts as nodecounts
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
        self.stores = informer.Informer(api, clients.NODE_MODEL_STORES, clock)
        self.index = nodeindex.DigestIndex(self.stores)
        self.counts = nodecounts.Counts(self.index)
        self.tasks = [asyncio.create_task(self.stores.run())]

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
        """Wait until the store informer holds exactly what storage holds (its handlers, the
        index's among them, have run)."""
        stored = {clients.key_of(o): o["metadata"]["resourceVersion"]
                  for o in (await self.registry.nodemodelstores.list()).items()}
        await waiting.until(lambda: {
            k: informer.version_of(o) for k, o in zip(self.stores.keys(), self.stores.items(),
                                                      strict=True)} == stored)

    async def nodes(self, name: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = (
            await self.registry.modelartifacts.get("a", name)).get("status", {}).get("nodes")
        return found

    async def version(self, name: str) -> str:
        return str((await self.registry.modelartifacts.get("a", name))["metadata"][
            "resourceVersion"])


@pytest.fixture
async def world(registry: build.Registry) -> AsyncIterator[World]:
    running = World(registry)
    await running.stores.synced.wait()
    registry.node_counts.view = running.counts
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
    shown = json.dumps(await world.registry.modelartifacts.get("a", "m"))
    assert "n1" not in shown and "n2" not in shown


async def test_a_node_moving_rewrites_no_artifact(world: World) -> None:
    """The counts follow every node change at once (the steps of 5 included), while the
    artifact's resourceVersion, and so every watcher of the artifacts, never hears of it."""
    await world.artifact("m", DIGEST)
    version = await world.version("m")
    await world.node("n1", model("Downloading", 100))
    await world.settle()
    assert (await world.nodes("m")) == {"ready": 0, "downloading": 1, "failed": 0,
                                        "downloadingPercent": 10}
    await world.node("n1", model("Downloading", 140))  # 14%: still the 10 step
    await world.settle()
    assert (await world.nodes("m"))["downloadingPercent"] == 10
    await world.node("n1", model("Downloading", 150))
    await world.settle()
    assert (await world.nodes("m"))["downloadingPercent"] == 15
    await world.node("n1", model("Ready", 1000))
    await world.settle()
    assert (await world.nodes("m")) == {"ready": 1, "downloading": 0, "failed": 0}
    assert await world.version("m") == version
    stored = await world.registry.storage.get(world.registry.modelartifacts.key("a", "m"))
    assert stored is not None and b'"nodes"' not in stored.value


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
    first = world.index.version(DIGEST)
    await world.node("n1")  # the entry is gone
    await world.settle()
    assert [h.node for h in world.index.holders(DIGEST)] == ["n2"]
    second = world.index.version(DIGEST)
    assert second != first and world.index.version(OTHER) == 0
    await world.node("n3", {"digest": OTHER, "state": "Ready"})  # another digest: DIGEST's stays
    await world.settle()
    assert world.index.version(DIGEST) == second
    await world.registry.nodemodelstores.delete("", "n2")
    await world.settle()
    assert world.index.holders(DIGEST) == [] and DIGEST not in world.index.digests()
    assert world.index.version(DIGEST) == 0


async def test_many_nodes_changing_are_all_counted_on_the_next_read(world: World) -> None:
    """No spacing, no merging: the read after the changes sees every one of them."""
    await world.artifact("m", DIGEST)
    await world.node("n1", model("Ready", 1000))
    await world.settle()
    assert (await world.nodes("m")) == {"ready": 1, "downloading": 0, "failed": 0}
    for name in ("n2", "n3", "n4"):
        await world.node(name, model("Ready", 1000))
    await world.settle()
    assert (await world.nodes("m")) == {"ready": 4, "downloading": 0, "failed": 0}


async def test_an_unresolved_artifact_has_nothing_to_count(world: World) -> None:
    await world.registry.modelartifacts.create(
        {"metadata": {"name": "new"},
         "spec": {"source": {"huggingFace": {"repository": "org/m"}}}}, namespace="a")
    await world.node("n1", model("Ready", 1000))
    await world.settle()
    assert (await world.nodes("new")) is None
