"""The node stores controller standalone (``--node``, over the real registry and the in-process
client), the settings it merges and what it takes from configz."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from apiserver.auth import user as users
from apiserver.registry import build
from apiserver.wiring import inprocess
from controllers.nodestores import controller as nodestores
from controllers.nodestores import nodes
from controllers.nodestores import settings as storesettings
from controllers.runtime import client as clients
from controllers.runtime import informer
from devkit import clock as manual
from hub import config as hub_config
from tests.support import waiting

WORKER = "system:serviceaccount:gpustack-system:model-manager-worker"
BASE = storesettings.base_of(hub_config.HubConfig(huggingface_endpoint="http://127.0.0.1:9"))


async def test_standalone_nodes_get_their_store_without_an_owner(
    registry: build.Registry,
) -> None:
    clock = manual.ManualClock()
    api = inprocess.RegistryClient(registry, user=users.UserInfo(WORKER),
                                   worker_username=WORKER)
    stores = informer.Informer(api, clients.NODE_MODEL_STORES, clock)
    controller = nodestores.NodeStores(api, stores, nodes.StaticNodes(["node-1"]),
                                       nodestores.FixedSettings(BASE), clock)
    watching = asyncio.create_task(stores.run())
    try:
        await stores.synced.wait()
        assert (await controller.reconcile("node-1")).requeue_after == 60
        found = await registry.nodemodelstores.get("", "node-1")
        assert "ownerReferences" not in found["metadata"]
        assert found["spec"]["hub"]["huggingFaceEndpoint"] == "http://127.0.0.1:9"
        assert "kubelet" not in found["spec"]  # nobody reads a standalone kubelet
        # A node --node does not name gets nothing.
        assert (await controller.reconcile("elsewhere")).requeue_after is None
        # A reconcile that changes nothing writes nothing.
        await waiting.until(lambda: stores.get("", "node-1") is not None, what="informer")
        version = found["metadata"]["resourceVersion"]
        await controller.reconcile("node-1")
        again = await registry.nodemodelstores.get("", "node-1")
        assert again["metadata"]["resourceVersion"] == version and controller.updated == 0
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)


def test_settings_merge_key_by_key() -> None:
    merged, problems = storesettings.merge({
        "model-store-high-watermark": "90", "model-store-low-watermark": "50",
        "model-store-download-concurrency": "16", "model-store-download-bandwidth": "1Gi",
        "model-artifact-https-proxy": "http://proxy:3128",
        "model-artifact-no-proxy": "10.0.0.0/8", "model-artifact-ca-bundle": "hub-ca",
        "model-store-peer-sync": "true",  # not the node store's
    }, BASE, BASE)
    assert problems == []
    assert merged.spec() == {
        "watermarks": {"highPercent": 90, "lowPercent": 50},
        "download": {"concurrency": 16, "bytesPerSecond": 1 << 30},
        "hub": {"huggingFaceEndpoint": "http://127.0.0.1:9",
                "modelScopeEndpoint": "https://www.modelscope.cn",
                "httpsProxy": "http://proxy:3128", "noProxy": "10.0.0.0/8",
                "caBundleConfigMap": "hub-ca"},
    }
    # Each failing value keeps the last good one; what is fine still applies.
    worse, problems = storesettings.merge({
        "model-store-high-watermark": "ninety", "model-store-low-watermark": "60",
        "model-store-download-concurrency": "65", "model-store-download-bandwidth": "-1",
        "model-artifact-huggingface-endpoint": "ftp://x", "model-artifact-ca-bundle": "Not_A_Name",
    }, BASE, merged)
    assert (worse.high_percent, worse.low_percent) == (90, 60)
    assert worse.concurrency == 16 and worse.bytes_per_second == 1 << 30
    assert worse.huggingface_endpoint == "http://127.0.0.1:9"
    assert worse.ca_bundle_configmap == "hub-ca"
    assert worse.https_proxy == "http://proxy:3128"  # kept with the failing endpoint
    assert len(problems) == 5
    assert any("model-artifact-huggingface-endpoint must be an absolute http(s) URL" in p
               for p in problems)
    assert any("model-store-high-watermark: 'ninety' is not an integer" in p for p in problems)
    assert any("model-store-download-concurrency: 65 must be from 1 to 64" in p for p in problems)
    crossed, problems = storesettings.merge({"model-store-high-watermark": "40"}, BASE, merged)
    assert (crossed.high_percent, crossed.low_percent) == (90, 50)
    assert problems == ["model-store-low-watermark: 70 must be below model-store-high-watermark "
                        "(40)"]
    # An empty ConfigMap is the base again.
    assert storesettings.merge({}, BASE, merged) == (BASE, [])


def test_kubelet_thresholds_from_configz() -> None:
    answer = {"kubeletconfig": {"evictionHard": {"nodefs.available": "10%",
                                                 "imagefs.available": "5Gi",
                                                 "memory.available": "100Mi"},
                                "imageGCHighThresholdPercent": 85}}
    assert nodes.kubelet_spec(answer) == {
        "nodefsAvailable": "10%", "imagefsAvailable": "5Gi", "imageGCHighThresholdPercent": 85}
    unset = nodes.kubelet_spec({"kubeletconfig": {}})
    assert unset == {"nodefsAvailable": "", "imagefsAvailable": ""}
    odd = nodes.kubelet_spec({"kubeletconfig": {
        "evictionHard": {"nodefs.available": "lots"}, "imageGCHighThresholdPercent": 150}})
    assert odd == {"imagefsAvailable": ""}  # what the plugin could not read is left out


class _Driver:
    """The CSIDriver's presence as an informer would tell it."""

    def __init__(self) -> None:
        self.state: bool | None = True
        self.handlers: list[Callable[[], None]] = []

    def present(self) -> bool | None:
        return self.state

    def add_handler(self, handler: Callable[[], None]) -> None:
        self.handlers.append(handler)

    async def run(self) -> None:
        return None


async def test_every_store_goes_when_the_csidriver_does_and_not_on_a_csinode_flap(
    registry: build.Registry,
) -> None:
    clock = manual.ManualClock()
    api = inprocess.RegistryClient(registry, user=users.UserInfo(WORKER),
                                   worker_username=WORKER)
    stores = informer.Informer(api, clients.NODE_MODEL_STORES, clock)
    driver = _Driver()
    plugin_nodes = nodes.StaticNodes(["node-1", "node-2"])
    controller = nodestores.NodeStores(api, stores, plugin_nodes,
                                       nodestores.FixedSettings(BASE), clock, driver=driver)
    watching = asyncio.create_task(stores.run())
    try:
        await stores.synced.wait()
        for node in ("node-1", "node-2"):
            await controller.reconcile(node)
        await waiting.until(lambda: len(stores.items()) == 2, what="both stores")
        # unknown (the informer has not listed): nothing is deleted
        driver.state = None
        await controller.reconcile("node-1")
        assert controller.deleted == 0
        # the CSIDriver is gone: every store is deleted, and none is created again
        driver.state = False
        for node in ("node-1", "node-2"):
            await controller.reconcile(node)
        assert controller.deleted == 2
        assert (await registry.nodemodelstores.list("")).items() == []
        await waiting.until(lambda: not stores.items(), what="the informer empty")
        await controller.reconcile("node-1")
        assert (await registry.nodemodelstores.list("")).items() == []
        # back: created again
        driver.state = True
        await controller.reconcile("node-1")
        assert [o["metadata"]["name"] for o in (await registry.nodemodelstores.list(""))
                .items()] == ["node-1"]
        assert len(driver.handlers) == 1  # a change of the driver re-checks every node
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
