"""Unknown fields are found at every depth, reported as dotted paths, and pruned."""

import copy
from typing import Any

from openapi import pruning

DIGEST = "sha256:" + "a" * 64


def unknown(kind: str, obj: dict[str, Any]) -> list[str]:
    """The unknown fields ``prune_unknown`` reports, on a copy."""
    return pruning.prune_unknown(kind, copy.deepcopy(obj))


def artifact() -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelArtifact",
        "metadata": {
            "name": "x",
            "labels": {"team": "a"},
            "annotations": {"note": "free text"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u"}],
            "managedFields": [{"manager": "kubectl", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:spec": {"f:anything": {}}}}],
        },
        "spec": {
            "source": {"huggingFace": {"repository": "a/b", "revision": "main",
                                       "secretRef": {"name": "tok"}}},
            "allowPatterns": ["*.json"],
            "expectedDigest": DIGEST,
        },
        "status": {
            "resolved": {"revision": "c" * 40, "manifestDigest": DIGEST},
            "conditions": [{"type": "Resolved", "status": "True", "reason": "Resolved"}],
        },
    }


def test_a_fully_known_object_has_no_unknown_fields() -> None:
    obj = artifact()
    assert unknown("ModelArtifact", obj) == []
    pruning.prune("ModelArtifact", obj)
    assert obj == artifact()


def test_unknown_fields_at_several_depths() -> None:
    obj = artifact()
    obj["extra"] = 1
    obj["metadata"]["color"] = "blue"
    obj["metadata"]["ownerReferences"][0]["weight"] = 3
    obj["spec"]["foo"] = True
    obj["spec"]["source"]["huggingFace"]["bar"] = "x"
    obj["spec"]["source"]["huggingFace"]["secretRef"]["key"] = "token"
    obj["status"]["conditions"][0]["severity"] = "high"
    assert unknown("ModelArtifact", obj) == [
        "metadata.ownerReferences[0].weight",
        "metadata.color",
        "spec.source.huggingFace.secretRef.key",
        "spec.source.huggingFace.bar",
        "spec.foo",
        "status.conditions[0].severity",
        "extra",
    ]
    pruning.prune("ModelArtifact", obj)
    assert obj == artifact()


def test_maps_and_free_form_fields_are_kept() -> None:
    obj = artifact()
    obj["metadata"]["labels"]["anything.example/x"] = "y"
    before = copy.deepcopy(obj)
    assert unknown("ModelArtifact", obj) == []
    pruning.prune("ModelArtifact", obj)
    assert obj == before


def test_node_model_store_list_items() -> None:
    obj: dict[str, Any] = {
        "spec": {"watermarks": {"highPercent": 80, "middlePercent": 75}},
        "status": {"models": [{"digest": DIGEST, "state": "Ready"},
                              {"digest": DIGEST, "state": "Ready", "owner": "team-a"}],
                   "capacity": {"totalBytes": 1, "freeBytes": 0}},
    }
    assert unknown("NodeModelStore", obj) == [
        "spec.watermarks.middlePercent",
        "status.models[1].owner",
        "status.capacity.freeBytes",
    ]
    pruning.prune("NodeModelStore", obj)
    assert obj["status"]["models"][1] == {"digest": DIGEST, "state": "Ready"}
    assert obj["spec"]["watermarks"] == {"highPercent": 80}


def test_values_of_the_wrong_type_are_left_to_validation() -> None:
    obj: dict[str, Any] = {"spec": {"source": "huggingFace", "allowPatterns": "x"}}
    assert unknown("ModelArtifact", obj) == []


def test_progress_view_fields() -> None:
    obj: dict[str, Any] = {"kind": "ModelArtifactProgress", "ready": 1, "nodes": ["a"],
                           "failureReasons": [{"reason": "Canceled", "count": 1, "node": "n"}]}
    assert unknown("ModelArtifactProgress", obj) == [
        "nodes", "failureReasons[0].node"]


def test_prune_drops_nulls_where_null_is_not_allowed() -> None:
    obj: dict[str, Any] = {
        "spec": {"download": None, "watermarks": {"highPercent": None, "lowPercent": 60}},
        "status": {"models": [{"digest": DIGEST, "state": "Ready", "retryTime": None,
                               "sizeBytes": None}]},
    }
    assert unknown("NodeModelStore", obj) == []
    pruning.prune("NodeModelStore", obj)
    assert obj == {
        "spec": {"watermarks": {"lowPercent": 60}},
        "status": {"models": [{"digest": DIGEST, "state": "Ready", "retryTime": None}]},
    }
