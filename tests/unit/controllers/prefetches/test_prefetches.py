"""The prefetch controller over the real registry and the in-process client: targets (held to the
binding's stores), counts from the node stores and conditions naming no node, the pins' union
(and its withdrawal, and its fair share between namespaces), the ttl lapse (``Lapsed``, not warmed
again) and the delivery asked only of the cold nodes. Prefetches are written in the shape before
the pool layer where a test does not care: admission converts them (``UpgradePrefetchTargets``)."""

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
        body: dict[str, Any] = {"artifactRef": {"name": "qwen"}, "bindingRef": {"name": "grant"},
                                "targets": {"nodeNames": ["node-1", "node-2"]}}
        body.update(spec)
        namespace = body.pop("namespace", "team-a")
        if body.get("targets") is None:
            body.pop("targets", None)
        await self.registry.modelprefetches.create(
            {"apiVersion": resources.GROUP_VERSION, "kind": "ModelPrefetch",
             "metadata": {"name": name, "namespace": namespace}, "spec": body})

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
    # node-3 runs no plugin (no NodeModelStore): not a target
    await world.prefetch(targets={"nodeNames": ["node-1", "node-2", "node-3"], "minReady": 1})
    status = await world.status()
    assert "nodes" not in status  # counts only: the status names no node
    assert (status["desiredNodes"], status["readyNodes"], status["downloadingNodes"],
            status["failedNodes"]) == (2, 0, 1, 1)
    assert status["manifestDigest"] == DIGEST and status["observedGeneration"] == 1
    assert _condition(status, "Available") == ("False", "TooFewReady")
    assert _condition(status, "Progressing") == ("True", "Warming")
    assert _condition(status, "Degraded") == ("True", "NodesFailed")
    assert _condition(status, "Lapsed") == ("False", "NotLapsed")
    (degraded,) = [c for c in status["conditions"] if c["type"] == "Degraded"]
    assert "DeliveryFailed (1)" in degraded["message"]
    assert all("node-" not in c["message"] for c in status["conditions"])
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
    assert status["desiredNodes"] == 1 and "nodes" not in status
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
    assert status["desiredNodes"] == 0
    assert _condition(status, "Available") == ("False", "NoTargets")
    # {} selects every node running the plugin (standalone nodes carry only their hostname)
    await world.prefetch("everywhere", targets={"nodeSelector": {}})
    assert (await world.status("everywhere"))["desiredNodes"] == 1
    await world.prefetch("by-host", placement={"nodeSelector": {"matchLabels": {
        "kubernetes.io/hostname": "node-1"}}}, targets=None)
    assert (await world.status("by-host"))["desiredNodes"] == 1


async def test_pins_are_the_union_and_leave_with_the_prefetch(world: World) -> None:
    await world.artifact()
    await world.artifact("llama", digest=OTHER)
    await world.node("node-1")
    await world.node("node-2")
    await world.prefetch(retention={"pinned": True})
    await world.prefetch("other", artifactRef={"name": "llama"},
                         targets={"nodeNames": ["node-1"]}, retention={"pinned": True})
    await world.prefetch("unpinned", artifactRef={"name": "llama"},
                         targets={"nodeNames": ["node-2"]}, retention={"pinned": False})
    assert await world.pinned("node-1") == sorted([DIGEST, OTHER])
    assert await world.pinned("node-2") == [DIGEST]
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
    # the copy is still there: no shortfall, so nothing lapsed in the status's sense
    assert status["readyNodes"] == 1
    assert _condition(status, "Lapsed") == ("False", "NotLapsed")


async def test_a_lapsed_copy_is_not_warmed_again_and_says_lapsed(world: World) -> None:
    await world.artifact()
    used = world.clock.now().replace(minute=0, second=0, microsecond=0)
    await world.node("node-1", [{"digest": DIGEST, "state": "Ready", "sizeBytes": 100,
                                 "lastUsedTime": used.strftime("%Y-%m-%dT%H:%M:%SZ")}])
    await world.node("node-2", [{"digest": DIGEST, "state": "Ready", "sizeBytes": 100}])
    world.delivery.failing.clear()
    await world.prefetch(retention={"pinned": True, "ttlAfterLastUse": "2h"})
    assert (await world.status())["readyNodes"] == 2
    # past the ttl from the last use and from the prefetch's creation (a copy collection took
    # has no lastUsedTime left: the pin then lapses counted from the creation, which the
    # registry stamps with the wall clock)
    created = (await world.registry.modelprefetches.get("team-a", "warm"))["metadata"][
        "creationTimestamp"]
    since = max(used, datetime.datetime.fromisoformat(created.replace("Z", "+00:00")))
    world.clock.advance((since + datetime.timedelta(hours=2) - world.clock.now())
                        .total_seconds() + 1)
    # node-1's copy lapsed and collection took it; node-2 was used since
    await world.node("node-1", [])
    fresh = world.clock.now().replace(minute=0, second=0, microsecond=0)
    await world.node("node-2", [{"digest": DIGEST, "state": "Ready", "sizeBytes": 100,
                                 "lastUsedTime": fresh.strftime("%Y-%m-%dT%H:%M:%SZ")}])
    asked = len(world.delivery.asked)
    status = await world.status()
    assert (status["desiredNodes"], status["readyNodes"]) == (2, 1)
    (lapsed,) = [c for c in status["conditions"] if c["type"] == "Lapsed"]
    assert (lapsed["status"], lapsed["reason"]) == ("True", "RetentionExpired")
    assert lapsed["message"].startswith("1 copy(ies) went unused past ttlAfterLastUse")
    assert _condition(status, "Progressing") == ("False", "Complete")
    assert len(world.delivery.asked) == asked  # not warmed again
    # a shortfall with another cause (a node downloading) is not a lapse
    await world.node("node-2", [{"digest": DIGEST, "state": "Downloading", "sizeBytes": 100,
                                 "downloadedBytes": 1,
                                 "lastUsedTime": fresh.strftime("%Y-%m-%dT%H:%M:%SZ")}])
    assert _condition(await world.status(), "Lapsed") == ("False", "NotLapsed")


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


