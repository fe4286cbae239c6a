"""Schema-driven validation of spec and status, with the field path of every refusal."""

import copy
from typing import Any

import pytest

from openapi import nodestore, validation

DIGEST = "sha256:" + "0123456789abcdef" * 4


def store() -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "NodeModelStore",
        "metadata": {"name": "node-a"},
        "spec": {
            "watermarks": {"highPercent": 80, "lowPercent": 70},
            "download": {"concurrency": 8, "bytesPerSecond": 0},
            "hub": {"huggingFaceEndpoint": "https://huggingface.co", "httpsProxy": ""},
            "kubelet": {"nodefsAvailable": "10%", "imagefsAvailable": "",
                        "imageGCHighThresholdPercent": 85},
            "pinned": [DIGEST],
        },
        "status": {
            "observedGeneration": 3,
            "capacity": {"totalBytes": 1000, "storedBytes": 400, "usedPercent": 40},
            "models": [
                {"digest": DIGEST, "state": "Ready", "sizeBytes": 10, "referenced": True,
                 "lastUsedTime": "2026-09-25T06:00:00Z", "reason": "", "message": "",
                 "retryTime": None, "source": "Hub"},
                {"digest": "sha256:" + "f" * 64, "state": "Failed", "reason": "AccessDenied",
                 "retryTime": "2026-09-25T06:01:00Z"},
            ],
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "Serving",
                 "lastTransitionTime": "2026-09-25T06:00:00Z"},
                {"type": "CapacityLow", "status": "False", "reason": "WithinWatermarks"},
            ],
        },
    }


def artifact() -> dict[str, Any]:
    return {
        "metadata": {"name": "x", "namespace": "a"},
        "spec": {"source": {"huggingFace": {"repository": "a/b", "revision": "main"}},
                 "allowPatterns": ["*.json"], "expectedDigest": DIGEST},
        "status": {
            "observedGeneration": 1,
            "resolved": {"revision": "c" * 40, "manifestDigest": DIGEST, "digestSource": "Hub",
                         "fileCount": 3, "sizeBytes": 99, "resolvedTime": "2026-01-01T00:00:00Z"},
            "nodes": {"ready": 3, "downloading": 1, "failed": 0, "downloadingPercent": 45},
            "conditions": [{"type": "Resolved", "status": "True", "reason": "Resolved"}],
        },
    }


def fields_of(kind: str, obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e.field, e.type) for e in validation.validate(kind, obj)]


def test_valid_objects_pass() -> None:
    assert validation.validate("NodeModelStore", store()) == []
    assert validation.validate("ModelArtifact", artifact()) == []


def set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    target: Any = obj
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    if last.isdigit():
        target[int(last)] = value
    else:
        target[last] = value


