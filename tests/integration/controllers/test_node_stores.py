"""The node stores controller in the API server's hooks (``apiserver.wiring.embedded``) over a real
registry, the cluster's CSINodes, Nodes, kubelet configz and settings ConfigMap from the fixture
control plane, on a manual clock: a NodeModelStore per node whose CSINode lists the driver, with
an ownerReference and its spec; settings reach every spec within a minute and a failing one is
reported, not applied; a deleted object comes back; a driver leaving CSINode for a moment takes
nothing away, the CSIDriver object going takes every store; configz read, and when it cannot
be."""

from __future__ import annotations

import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

import kube
from apiserver.flags import config
from apiserver.registry import build
from apiserver.storage import sqlite
from apiserver.wiring import embedded
from controllers import config as controller_settings
from controllers.nodestores import controller as nodestores
from devkit import admitting
from devkit import clock as manual
from devkit.controlplane import ControlPlane, Rule, UserInfo, resources
from hub import config as hub_config
from openapi import volume
from tests.support import waiting

WORKER = "system:serviceaccount:gpustack-system:model-manager-worker"
NAMESPACE = "gpustack-system"
SETTINGS = "model-manager-settings"
HUB = "https://hf-mirror.example"


class World:
    def __init__(self, cp: ControlPlane, registry: build.Registry, hooks: embedded.Hooks,
                 clock: manual.ManualClock) -> None:
        self.cp = cp
        self.registry = registry
        self.hooks = hooks
        self.clock = clock

    async def store(self, name: str) -> dict[str, Any] | None:
        try:
            return await self.registry.nodemodelstores.get("", name)
        except Exception:
            return None

    async def spec(self, name: str) -> dict[str, Any] | None:
        found = await self.store(name)
        return (found or {}).get("spec")

    def node(self, name: str, *, driver: bool = True) -> None:
        if self.cp.get(resources.NODES, name) is None:
            self.cp.seed(resources.NODES, {"metadata": {"name": name}})
        drivers = [{"name": "other.csi.example", "nodeID": name}]
        if driver:
            drivers.append({"name": volume.DRIVER, "nodeID": name})
        self.cp.put(resources.CSINODES, {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                                         "metadata": {"name": name}, "spec": {"drivers": drivers}})

    def settings(self, data: dict[str, str]) -> None:
        self.cp.put(resources.CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                           "metadata": {"name": SETTINGS, "namespace": NAMESPACE},
                                           "data": data})

    @property
    def stores(self) -> nodestores.NodeStores:
        found = self.hooks.controllers.controllers["nodestores"]
        assert isinstance(found, nodestores.NodeStores)
        return found


@pytest.fixture
async def world(tmp_path: pathlib.Path, request: pytest.FixtureRequest) -> AsyncIterator[World]:
    """``request.param`` (indirect): CSINodes there before the controller first lists them."""
    store = sqlite.Store(tmp_path / "store.db")
    await store.start()
    clock = manual.ManualClock()
    with ControlPlane(tmp_path / "cp", namespaces=(NAMESPACE,)) as cp:
        for csinode in getattr(request, "param", ()):
            cp.seed(resources.NODES, {"metadata": {"name": csinode["metadata"]["name"]}})
            cp.seed(resources.CSINODES, csinode)
        cp.add_token("worker-token", UserInfo(WORKER, uid="w"))
        cp.policy.grant(WORKER, [
            Rule(("get", "list", "watch"), ("",),
                 ("secrets", "persistentvolumeclaims", "configmaps", "pods", "nodes")),
            Rule(("get", "list", "watch"), ("storage.k8s.io",), ("csinodes", "csidrivers")),
            Rule(("list", "watch"), ("apps",), ("daemonsets",)),  # warm-up Pods' tolerations
            Rule(("get",), ("",), ("nodes/proxy",)),
            Rule(("create",), ("",), ("events",)),
        ])  # fmt: skip
        kubeconfig = cp.write_kubeconfig(tmp_path / "worker.kubeconfig", token="worker-token")
        registry = build.build(store, admission=admitting.standalone())
        settings = config.Settings(
            data_dir=tmp_path, tls_cert_file=tmp_path / "c", tls_private_key_file=tmp_path / "k",
            token_auth_file=tmp_path / "t", worker_username=WORKER,
            controller_settings=controller_settings.Settings(
                hub=hub_config.HubConfig(huggingface_endpoint=HUB), namespace=NAMESPACE))
        client = kube.Client.from_kubeconfig(kubeconfig)
        hooks = embedded.build_hooks(settings, registry, cluster_client=client, clock=clock)
        for start in hooks.start:
            await start()
        try:
            yield World(cp, registry, hooks, clock)
        finally:
            for stop in reversed(hooks.stop):
                await stop()
            await client.aclose()
            await store.close()


