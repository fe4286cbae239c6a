"""The prefetch controller over the real registry and the in-process client: targets, per-node
phases from the node stores, conditions, the pins' union (and its withdrawal), the ttl lapse and
the delivery asked only of the cold nodes."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, cast

import pytest

from apiserver.auth import user as users
from apiserver.registry import build
from apiserver.wiring import inprocess
from controllers.prefetches import controller as prefetches
from controllers.prefetches import inputs, pins
from controllers.prefetches import plan as prefetchplan
from controllers.runtime import client as clients
from controllers.runtime import informer, queue
from devkit import clock as manual
from openapi import resources
from tests.support import waiting

WORKER = "system:serviceaccount:gpustack-system:model-manager-worker"
DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


class Recorded:
    def __init__(self, failing: Mapping[str, str] | None = None) -> None:
        self.asked: list[tuple[str, str, tuple[str, ...]]] = []
        self.failing = dict(failing or {})

    async def warm(self, prefetch: dict[str, Any], artifact: prefetchplan.Artifact,
                   nodes: Sequence[str]) -> Mapping[str, prefetchplan.Hold]:
        self.asked.append((prefetch["metadata"]["name"], artifact.digest, tuple(nodes)))
        return {n: prefetchplan.failed(why) for n, why in self.failing.items() if n in nodes}


class World:
    def __init__(self, registry: build.Registry, delivery: Recorded) -> None:
        self.registry = registry
        self.clock = manual.ManualClock()
        self.api = inprocess.RegistryClient(registry, user=users.UserInfo(WORKER),
                                            worker_username=WORKER)
        self.informers = [informer.Informer(self.api, resource, self.clock) for resource in (
            clients.MODEL_PREFETCHES, clients.MODEL_ARTIFACTS, clients.NODE_MODEL_STORES)]
        self.delivery = delivery
        self.controller = prefetches.Prefetches(self.api, inputs.Inputs(*self.informers),
                                                self.clock, delivery=delivery)
        self.pins = pins.Pins(self.api, inputs.Inputs(*self.informers), self.clock)
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self.tasks = [asyncio.create_task(each.run()) for each in self.informers]
        for each in self.informers:
            await each.synced.wait()

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def settle(self) -> None:
        """Until every informer holds the registry's latest objects."""
        for each, stored in zip(self.informers, (self.registry.modelprefetches,
                                                 self.registry.modelartifacts,
                                                 self.registry.nodemodelstores), strict=True):
            items = (await stored.list("")).items()
            versions = {clients.key_of(o): o["metadata"]["resourceVersion"] for o in items}
            await waiting.until(lambda e=each, v=versions: {  # type: ignore[misc]
                clients.key_of(o): o["metadata"]["resourceVersion"] for o in e.items()} == v,
                what=f"{each.resource.plural} informer")

    async def node(self, name: str, models: list[dict[str, Any]] | None = None) -> None:
        try:
            found = await self.registry.nodemodelstores.get("", name)
        except Exception:
            found = await self.registry.nodemodelstores.create(
                {"apiVersion": resources.GROUP_VERSION, "kind": "NodeModelStore",
                 "metadata": {"name": name}, "spec": {}})
        if models is not None:
            await self.registry.nodemodelstores.update_status(
                {**found, "status": {"models": models}}, name=name)

    async def artifact(self, name: str = "qwen", digest: str | None = DIGEST,
                       source: dict[str, Any] | None = None) -> None:
        body = {"apiVersion": resources.GROUP_VERSION, "kind": "ModelArtifact",
                "metadata": {"name": name, "namespace": "team-a"},
                "spec": {"source": source or {"huggingFace": {"repository": "Qwen/Qwen3"}}}}
        created = await self.registry.modelartifacts.create(body)
        if digest:
            await self.registry.modelartifacts.update_status(
                {**created, "status": {"resolved": {"manifestDigest": digest,
                                                    "sizeBytes": 100}}},
                namespace="team-a", name=name)

    async def prefetch(self, name: str = "warm", **spec: Any) -> None:
        body: dict[str, Any] = {"artifactRef": {"name": "qwen"},
                                "targets": {"nodeNames": ["node-1", "node-2"]}}
        body.update(spec)
        await self.registry.modelprefetches.create(
            {"apiVersion": resources.GROUP_VERSION, "kind": "ModelPrefetch",
             "metadata": {"name": name, "namespace": "team-a"}, "spec": body})

    async def status(self, name: str = "warm") -> dict[str, Any]:
        await self.settle()
        await self.controller.reconcile_status(("team-a", name))
        found = await self.registry.modelprefetches.get("team-a", name)
        return dict(found.get("status") or {})

    async def pinned(self, node: str) -> list[str]:
        await self.settle()
        await self.pins.reconcile_pins(node)
        found = await self.registry.nodemodelstores.get("", node)
        return list((found.get("spec") or {}).get("pinned") or [])


