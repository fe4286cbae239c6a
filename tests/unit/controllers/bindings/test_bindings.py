"""The bindings controller over the real registry and the in-process client: usedBytes and
OverQuota (False, True, Unknown while unresolved) on the binding's status."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apiserver.auth import user as users
from apiserver.registry import build
from apiserver.wiring import inprocess
from controllers.bindings import controller as bindings
from controllers.nodeview import index as nodeindex
from controllers.runtime import client as clients
from controllers.runtime import informer
from devkit import clock as manual
from openapi import resources
from tests.support import waiting

WORKER = "system:serviceaccount:gpustack-system:model-manager-worker"
DIGEST = "sha256:" + "ab" * 32
GROUP_VERSION = resources.GROUP_VERSION


class Rig:
    def __init__(self, registry: build.Registry) -> None:
        self.registry = registry
        self.clock = manual.ManualClock()
        self.api = inprocess.RegistryClient(registry, user=users.UserInfo(WORKER),
                                            worker_username=WORKER)
        self.informers = {resource: informer.Informer(self.api, resource, self.clock)
                          for resource in (clients.MODEL_STORE_BINDINGS, clients.MODEL_PREFETCHES,
                                           clients.MODEL_ARTIFACTS, clients.NODE_MODEL_STORES)}
        found = self.informers
        self.index = nodeindex.DigestIndex(found[clients.NODE_MODEL_STORES])
        self.controller = bindings.Bindings(
            self.api, found[clients.MODEL_STORE_BINDINGS], found[clients.MODEL_PREFETCHES],
            found[clients.MODEL_ARTIFACTS], found[clients.NODE_MODEL_STORES], self.index,
            self.clock)

    async def settle(self) -> None:
        for resource, each in self.informers.items():
            store = {clients.MODEL_STORE_BINDINGS: self.registry.modelstorebindings,
                     clients.MODEL_PREFETCHES: self.registry.modelprefetches,
                     clients.MODEL_ARTIFACTS: self.registry.modelartifacts,
                     clients.NODE_MODEL_STORES: self.registry.nodemodelstores}[resource]
            listed = (await store.list("")).items()
            versions = {clients.key_of(o): o["metadata"]["resourceVersion"] for o in listed}
            await waiting.until(lambda e=each, v=versions: {  # type: ignore[misc]
                clients.key_of(o): o["metadata"]["resourceVersion"] for o in e.items()} == v,
                what=resource.plural)

    async def status(self) -> dict[str, Any]:
        await self.settle()
        await self.controller.reconcile(("team-a", "grant"))
        found = await self.registry.modelstorebindings.get("team-a", "grant")
        return dict(found.get("status") or {})


@pytest.fixture
async def rig(registry: build.Registry) -> AsyncIterator[Rig]:
    made = Rig(registry)
    tasks = [asyncio.create_task(each.run()) for each in made.informers.values()]
    try:
        for each in made.informers.values():
            await each.synced.wait()
        yield made
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _over_quota(status: dict[str, Any]) -> tuple[str, str]:
    (found,) = status["conditions"]
    assert found["type"] == "OverQuota"
    return found["status"], found["reason"]


async def test_used_bytes_and_over_quota(rig: Rig) -> None:
    registry = rig.registry
    await registry.modelstorebindings.create({
        "apiVersion": GROUP_VERSION, "kind": "ModelStoreBinding",
        "metadata": {"name": "grant", "namespace": "team-a"},
        "spec": {"storeRefs": [{"name": "large"}], "quota": {"bytes": 150}}})
    status = await rig.status()
    assert status["usedBytes"] == 0 and _over_quota(status) == ("False", "WithinQuota")

    created = await registry.modelartifacts.create({
        "apiVersion": GROUP_VERSION, "kind": "ModelArtifact",
        "metadata": {"name": "qwen", "namespace": "team-a"},
        "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen3"}}}})
    await registry.modelprefetches.create({
        "apiVersion": GROUP_VERSION, "kind": "ModelPrefetch",
        "metadata": {"name": "warm", "namespace": "team-a"},
        "spec": {"artifactRef": {"name": "qwen"}, "bindingRef": {"name": "grant"}}})
    status = await rig.status()
    assert "usedBytes" not in status  # unresolved: not measured
    assert _over_quota(status) == ("Unknown", "UsageUnknown")

    await registry.modelartifacts.update_status(
        {**created, "status": {"resolved": {"manifestDigest": DIGEST, "sizeBytes": 100}}},
        namespace="team-a", name="qwen")
    for node, store in (("gpu-1", "large"), ("gpu-2", "large"), ("cpu-1", "small")):
        made = await registry.nodemodelstores.create({
            "apiVersion": GROUP_VERSION, "kind": "NodeModelStore", "metadata": {"name": node},
            "spec": {"store": store}})
        await registry.nodemodelstores.update_status(
            {**made, "status": {"models": [{"digest": DIGEST, "state": "Downloading",
                                            "sizeBytes": 100, "downloadedBytes": 1}]}},
            name=node)
    status = await rig.status()
    # full size on each of the two nodes of "large", whatever the state; cpu-1 is not counted
    assert status["usedBytes"] == 200
    assert _over_quota(status) == ("True", "QuotaExceeded")
    assert "200 bytes held past the budget of 150 bytes" in status["conditions"][0]["message"]