async def test_a_node_whose_csinode_lists_the_driver_gets_its_store(world: World) -> None:
    world.cp.set_configz("node-a", {"evictionHard": {"nodefs.available": "15%",
                                                      "imagefs.available": "20Gi"},
                                    "imageGCHighThresholdPercent": 80})
    world.node("node-a")
    world.node("node-x", driver=False)  # no plugin there: no store
    await waiting.until(lambda: world.stores.created >= 1, what="the store created")
    found = await world.store("node-a")
    assert found is not None
    node = world.cp.get(resources.NODES, "node-a")
    assert node is not None
    assert found["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": node["metadata"]["uid"]}]
    spec = found["spec"]
    assert spec["watermarks"] == {"highPercent": 80, "lowPercent": 70}
    assert spec["download"] == {"concurrency": 8, "bytesPerSecond": 0}
    assert spec["hub"]["huggingFaceEndpoint"] == HUB  # the server's own hub settings
    assert spec["kubelet"] == {"nodefsAvailable": "15%", "imagefsAvailable": "20Gi",
                               "imageGCHighThresholdPercent": 80}
    assert await world.store("node-x") is None
    configz = world.cp.recorder.requests("/nodes/node-a/proxy/configz", "GET")
    assert len(configz) == 1


SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "data" / "kube-samples"
DRIVERLESS = json.loads((SAMPLES / "csinode-no-drivers.json").read_text())
WITH_DRIVER = {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
               "metadata": {"name": "node-a"},
               "spec": {"drivers": [{"name": volume.DRIVER, "nodeID": "node-a"}]}}


