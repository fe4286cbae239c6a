"""ModelArtifactProgress: computed per request from the artifact and the NodeModelStores listing its
digest; never stored and never names a node."""

from __future__ import annotations

from typing import Any

from apiserver.registry import meta, store
from openapi import resources

Obj = dict[str, Any]

NOT_RESOLVED = ("The artifact is not resolved yet, so there is no content to count; progress"
                " appears once its manifest digest is known.")
CLAIM = ("The artifact's files come from its PersistentVolumeClaim, mounted from the volume and"
         " never downloaded, so there is nothing to count.")
IMAGE = ("The artifact's files come from an image that the container runtime pulls, so no node"
         " downloads it through the model store and there is nothing to count.")


def _empty(artifact: Obj, reason: str) -> Obj:
    body = _head(artifact)
    body.update({"ready": 0, "downloading": 0, "failed": 0, "downloadingBytes": 0, "live": 0,
                 "failureReasons": [], "reason": reason})
    return body


def _head(artifact: Obj) -> Obj:
    metadata = artifact["metadata"]
    return {
        "kind": resources.MODEL_ARTIFACT_PROGRESS.kind,
        "apiVersion": resources.MODEL_ARTIFACT_PROGRESS.group_version,
        "metadata": {"name": metadata["name"], "namespace": metadata.get("namespace", "")},
        "timestamp": meta.now(),
    }


def compute(artifact: Obj, node_stores: list[Obj]) -> Obj:
    """The progress view of ``artifact`` given every NodeModelStore."""
    source = (artifact.get("spec") or {}).get("source") or {}
    if "persistentVolumeClaim" in source:
        return _empty(artifact, CLAIM)
    if "image" in source:
        return _empty(artifact, IMAGE)
    resolved = (artifact.get("status") or {}).get("resolved") or {}
    digest = resolved.get("manifestDigest")
    if not digest:
        return _empty(artifact, NOT_RESOLVED)
    ready = failed = 0
    percents: list[int] = []
    downloading_bytes = 0
    reasons: dict[str, int] = {}
    for node_store in node_stores:
        for entry in (node_store.get("status") or {}).get("models") or []:
            if entry.get("digest") != digest:
                continue
            state = entry.get("state")
            if state == "Ready":
                ready += 1
            elif state == "Downloading":
                have = int(entry.get("downloadedBytes") or 0)
                size = int(entry.get("sizeBytes") or resolved.get("sizeBytes") or 0)
                downloading_bytes += have
                percents.append(min(100, have * 100 // size) if size > 0 else 0)
            elif state == "Failed":
                failed += 1
                reason = entry.get("reason") or "Unknown"
                reasons[reason] = reasons.get(reason, 0) + 1
    body = _head(artifact)
    body["manifestDigest"] = digest
    if "sizeBytes" in resolved:
        body["sizeBytes"] = resolved["sizeBytes"]
    body.update({"ready": ready, "downloading": len(percents), "failed": failed})
    if percents:
        body["downloadingPercent"] = sum(percents) // len(percents)
    body["downloadingBytes"] = downloading_bytes
    body["live"] = 0
    body["failureReasons"] = [
        {"reason": reason, "count": count}
        for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0]))
    ]
    return body


async def read(artifacts: store.ResourceStore, node_stores: store.ResourceStore,
               namespace: str, name: str) -> Obj:
    artifact = await artifacts.get(namespace, name)
    listed = await node_stores.list()
    return compute(artifact, listed.items())
