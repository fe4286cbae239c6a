"""The warm nodes the Pod webhook asks for, over the informers every API server runs: the
NodeModelStores through the digest index, where the plugin runs from the CSINodes (a cluster) or
the ``--node`` names (standalone)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from controllers.nodeview import index as nodeindex
from controllers.nodeview import warm
from controllers.runtime import client as clients
from controllers.runtime import informer
from devkit import clock as manual
from openapi import volume
from tests.unit.controllers.fakes import Listed

DIGEST = "sha256:" + "ab" * 32


def _store(node: str, *, ready: str = "True", state: str = "Ready") -> dict[str, Any]:
    return {"metadata": {"name": node, "resourceVersion": "1"}, "status": {
        "models": [{"digest": DIGEST, "state": state}],
        "conditions": [{"type": "Ready", "status": ready}]}}


def _csinode(node: str, *drivers: str) -> dict[str, Any]:
    return {"metadata": {"name": node, "resourceVersion": "1"},
            "spec": {"drivers": [{"name": d, "nodeID": node} for d in drivers]}}


@contextlib.asynccontextmanager
async def _running(*found: informer.Informer) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(each.run()) for each in found]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_in_a_cluster_the_csinodes_say_where_the_plugin_runs() -> None:
    api = Listed({
        "nodemodelstores": [_store("a"), _store("b"), _store("c", ready="False"),
                            _store("d", state="Downloading"), _store("e")],
        "csinodes": [_csinode("a", volume.DRIVER), _csinode("b", "other.csi.example.com"),
                     _csinode("c", volume.DRIVER), _csinode("d", volume.DRIVER)],
    })
    clock = manual.ManualClock()
    stores = informer.Informer(api, clients.NODE_MODEL_STORES, clock)
    csinodes = informer.Informer(api, clients.CSI_NODES, clock)
    nodes = warm.WarmNodes(nodeindex.DigestIndex(stores), stores, warm.CsiPluginNodes(csinodes))
    assert not await nodes.wait_synced(0.01)  # nothing read yet: the webhook admits unchanged
    async with _running(stores, csinodes):
        assert await nodes.wait_synced(10)
        # b: its CSINode lacks the driver; c: stale store; d: still downloading; e: no CSINode
        assert nodes.warm_nodes(DIGEST) == ["a"]
        assert nodes.warm_nodes("sha256:" + "00" * 32) == []


async def test_standalone_the_node_names_say_where_the_plugin_runs() -> None:
    api = Listed({"nodemodelstores": [_store("a"), _store("b")]})
    stores = informer.Informer(api, clients.NODE_MODEL_STORES, manual.ManualClock())
    nodes = warm.WarmNodes(nodeindex.DigestIndex(stores), stores, warm.StaticPluginNodes(["b"]))
    async with _running(stores):
        assert await nodes.wait_synced(10)
        assert nodes.warm_nodes(DIGEST) == ["b"]