@pytest.mark.parametrize("world", [[DRIVERLESS, WITH_DRIVER]], indirect=True)
async def test_a_csinode_before_any_driver_does_not_hide_the_others(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 25: kubelet's CSINode before any driver registers, as kube-apiserver serves it
    (``"drivers": null``, recorded), listed beside one with the driver: the list decodes and
    the driver's node gets its store."""
    assert DRIVERLESS["spec"] == {"drivers": None}
    await waiting.until(lambda: world.stores.created >= 1, what="the store created")
    assert await world.store("node-a") is not None
    assert await world.store(DRIVERLESS["metadata"]["name"]) is None
    # Decoded, not skipped: neither the informer nor the decoder complained.
    assert not [r for r in caplog.records if r.name == "kube.decoding"
                or "csinodes informer" in r.getMessage()]


async def test_settings_reach_every_spec_within_a_minute_and_failures_are_reported(
    world: World,
) -> None:
    for name in ("node-a", "node-b"):
        world.node(name)
    await waiting.until(lambda: world.stores.created == 2, what="both stores")
    world.settings({"model-store-high-watermark": "60", "model-store-low-watermark": "40",
                    "model-store-download-concurrency": "4",
                    "model-store-download-bandwidth": "200Mi",
                    "model-artifact-ca-bundle": "hub-ca"})
    world.clock.advance(60)
    for name in ("node-a", "node-b"):
        await waiting.until_async(lambda n=name: _marks(world, n), (60, 40, 4, 200 << 20))  # type: ignore[misc]
        assert ((await world.spec(name)) or {})["hub"]["caBundleConfigMap"] == "hub-ca"
    generation = ((await world.store("node-a")) or {})["metadata"]["generation"]
    # A failing value is not applied (the setting keeps its last good value) and is reported.
    world.settings({"model-store-high-watermark": "99", "model-store-low-watermark": "40",
                    "model-store-download-concurrency": "4",
                    "model-store-download-bandwidth": "lots"})
    await waiting.until(lambda: len(_warnings(world)) >= 2, what="an Event per setting")
    world.clock.advance(60)
    await waiting.until_async(lambda: _marks(world, "node-a"), (60, 40, 4, 200 << 20))
    reasons = {e["reason"] for e in _warnings(world)}
    messages = " ".join(e["message"] for e in _warnings(world))
    assert reasons == {"InvalidSetting"}
    assert "model-store-high-watermark: 99 must be from 2 to 95" in messages
    assert "model-store-download-bandwidth" in messages
    # The CA bundle key went away: back to none. Nothing else changed.
    await waiting.until_async(lambda: _ca(world, "node-a"), "")
    found = await world.store("node-a")
    assert found is not None and found["metadata"]["generation"] == generation + 1


async def _marks(world: World, name: str) -> tuple[int, int, int, int] | None:
    spec = await world.spec(name)
    if spec is None:
        return None
    return (spec["watermarks"]["highPercent"], spec["watermarks"]["lowPercent"],
            spec["download"]["concurrency"], spec["download"]["bytesPerSecond"])


async def _ca(world: World, name: str) -> object:
    return ((await world.spec(name)) or {}).get("hub", {}).get("caBundleConfigMap")


def _warnings(world: World) -> list[dict[str, Any]]:
    events = world.cp.store.list(resources.EVENTS, NAMESPACE, lambda e: True)[0]
    return [e for e in events if e["type"] == "Warning"
            and e["involvedObject"]["kind"] == "ConfigMap"]


async def test_a_deleted_store_comes_back_and_a_driver_leaving_takes_nothing(
    world: World,
) -> None:
    world.node("node-a")
    await waiting.until(lambda: world.stores.created == 1, what="the store")
    first = await world.store("node-a")
    assert first is not None
    await world.registry.nodemodelstores.delete("", "node-a")
    await waiting.until(lambda: world.stores.created == 2, what="the store recreated")
    again = await world.store("node-a")
    assert again is not None and again["metadata"]["uid"] != first["metadata"]["uid"]
    # The plugin restarts: its driver leaves CSINode for a moment, then comes back.
    world.node("node-a", driver=False)
    await waiting.until(lambda: "node-a" not in world.stores.plugin_nodes(),
                        what="the driver gone, as the controller sees it")
    world.clock.advance(60)
    await waiting.until(lambda: world.stores.controller.reconciled >= 4, what="a pass")
    kept = await world.store("node-a")
    assert kept is not None and kept["metadata"]["uid"] == again["metadata"]["uid"]
    # While the plugin is gone from there, a deleted store stays deleted.
    await world.registry.nodemodelstores.delete("", "node-a")
    world.clock.advance(60)
    reconciled = world.stores.controller.reconciled
    await waiting.until(lambda: world.stores.controller.reconciled > reconciled, what="a pass")
    assert await world.store("node-a") is None
    world.node("node-a")
    await waiting.until(lambda: world.stores.created == 3, what="back with the plugin")


async def test_every_store_goes_with_the_csidriver_and_comes_back_with_it(world: World) -> None:
    world.node("node-a")
    world.node("node-b")
    await waiting.until(lambda: world.stores.created == 2, what="both stores")
    driver = world.cp.get(resources.CSIDRIVERS, volume.DRIVER)
    assert driver is not None  # the fixture cluster has the chart's CSIDriver
    world.cp.store.delete(resources.CSIDRIVERS, "", volume.DRIVER)
    await waiting.until(lambda: world.stores.deleted == 2, what="every store deleted")
    assert await world.store("node-a") is None and await world.store("node-b") is None
    world.clock.advance(60)  # a pass later: none created while the driver is gone
    reconciled = world.stores.controller.reconciled
    await waiting.until(lambda: world.stores.controller.reconciled > reconciled, what="a pass")
    assert await world.store("node-a") is None
    world.cp.seed(resources.CSIDRIVERS, {"metadata": {"name": volume.DRIVER}, "spec": {}})
    await waiting.until(lambda: world.stores.created == 4, what="back with the driver")


async def test_an_unreadable_configz_keeps_the_last_reading(world: World) -> None:
    world.cp.set_configz_error("node-b")
    world.node("node-b")
    await waiting.until(lambda: world.stores.created == 1, what="the store")
    assert "kubelet" not in ((await world.spec("node-b")) or {})  # never read: none
    world.cp.set_configz("node-b", {"evictionHard": {"nodefs.available": "10%"},
                                    "imageGCHighThresholdPercent": 85})
    world.clock.advance(nodestores.KUBELET_SECONDS)
    await waiting.until_async(lambda: _kubelet(world, "node-b"), {
        "nodefsAvailable": "10%", "imagefsAvailable": "", "imageGCHighThresholdPercent": 85})
    reads = len(world.cp.recorder.requests("/nodes/node-b/proxy/configz", "GET"))
    world.cp.set_configz_error("node-b")
    world.clock.advance(nodestores.KUBELET_SECONDS)
    await waiting.until(lambda: len(world.cp.recorder.requests(
        "/nodes/node-b/proxy/configz", "GET")) > reads, what="a read that fails")
    world.clock.advance(60)
    assert await _kubelet(world, "node-b") == {
        "nodefsAvailable": "10%", "imagefsAvailable": "", "imageGCHighThresholdPercent": 85}
    # Between readings, a minute's pass reads nothing.
    before = len(world.cp.recorder.requests("/nodes/node-b/proxy/configz", "GET"))
    world.clock.advance(60)
    world.clock.advance(60)
    assert len(world.cp.recorder.requests("/nodes/node-b/proxy/configz", "GET")) == before


async def _kubelet(world: World, name: str) -> object:
    return ((await world.spec(name)) or {}).get("kubelet")