@pytest.fixture
async def world(registry: build.Registry) -> AsyncIterator[World]:
    running = World(registry, Recorded({"node-2": "warm-up Pod failed: ImagePullBackOff"}))
    await running.start()
    try:
        yield running
    finally:
        await running.close()


def _condition(status: dict[str, Any], kind: str) -> tuple[str, str]:
    (found,) = [c for c in status["conditions"] if c["type"] == kind]
    return found["status"], found["reason"]


async def test_phases_counts_and_conditions_follow_the_node_stores(world: World) -> None:
    await world.artifact()
    await world.node("node-1", [{"digest": DIGEST, "state": "Downloading", "sizeBytes": 100,
                                 "downloadedBytes": 40}])
    await world.node("node-2")
    await world.prefetch(targets={"nodeNames": ["node-1", "node-2", "node-3"], "minReady": 1})
    status = await world.status()
    by_name = {n["name"]: n for n in status["nodes"]}
    assert by_name["node-1"] == {"name": "node-1", "phase": "Downloading", "sizeBytes": 100,
                                 "downloadedBytes": 40, "pinned": False}
    assert by_name["node-2"]["phase"] == "Failed"
    assert by_name["node-2"]["reason"] == "DeliveryFailed"
    assert "ImagePullBackOff" in by_name["node-2"]["message"]
    assert (by_name["node-3"]["phase"], by_name["node-3"]["reason"]) == ("Pending", "NoNodeStore")
    assert (status["desiredNodes"], status["readyNodes"], status["downloadingNodes"],
            status["failedNodes"]) == (3, 0, 1, 1)
    assert status["manifestDigest"] == DIGEST and status["observedGeneration"] == 1
    assert _condition(status, "Available") == ("False", "TooFewReady")
    assert _condition(status, "Progressing") == ("True", "Warming")
    assert _condition(status, "Degraded") == ("True", "NodesFailed")
    # only the nodes with a store that do not hold the digest are asked to warm
    assert world.delivery.asked[-1] == ("warm", DIGEST, ("node-1", "node-2"))

    await world.node("node-1", [{"digest": DIGEST, "state": "Ready", "sizeBytes": 100}])
    status = await world.status()
    assert status["readyNodes"] == 1
    assert _condition(status, "Available") == ("True", "EnoughReady")
    assert world.delivery.asked[-1] == ("warm", DIGEST, ("node-2",))


class _Owned:
    def __init__(self) -> None:
        self.handlers: list[informer.Handler] = []

    def add_handler(self, handler: informer.Handler) -> None:
        self.handlers.append(handler)


async def test_a_failed_delivery_is_looked_at_again_and_an_owned_object_wakes_its_owner(
    world: World,
) -> None:
    owned = _Owned()
    controller = prefetches.Prefetches(
        world.api, inputs.Inputs(*world.informers), world.clock, delivery=world.delivery,
        owned=cast(informer.Informer, owned), failed_recheck=5.0)
    await world.artifact()
    await world.node("node-1")
    await world.node("node-2")
    await world.prefetch()
    await world.settle()
    assert (await controller.reconcile_status(("team-a", "warm"))).requeue_after == 5.0
    world.delivery.failing.clear()
    result = await controller.reconcile_status(("team-a", "warm"))
    assert result.requeue_after == prefetches.RESYNC_SECONDS
    controller.controller.queue = queue.WorkQueue(world.clock)
    (handler,) = owned.handlers
    handler(None, {"metadata": {"name": "warm-warmup-0123456789", "namespace": "team-a",
                                "ownerReferences": [{"kind": "ModelPrefetch", "name": "warm"}]}})
    handler(None, {"metadata": {"name": "other", "namespace": "team-a"}})
    assert len(controller.controller.queue) == 1
    assert await controller.controller.queue.get() == ("team-a", "warm")


async def test_the_artifact_missing_unresolved_or_not_a_hub_source_is_reported(
    world: World,
) -> None:
    await world.node("node-1")
    await world.prefetch()
    status = await world.status()
    assert _condition(status, "Available") == ("False", "ArtifactNotFound")
    assert {n["reason"] for n in status["nodes"]} == {"ArtifactNotFound", "NoNodeStore"}
    await world.artifact(digest=None)
    assert _condition(await world.status(), "Degraded") == ("True", "ArtifactNotResolved")
    await world.artifact("claimed", digest=None,
                         source={"persistentVolumeClaim": {"claimName": "models"}})
    await world.prefetch("from-claim", artifactRef={"name": "claimed"})
    status = await world.status("from-claim")
    assert _condition(status, "Available") == ("False", "UnsupportedSource")
    assert world.delivery.asked == []