@pytest.mark.parametrize(
    ("path", "value", "field", "error_type"),
    [
        ("spec.watermarks.highPercent", 96, "spec.watermarks.highPercent", "FieldValueInvalid"),
        ("spec.watermarks.highPercent", 1, "spec.watermarks.highPercent", "FieldValueInvalid"),
        ("spec.watermarks.lowPercent", 0, "spec.watermarks.lowPercent", "FieldValueInvalid"),
        ("spec.download.concurrency", 65, "spec.download.concurrency", "FieldValueInvalid"),
        ("spec.download.concurrency", 0, "spec.download.concurrency", "FieldValueInvalid"),
        ("spec.download.bytesPerSecond", -1, "spec.download.bytesPerSecond",
         "FieldValueInvalid"),
        ("spec.download.concurrency", "8", "spec.download.concurrency", "FieldValueInvalid"),
        ("spec.download.concurrency", True, "spec.download.concurrency", "FieldValueInvalid"),
        ("spec.download.concurrency", 8.5, "spec.download.concurrency", "FieldValueInvalid"),
        ("spec.hub.httpsProxy", 5, "spec.hub.httpsProxy", "FieldValueInvalid"),
        ("spec.hub.noProxy", "x" * 8193, "spec.hub.noProxy", "FieldValueTooLong"),
        ("spec.kubelet.imageGCHighThresholdPercent", 101,
         "spec.kubelet.imageGCHighThresholdPercent", "FieldValueInvalid"),
        ("spec.pinned", [DIGEST, DIGEST], "spec.pinned[1]", "FieldValueDuplicate"),
        ("spec.pinned", ["sha256:ABC"], "spec.pinned[0]", "FieldValueInvalid"),
        ("spec.pinned", [DIGEST + "\n"], "spec.pinned[0]", "FieldValueInvalid"),
        ("spec.watermarks", [], "spec.watermarks", "FieldValueInvalid"),
        ("status.capacity.usedPercent", 42, "status.capacity.usedPercent", "FieldValueInvalid"),
        ("status.capacity.totalBytes", -1, "status.capacity.totalBytes", "FieldValueInvalid"),
        ("status.models.0.state", "Gone", "status.models[0].state", "FieldValueNotSupported"),
        ("status.models.0.source", "Disk", "status.models[0].source", "FieldValueNotSupported"),
        ("status.models.0.reason", "Oops", "status.models[0].reason", "FieldValueNotSupported"),
        ("status.models.0.referenced", "yes", "status.models[0].referenced",
         "FieldValueInvalid"),
        ("status.models.0.lastUsedTime", "yesterday", "status.models[0].lastUsedTime",
         "FieldValueInvalid"),
        ("status.models.0.sizeBytes", None, "status.models[0].sizeBytes", "FieldValueInvalid"),
        ("status.models.1.digest", DIGEST, "status.models[1].digest", "FieldValueDuplicate"),
        ("status.conditions.0.status", "Maybe", "status.conditions[0].status",
         "FieldValueNotSupported"),
        ("status.conditions.0.type", "Healthy", "status.conditions[0].type",
         "FieldValueNotSupported"),
        ("status.conditions.0.reason", "not a word", "status.conditions[0].reason",
         "FieldValueInvalid"),
    ],
)
def test_node_model_store_refusals(path: str, value: Any, field: str, error_type: str) -> None:
    obj = store()
    set_path(obj, path, value)
    assert (field, error_type) in fields_of("NodeModelStore", obj)


def test_required_fields_of_list_items() -> None:
    obj = store()
    del obj["status"]["models"][0]["digest"]
    obj["status"]["conditions"][1]["status"] = None
    assert fields_of("NodeModelStore", obj) == [
        ("status.models[0].digest", "FieldValueRequired"),
        ("status.conditions[1].status", "FieldValueRequired"),
    ]


def test_too_many_models_and_pins() -> None:
    obj = store()
    obj["status"]["models"] = [{"digest": f"sha256:{i:064x}", "state": "Ready"}
                               for i in range(257)]
    obj["spec"]["pinned"] = [f"sha256:{i:064x}" for i in range(257)]
    assert fields_of("NodeModelStore", obj) == [
        ("spec.pinned", "FieldValueTooMany"), ("status.models", "FieldValueTooMany")]
    obj["status"]["models"].pop()
    obj["spec"]["pinned"].pop()
    assert validation.validate("NodeModelStore", obj) == []


def test_low_watermark_must_be_below_high() -> None:
    obj = store()
    obj["spec"]["watermarks"] = {"highPercent": 50, "lowPercent": 50}
    # the schema says nothing across fields; openapi.nodestore owns the rule
    errors = validation.validate("NodeModelStore", obj) + nodestore.watermark_errors(obj)
    assert [(e.field, e.message) for e in errors] == [
        ("spec.watermarks.lowPercent", "Invalid value: 50: must be below highPercent (50)")]
    obj["spec"]["watermarks"] = {"highPercent": 50, "lowPercent": 49}
    assert validation.validate("NodeModelStore", obj) == []
    assert nodestore.watermark_errors(obj) == []


