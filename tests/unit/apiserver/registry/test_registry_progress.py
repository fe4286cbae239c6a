"""``GET .../progress`` through the registry: the artifact from storage, the counts from the
view plugged into the registry (the NodeModelStore index kept off the watch)."""

from __future__ import annotations

import pytest

from apiserver import errors
from apiserver.registry import build
from controllers.nodeview import view as views
from tests.support import waiting
from tests.unit.apiserver.registry.conftest import artifact

DIGEST = "sha256:" + "ab" * 32


async def test_read_uses_the_indexed_node_stores(registry: build.Registry,
                                                 progress_view: views.NodeView) -> None:
    created = await registry.modelartifacts.create(artifact(), namespace="a")
    created["status"] = {"resolved": {"manifestDigest": DIGEST, "sizeBytes": 10}}
    await registry.modelartifacts.update_status(created, namespace="a", name="qwen")
    node = await registry.nodemodelstores.create({"metadata": {"name": "node-1"}, "spec": {}})
    node["status"] = {"models": [{"digest": DIGEST, "state": "Ready", "sizeBytes": 10,
                                  "downloadedBytes": 10}]}
    await registry.nodemodelstores.update_status(node, name="node-1")
    await waiting.until(lambda: progress_view.index.holders(DIGEST), what="index update")
    body = await registry.progress("a", "qwen")
    assert body["ready"] == 1 and body["manifestDigest"] == DIGEST
    assert "node-1" not in str(body)


async def test_without_a_view_progress_is_unavailable(registry: build.Registry) -> None:
    await registry.modelartifacts.create(artifact(), namespace="a")
    with pytest.raises(errors.ServiceUnavailable):
        await registry.progress("a", "qwen")
    with pytest.raises(errors.NotFound):
        await registry.progress("a", "nope")