async def test_a_selector_that_matches_nothing_is_reported_not_refused(world: World) -> None:
    await world.artifact()
    await world.node("node-1")
    await world.prefetch(targets={"nodeSelector": {"pool": "h100"}})
    status = await world.status()
    assert status["desiredNodes"] == 0 and status["nodes"] == []
    assert _condition(status, "Available") == ("False", "NoTargets")
    # {} selects every node running the plugin (standalone nodes have no labels)
    await world.prefetch("everywhere", targets={"nodeSelector": {}})
    assert [n["name"] for n in (await world.status("everywhere"))["nodes"]] == ["node-1"]


async def test_pins_are_the_union_and_leave_with_the_prefetch(world: World) -> None:
    await world.artifact()
    await world.artifact("llama", digest=OTHER)
    await world.node("node-1")
    await world.node("node-2")
    await world.prefetch()
    await world.prefetch("other", artifactRef={"name": "llama"},
                         targets={"nodeNames": ["node-1"]})
    await world.prefetch("unpinned", artifactRef={"name": "llama"},
                         targets={"nodeNames": ["node-2"]}, retention={"pinned": False})
    assert await world.pinned("node-1") == sorted([DIGEST, OTHER])
    assert await world.pinned("node-2") == [DIGEST]
    status = await world.status()
    assert {n["name"]: n["pinned"] for n in status["nodes"]} == {"node-1": True, "node-2": True}
    # another node store field is kept as it was
    stored = await world.registry.nodemodelstores.get("", "node-1")
    assert stored["spec"]["watermarks"] == {"highPercent": 80, "lowPercent": 70}

    await world.registry.modelprefetches.delete("team-a", "warm")
    assert await world.pinned("node-1") == [OTHER]
    assert await world.pinned("node-2") == []
    stored = await world.registry.nodemodelstores.get("", "node-2")
    assert "pinned" not in stored["spec"]
    writes = world.pins.pin_writes
    assert await world.pinned("node-1") == [OTHER]
    assert world.pins.pin_writes == writes  # nothing changed, nothing written


async def test_a_ttl_lifts_the_pin_once_the_copy_went_unused(world: World) -> None:
    await world.artifact()
    used = world.clock.now().replace(minute=0, second=0, microsecond=0)
    await world.node("node-1", [{"digest": DIGEST, "state": "Ready", "sizeBytes": 100,
                                 "lastUsedTime": used.strftime("%Y-%m-%dT%H:%M:%SZ")}])
    await world.prefetch(targets={"nodeNames": ["node-1"]},
                         retention={"pinned": True, "ttlAfterLastUse": "2h"})
    assert await world.pinned("node-1") == [DIGEST]
    world.clock.advance((used + datetime.timedelta(hours=2) - world.clock.now())
                        .total_seconds() + 1)
    assert await world.pinned("node-1") == []
    status = await world.status()
    assert status["nodes"][0]["pinned"] is False and status["nodes"][0]["phase"] == "Ready"


def test_pins_keep_the_oldest_prefetches_when_the_list_is_full() -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    many = [prefetchplan.Pin("sha256:" + f"{i:064x}", f"2025-01-01T00:{i // 60:02d}:"
                             f"{i % 60:02d}Z", None) for i in range(300)]
    kept, wake = prefetchplan.pins(reversed(many), now)
    assert len(kept) == 256 and wake is None
    assert kept == sorted(p.digest for p in many[:256])
    lapsing = [prefetchplan.Pin(DIGEST, "x", now + datetime.timedelta(seconds=90)),
               prefetchplan.Pin(OTHER, "x", now - datetime.timedelta(seconds=1))]
    assert prefetchplan.pins(lapsing, now) == ([DIGEST], 90.0)


async def test_a_node_that_changes_wakes_the_prefetches_naming_it(world: World) -> None:
    """A taint or a cordon moves where a warm-up Pod may go: the prefetches that name the node
    (and those with a selector) look again at once, not at the next resync."""
    nodes = _Owned()
    controller = prefetches.Prefetches(
        world.api, inputs.Inputs(*world.informers), world.clock, delivery=world.delivery,
        nodes=cast(informer.Informer, nodes))
    await world.artifact()
    await world.prefetch("named", targets={"nodeNames": ["node-1"]})
    await world.prefetch("elsewhere", targets={"nodeNames": ["node-2"]})
    await world.settle()
    controller.controller.queue = queue.WorkQueue(world.clock)
    (handler,) = nodes.handlers
    tainted = {"metadata": {"name": "node-1"}, "spec": {"taints": [
        {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}}
    handler({"metadata": {"name": "node-1"}, "spec": {}}, tainted)
    assert len(controller.controller.queue) == 1
    assert await controller.controller.queue.get() == ("team-a", "named")