def test_messages_name_the_rule() -> None:
    obj = store()
    obj["spec"]["watermarks"]["highPercent"] = 96
    obj["spec"]["pinned"] = ["sha256:abc"]
    messages = [e.message for e in validation.validate("NodeModelStore", obj)]
    assert messages == [
        "Invalid value: 96: must be at most 95",
        "Invalid value: \"sha256:abc\": must be 'sha256:' followed by 64 lowercase hexadecimal "
        "digits",
    ]


def test_nullable_times_accept_null_only_where_declared() -> None:
    obj = store()
    obj["status"]["models"][0]["lastUsedTime"] = None
    assert validation.validate("NodeModelStore", obj) == []
    obj["status"]["capacity"]["totalBytes"] = None
    assert fields_of("NodeModelStore", obj) == [
        ("status.capacity.totalBytes", "FieldValueInvalid")]


@pytest.mark.parametrize(
    ("path", "value", "field", "error_type"),
    [
        ("spec.allowPatterns", ["x"] * 33, "spec.allowPatterns", "FieldValueTooMany"),
        ("spec.ignorePatterns", ["y" * 257], "spec.ignorePatterns[0]", "FieldValueTooLong"),
        ("spec.allowPatterns", [""], "spec.allowPatterns[0]", "FieldValueInvalid"),
        ("spec.expectedDigest", "sha256:" + "A" * 64, "spec.expectedDigest",
         "FieldValueInvalid"),
        ("spec.source.huggingFace.revision", "", "spec.source.huggingFace.revision",
         "FieldValueInvalid"),
        ("spec.source.huggingFace.repository", "a/" + "b" * 200,
         "spec.source.huggingFace.repository", "FieldValueTooLong"),
        ("status.resolved.digestSource", "Cache", "status.resolved.digestSource",
         "FieldValueNotSupported"),
        ("status.nodes.downloadingPercent", 42, "status.nodes.downloadingPercent",
         "FieldValueInvalid"),
        ("status.nodes.downloadingPercent", 105, "status.nodes.downloadingPercent",
         "FieldValueInvalid"),
        ("status.nodes.ready", -1, "status.nodes.ready", "FieldValueInvalid"),
        ("status.resolved.manifestDigest", "md5:x", "status.resolved.manifestDigest",
         "FieldValueInvalid"),
        ("status.conditions.0.type", "Ready", "status.conditions[0].type",
         "FieldValueNotSupported"),
    ],
)
def test_model_artifact_refusals(path: str, value: Any, field: str, error_type: str) -> None:
    obj = artifact()
    set_path(obj, path, value)
    assert (field, error_type) in fields_of("ModelArtifact", obj)


def test_model_artifact_requires_spec_and_source() -> None:
    assert fields_of("ModelArtifact", {"metadata": {"name": "x"}}) == [
        ("spec", "FieldValueRequired")]
    assert fields_of("ModelArtifact", {"spec": {}}) == [("spec.source", "FieldValueRequired")]
    assert fields_of("ModelArtifact", {"spec": {"source": {"huggingFace": {}}}}) == [
        ("spec.source.huggingFace.repository", "FieldValueRequired")]


def test_metadata_is_not_this_modules_business() -> None:
    obj = artifact()
    obj["metadata"] = {"name": "Not A Name", "labels": {"a": 1}}
    assert validation.validate("ModelArtifact", obj) == []


def test_progress_view() -> None:
    view: dict[str, Any] = {
        "kind": "ModelArtifactProgress", "metadata": {"name": "x"},
        "timestamp": "2026-09-26T00:00:00Z", "manifestDigest": DIGEST, "sizeBytes": 10,
        "ready": 1, "downloading": 2, "failed": 1, "downloadingPercent": 42,
        "downloadingBytes": 5, "live": 2,
        "failureReasons": [{"reason": "SourceUnavailable", "count": 1}],
    }
    assert validation.validate("ModelArtifactProgress", view) == []
    broken = copy.deepcopy(view)
    broken["failureReasons"].append({"reason": "SourceUnavailable", "count": 2})
    assert fields_of("ModelArtifactProgress", broken) == [
        ("failureReasons[1].reason", "FieldValueDuplicate")]