def test_a_full_pin_list_is_shared_fairly_between_namespaces() -> None:
    """A namespace pinning 300 digests first cannot push out another namespace's later pins."""
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    greedy = [prefetchplan.Pin("sha256:" + f"{i:064x}", f"2025-01-01T00:00:{i % 60:02d}Z", None,
                               "team-a") for i in range(300)]
    late = [prefetchplan.Pin("sha256:" + f"{1000 + i:064x}", "2025-06-01T00:00:00Z", None,
                             "team-b") for i in range(3)]
    shared = prefetchplan.Pin(greedy[0].digest, "2025-07-01T00:00:00Z", None, "team-b")
    kept, _ = prefetchplan.pins([*greedy, *late, shared], now)
    assert len(kept) == 256
    assert {p.digest for p in late} <= set(kept)  # team-b's pins all stay
    assert greedy[0].digest in kept  # pinned by both, kept once

async def test_a_node_that_changes_wakes_the_prefetches_naming_it(world: World) -> None:
    """A taint, a cordon or a label moves where a warm-up Pod may go and what a selector
    selects: every prefetch looks again at once, not at the next resync."""
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
    assert len(controller.controller.queue) == 2
    assert {await controller.controller.queue.get() for _ in range(2)} == {
        ("team-a", "named"), ("team-a", "elsewhere")}


async def test_targets_are_held_to_the_binding_stores_and_a_missing_binding_warms_nothing(
        world: World) -> None:
    bindings = informer.Informer(world.api, clients.MODEL_STORE_BINDINGS, world.clock)
    running = asyncio.create_task(bindings.run())
    try:
        await bindings.synced.wait()
        controller = prefetches.Prefetches(
            world.api, inputs.Inputs(*world.informers, bindings=bindings), world.clock,
            delivery=world.delivery)
        held = pins.Pins(world.api, inputs.Inputs(*world.informers, bindings=bindings),
                         world.clock)
        await world.artifact()
        for node, store in (("node-1", "large"), ("node-2", "small")):
            await world.node(node)
            found = await world.registry.nodemodelstores.get("", node)
            await world.registry.nodemodelstores.update({**found, "spec": {"store": store}})
        await world.registry.modelstorebindings.create({
            "apiVersion": resources.GROUP_VERSION, "kind": "ModelStoreBinding",
            "metadata": {"name": "grant", "namespace": "team-a"},
            "spec": {"storeRefs": [{"name": "large"}], "quota": {"bytes": 1 << 40},
                     "allowPinned": True}})
        await waiting.until(lambda: bindings.get("team-a", "grant") is not None, what="binding")
        await world.prefetch(targets=None, retention={"pinned": True})  # every node: of "large"
        await world.settle()
        await controller.reconcile_status(("team-a", "warm"))
        status = (await world.registry.modelprefetches.get("team-a", "warm"))["status"]
        assert status["desiredNodes"] == 1
        await held.reconcile_pins("node-2")
        await held.reconcile_pins("node-1")
        assert (await world.registry.nodemodelstores.get("", "node-1"))["spec"]["pinned"] == [
            DIGEST]
        assert "pinned" not in (await world.registry.nodemodelstores.get("", "node-2"))["spec"]

        await world.registry.modelstorebindings.delete("team-a", "grant")
        await waiting.until(lambda: bindings.get("team-a", "grant") is None, what="deleted")
        await world.settle()
        await controller.reconcile_status(("team-a", "warm"))
        status = (await world.registry.modelprefetches.get("team-a", "warm"))["status"]
        assert _condition(status, "Available") == ("False", "BindingNotFound")
        assert status["desiredNodes"] == 0
        await held.reconcile_pins("node-1")
        assert "pinned" not in (await world.registry.nodemodelstores.get("", "node-1"))["spec"]
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
