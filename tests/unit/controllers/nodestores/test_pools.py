"""The pool layer: the winning ModelStore merged into each node's NodeModelStore spec field by
field over the cluster settings (``spec.store`` naming it), ``SelectorOverlap`` on every store
sharing a node with another and the alphabetical tie-break, and the node plugin reading the
merged spec as its own configuration. Over the real registry and the in-process client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apiserver.auth import user as users
from apiserver.registry import build
from apiserver.wiring import inprocess
from controllers.nodestores import controller as nodestores
from controllers.nodestores import nodes, pools, storestatus
from controllers.nodestores import settings as storesettings
from controllers.runtime import client as clients
from controllers.runtime import informer
from devkit import clock as manual
from hub import config as hub_config
from nodeplugin.nodestore import spec as pluginspec
from openapi import keys, resources
from tests.support import waiting

WORKER = "system:serviceaccount:gpustack-system:model-manager-worker"
BASE = storesettings.base_of(hub_config.HubConfig(huggingface_endpoint="http://127.0.0.1:9"))
CLUSTER = storesettings.StoreSettings(
    high_percent=80, low_percent=70, concurrency=8, bytes_per_second=100 << 20,
    huggingface_endpoint="http://127.0.0.1:9")


class Labels:
    def __init__(self, table: dict[str, dict[str, str]]) -> None:
        self.table = table

    def labels(self, node: str) -> dict[str, str]:
        return self.table.get(node, {})


def store(name: str, selector: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": resources.GROUP_VERSION, "kind": "ModelStore",
            "metadata": {"name": name}, "spec": {"nodeSelector": selector, **spec}}


class Rig:
    def __init__(self, registry: build.Registry, labels: Labels) -> None:
        self.registry = registry
        self.clock = manual.ManualClock()
        self.api = inprocess.RegistryClient(registry, user=users.UserInfo(WORKER),
                                            worker_username=WORKER)
        self.node_stores = informer.Informer(self.api, clients.NODE_MODEL_STORES, self.clock)
        self.stores = informer.Informer(self.api, clients.MODEL_STORES, self.clock)
        self.pools = pools.Pools(self.stores, labels)
        self.controller = nodestores.NodeStores(
            self.api, self.node_stores, nodes.StaticNodes(["gpu-1", "gpu-2", "cpu-1"]),
            nodestores.FixedSettings(CLUSTER), self.clock, pools=self.pools)
        self.status = storestatus.StoreStatus(self.api, self.pools, self.node_stores,
                                              self.clock)

    async def spec(self, node: str) -> dict[str, Any]:
        await self.controller.reconcile(node)
        found = await self.registry.nodemodelstores.get("", node)
        return dict(found["spec"])

    async def add(self, obj: dict[str, Any]) -> None:
        await self.registry.modelstores.create(obj)
        await waiting.until(lambda: self.stores.get("", obj["metadata"]["name"]) is not None,
                            what="the store informer")


@pytest.fixture
async def rig(registry: build.Registry) -> AsyncIterator[Rig]:
    labels = Labels({"gpu-1": {"pool": "large", "gpu": "h100"},
                     "gpu-2": {"pool": "large"}, "cpu-1": {"pool": "small"}})
    made = Rig(registry, labels)
    tasks = [asyncio.create_task(made.node_stores.run()), asyncio.create_task(made.stores.run())]
    try:
        await made.node_stores.synced.wait()
        await made.stores.synced.wait()
        yield made
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_the_pool_merges_field_by_field_over_the_cluster(rig: Rig) -> None:
    # no store: the cluster settings alone, no spec.store
    alone = await rig.spec("gpu-1")
    assert "store" not in alone
    assert alone["watermarks"] == {"highPercent": 80, "lowPercent": 70}
    assert alone["download"] == {"concurrency": 8, "bytesPerSecond": 100 << 20}

    await rig.add(store("large-disk", {"pool": "large"}, watermarks={"highPercent": 92},
                        download={"bytesPerSecond": 0}))
    merged = await rig.spec("gpu-1")
    assert merged["store"] == "large-disk"
    # stated fields override, left-out fields keep the cluster's, explicit 0 is unlimited
    assert merged["watermarks"] == {"highPercent": 92, "lowPercent": 70}
    assert merged["download"] == {"concurrency": 8, "bytesPerSecond": 0}
    assert merged["hub"] == alone["hub"]
    assert (await rig.spec("gpu-2"))["store"] == "large-disk"
    # a node the selector does not match keeps the cluster settings
    other = await rig.spec("cpu-1")
    assert "store" not in other and other["download"]["bytesPerSecond"] == 100 << 20

    # the node plugin applies the merged spec as its configuration
    found = await rig.registry.nodemodelstores.get("", "gpu-1")
    applied = pluginspec.parse(found)
    assert (applied.high_percent, applied.low_percent) == (92, 70)
    assert applied.bytes_per_second == 0 and applied.concurrency == 8


async def test_pins_survive_the_merge_and_a_deleted_store_gives_the_cluster_back(
        rig: Rig) -> None:
    await rig.spec("gpu-1")
    current = await rig.registry.nodemodelstores.get("", "gpu-1")
    current["spec"]["pinned"] = ["sha256:" + "a" * 64]
    await rig.registry.nodemodelstores.update(current)
    await rig.add(store("large-disk", {"pool": "large"}, download={"concurrency": 2}))
    await waiting.until(lambda: (rig.node_stores.get("", "gpu-1") or {}).get(
        "spec", {}).get("pinned"), what="the pin in the informer")
    merged = await rig.spec("gpu-1")
    assert merged["pinned"] == ["sha256:" + "a" * 64]
    assert merged["download"]["concurrency"] == 2
    await rig.registry.modelstores.delete("", "large-disk")
    await waiting.until(lambda: rig.stores.get("", "large-disk") is None, what="deleted")
    back = await rig.spec("gpu-1")
    assert "store" not in back and back["download"]["concurrency"] == 8
    assert back["pinned"] == ["sha256:" + "a" * 64]


async def test_a_watermark_that_does_not_fit_keeps_the_cluster_pair(rig: Rig) -> None:
    await rig.add(store("tight", {"pool": "large"}, watermarks={"highPercent": 60}))
    merged = await rig.spec("gpu-1")
    # 60 over the cluster's low 70 would be out of order: the cluster's pair stays
    assert merged["watermarks"] == {"highPercent": 80, "lowPercent": 70}
    assert merged["store"] == "tight"
    pluginspec.parse(await rig.registry.nodemodelstores.get("", "gpu-1"))  # never refused


async def test_overlap_reports_on_both_and_the_first_name_wins(rig: Rig) -> None:
    for node in ("gpu-1", "gpu-2", "cpu-1"):
        await rig.spec(node)
    await waiting.until(lambda: len(rig.node_stores.items()) == 3, what="node stores")
    await rig.add(store("b-large", {"pool": "large"}, download={"concurrency": 3}))
    await rig.add(store("a-h100", {"gpu": "h100"}, download={"concurrency": 5}))
    await rig.add(store("c-small", {"pool": "small"}))
    assert (await rig.spec("gpu-1"))["store"] == "a-h100"  # both match: a- sorts first
    assert (await rig.spec("gpu-1"))["download"]["concurrency"] == 5
    assert (await rig.spec("gpu-2"))["store"] == "b-large"

    for name in ("a-h100", "b-large", "c-small"):
        await rig.status.reconcile(name)

    async def status(name: str) -> dict[str, Any]:
        return dict((await rig.registry.modelstores.get("", name))["status"])

    first, second, alone = await status("a-h100"), await status("b-large"), await status(
        "c-small")
    (overlap,) = first["conditions"]
    assert (overlap["type"], overlap["status"], overlap["reason"]) == (
        "SelectorOverlap", "True", "Overlaps")
    assert "b-large" in overlap["message"] and "this store wins" in overlap["message"]
    (overlap,) = second["conditions"]
    assert overlap["status"] == "True" and "a-h100 wins them" in overlap["message"]
    assert "gpu-1" not in overlap["message"]  # stores, never nodes
    assert alone["conditions"][0]["status"] == "False"
    assert (first["nodes"], second["nodes"], alone["nodes"]) == (1, 1, 1)


def test_standalone_nodes_carry_their_hostname_label() -> None:
    found = pools.HostnameOnly().labels("node-1")
    assert found == {keys.HOSTNAME: "node-1"}
    assert pools.matches({keys.HOSTNAME: "node-1"}, found)
    assert not pools.matches({keys.HOSTNAME: "node-2"}, found)
    assert pools.matches({}, found) and not pools.matches(None, found)


async def test_the_pool_switches_reach_its_nodes_specs_while_in_force(rig: Rig) -> None:
    digest = "sha256:" + "e" * 64
    switches = {"pauseCollection": True, "rehashRequest": "after-rollback",
                "evictDigests": [digest]}
    await rig.add(store("large-disk", {"pool": "large"}, operations=switches))
    assert (await rig.spec("gpu-1"))["operations"] == switches
    assert "operations" not in await rig.spec("cpu-1")  # not the pool's: not in force there
    applied = pluginspec.parse(await rig.registry.nodemodelstores.get("", "gpu-1"))
    assert applied.pause_collection and applied.rehash_request == "after-rollback"
    assert applied.force_evict == {digest} and applied.store == "large-disk"
    found = await rig.registry.modelstores.get("", "large-disk")
    found["spec"].pop("operations")
    await rig.registry.modelstores.update(found)
    await waiting.until(lambda: "operations" not in (rig.stores.get("", "large-disk") or {})
                        .get("spec", {}), what="the switches lifted")
    assert "operations" not in await rig.spec("gpu-1")  # lifted: gone from the node's spec
