"""ModelArtifactProgress computed from the artifact and the NodeModelStores listing its digest."""

from __future__ import annotations

from typing import Any

from apiserver.registry import build, progress
from tests.unit.apiserver.registry.conftest import artifact

DIGEST = "sha256:" + "ab" * 32


def _resolved() -> dict[str, Any]:
    body = artifact()
    body["metadata"]["namespace"] = "a"
    body["status"] = {"resolved": {"manifestDigest": DIGEST, "sizeBytes": 1000}}
    return body


def _store(*models: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "node-x"}, "status": {"models": list(models)}}


def test_counts_mean_and_failure_reasons() -> None:
    stores = [
        _store({"digest": DIGEST, "state": "Ready", "sizeBytes": 1000, "downloadedBytes": 1000}),
        _store({"digest": DIGEST, "state": "Downloading", "sizeBytes": 1000,
                "downloadedBytes": 250}),
        _store({"digest": DIGEST, "state": "Downloading", "sizeBytes": 1000,
                "downloadedBytes": 500},
               {"digest": "sha256:" + "cd" * 32, "state": "Failed", "reason": "Other"}),
        _store({"digest": DIGEST, "state": "Failed", "reason": "SourceUnavailable"}),
        _store({"digest": DIGEST, "state": "Failed", "reason": "SourceUnavailable"}),
        _store({"digest": DIGEST, "state": "Failed", "reason": "AccessDenied"}),
        {"metadata": {"name": "empty"}},
    ]
    body = progress.compute(_resolved(), stores)
    assert body["kind"] == "ModelArtifactProgress"
    assert body["metadata"] == {"name": "qwen", "namespace": "a"}
    assert (body["ready"], body["downloading"], body["failed"]) == (1, 2, 3)
    assert body["downloadingPercent"] == 37  # mean of 25 and 50, whole percent
    assert body["downloadingBytes"] == 750
    assert body["live"] == 0 and body["sizeBytes"] == 1000 and body["manifestDigest"] == DIGEST
    assert body["failureReasons"] == [{"reason": "SourceUnavailable", "count": 2},
                                      {"reason": "AccessDenied", "count": 1}]
    assert "reason" not in body
    assert "node" not in str(body).lower()


def test_percent_absent_when_nothing_downloads() -> None:
    body = progress.compute(_resolved(), [_store({"digest": DIGEST, "state": "Ready"})])
    assert "downloadingPercent" not in body and body["ready"] == 1


def test_reasons_when_there_is_nothing_to_count() -> None:
    unresolved = artifact()
    assert progress.compute(unresolved, [])["reason"] == progress.NOT_RESOLVED
    claim = artifact()
    claim["spec"] = {"source": {"persistentVolumeClaim": {"claimName": "c"}}}
    assert progress.compute(claim, [])["reason"] == progress.CLAIM
    image = artifact()
    image["spec"] = {"source": {"image": {"reference": "r@sha256:" + "0" * 64}}}
    body = progress.compute(image, [])
    assert body["reason"] == progress.IMAGE and body["ready"] == 0


async def test_read_uses_the_stored_node_stores(registry: build.Registry) -> None:
    created = await registry.modelartifacts.create(artifact(), namespace="a")
    created["status"] = {"resolved": {"manifestDigest": DIGEST, "sizeBytes": 10}}
    await registry.modelartifacts.update_status(created, namespace="a", name="qwen")
    node = await registry.nodemodelstores.create({"metadata": {"name": "node-1"}, "spec": {}})
    node["status"] = {"models": [{"digest": DIGEST, "state": "Ready", "sizeBytes": 10,
                                  "downloadedBytes": 10}]}
    await registry.nodemodelstores.update_status(node, name="node-1")
    body = await registry.progress("a", "qwen")
    assert body["ready"] == 1
