"""The single source of truth holds every field of the served kinds (docs/api.md), with its
limits."""

from typing import Any

import pytest

from openapi import grammar
from openapi import schema as schemas


def at(kind: str, path: str) -> dict[str, Any]:
    """The schema at a dotted path; ``[]`` steps into list items."""
    node = schemas.resolve(schemas.for_kind(kind))
    for part in path.split("."):
        if part == "[]":
            node = schemas.resolve(node["items"])
        else:
            node = node["properties"][part]
            resolved = schemas.resolve(node)
            if resolved is not node and "type" in resolved and resolved["type"] != "object":
                node = {**resolved, **{k: v for k, v in node.items() if k != "allOf"}}
            else:
                node = resolved if "properties" in resolved or "$ref" in node else node
    return node


MODEL_ARTIFACT_FIELDS = [
    "spec.source.huggingFace.repository", "spec.source.huggingFace.revision",
    "spec.source.huggingFace.secretRef.name", "spec.source.modelScope.repository",
    "spec.source.modelScope.revision", "spec.source.modelScope.secretRef.name",
    "spec.source.persistentVolumeClaim.claimName", "spec.source.persistentVolumeClaim.path",
    "spec.source.image.reference", "spec.allowPatterns", "spec.ignorePatterns",
    "spec.expectedDigest", "status.observedGeneration", "status.resolved.revision",
    "status.resolved.manifestDigest", "status.resolved.digestSource", "status.resolved.fileCount",
    "status.resolved.sizeBytes", "status.resolved.resolvedTime",
    "status.resolved.lastValidatedTime", "status.nodes.ready", "status.nodes.downloading",
    "status.nodes.failed", "status.nodes.downloadingPercent", "status.conditions",
]
NODE_MODEL_STORE_FIELDS = [
    "spec.watermarks.highPercent", "spec.watermarks.lowPercent", "spec.download.concurrency",
    "spec.download.bytesPerSecond", "spec.hub.huggingFaceEndpoint", "spec.hub.modelScopeEndpoint",
    "spec.hub.httpsProxy", "spec.hub.noProxy", "spec.hub.caBundleConfigMap",
    "spec.kubelet.nodefsAvailable", "spec.kubelet.imagefsAvailable",
    "spec.kubelet.imageGCHighThresholdPercent", "spec.pinned", "status.observedGeneration",
    "status.capacity.totalBytes", "status.capacity.storedBytes", "status.capacity.usedPercent",
    "status.models.[].digest", "status.models.[].state", "status.models.[].sizeBytes",
    "status.models.[].downloadedBytes", "status.models.[].source", "status.models.[].referenced",
    "status.models.[].lastUsedTime", "status.models.[].reason", "status.models.[].message",
    "status.models.[].retryTime", "status.conditions",
]
PROGRESS_FIELDS = [
    "timestamp", "manifestDigest", "sizeBytes", "ready", "downloading", "failed",
    "downloadingPercent", "downloadingBytes", "live", "failureReasons.[].reason",
    "failureReasons.[].count", "reason",
]


@pytest.mark.parametrize(
    ("kind", "path"),
    [("ModelArtifact", p) for p in MODEL_ARTIFACT_FIELDS]
    + [("NodeModelStore", p) for p in NODE_MODEL_STORE_FIELDS]
    + [("ModelArtifactProgress", p) for p in PROGRESS_FIELDS],
)
def test_every_contract_field_is_described(kind: str, path: str) -> None:
    node = at(kind, path)
    assert node.get("description"), path
    assert node.get("type") or node.get("allOf") or node.get("$ref"), path


def test_limits_defaults_and_enums() -> None:
    high = at("NodeModelStore", "spec.watermarks.highPercent")
    assert (high["minimum"], high["maximum"], high["default"]) == (2, 95, 80)
    low = at("NodeModelStore", "spec.watermarks.lowPercent")
    assert (low["minimum"], low["maximum"], low["default"]) == (1, 94, 70)
    concurrency = at("NodeModelStore", "spec.download.concurrency")
    assert (concurrency["minimum"], concurrency["maximum"], concurrency["default"]) == (1, 64, 8)
    rate = at("NodeModelStore", "spec.download.bytesPerSecond")
    assert (rate["minimum"], rate["default"]) == (0, 0)
    assert at("NodeModelStore", "spec.pinned")["maxItems"] == 256
    assert at("NodeModelStore", "status.models")["maxItems"] == 256
    assert at("NodeModelStore", "status.models.[].state")["enum"] == [
        "Downloading", "Ready", "Failed"]
    assert at("NodeModelStore", "status.models.[].source")["enum"] == ["Hub", "Peer"]
    assert at("NodeModelStore", "status.capacity.usedPercent")["multipleOf"] == 5
    assert at("ModelArtifact", "status.nodes.downloadingPercent")["multipleOf"] == 5
    assert at("ModelArtifact", "spec.source.huggingFace.revision")["default"] == "main"
    assert at("ModelArtifact", "spec.source.modelScope.revision")["default"] == "master"
    patterns = at("ModelArtifact", "spec.allowPatterns")
    assert patterns["maxItems"] == 32
    assert (patterns["items"]["minLength"], patterns["items"]["maxLength"]) == (1, 256)
    assert at("ModelArtifact", "status.resolved.digestSource")["enum"] == ["Hub", "Expected"]
    assert at("ModelArtifact", "spec.expectedDigest")["pattern"] == grammar.DIGEST_PATTERN
    assert at("ModelArtifact", "spec")["required"] == ["source"]


def test_condition_types_per_kind() -> None:
    artifact = at("ModelArtifact", "status.conditions.[].type")
    store = at("NodeModelStore", "status.conditions.[].type")
    assert artifact["enum"] == ["Resolved", "Degraded"]
    assert store["enum"] == ["Ready", "CapacityLow"]


def test_resolve_follows_references_and_wrappers() -> None:
    metadata = schemas.for_kind("ModelArtifact")["properties"]["metadata"]
    assert "allOf" in metadata
    assert "managedFields" in schemas.resolve(metadata)["properties"]
    plain = {"type": "string"}
    assert schemas.resolve(plain) is plain
    with pytest.raises(KeyError):
        schemas.for_kind("Pod")


def test_shared_metadata_keeps_the_upstream_shape() -> None:
    object_meta = schemas.DEFINITIONS["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
    assert set(object_meta["properties"]) == {
        "annotations", "creationTimestamp", "deletionGracePeriodSeconds", "deletionTimestamp",
        "finalizers", "generateName", "generation", "labels", "managedFields", "name",
        "namespace", "ownerReferences", "resourceVersion", "selfLink", "uid"}
    owners = object_meta["properties"]["ownerReferences"]
    assert owners["x-kubernetes-list-map-keys"] == ["uid"]
    list_meta = schemas.DEFINITIONS["io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"]
    assert set(list_meta["properties"]) == {
        "continue", "remainingItemCount", "resourceVersion", "selfLink"}
    status = schemas.DEFINITIONS["io.k8s.apimachinery.pkg.apis.meta.v1.Status"]
    assert {"code", "details", "message", "reason", "status"} <= set(status["properties"])
    assert status["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "Status", "version": "v1"}]
