"""ModelPrefetch in the contract: every field described, the defaults, the limits, the list keys
server-side apply needs, and its kubectl columns."""

from __future__ import annotations

import datetime

import pytest

from openapi import columns, defaults, pruning, validation
from openapi import schema as schemas
from tests.unit.openapi.test_schema import at

FIELDS = [
    "spec.artifactRef.name", "spec.bindingRef.name", "spec.placement.nodeSelector",
    "spec.placement.nodeSelector.matchLabels", "spec.placement.nodeSelector.matchExpressions",
    "spec.placement.nodeSelector.matchExpressions.[].key",
    "spec.placement.nodeSelector.matchExpressions.[].operator",
    "spec.placement.nodeSelector.matchExpressions.[].values", "spec.placement.instanceTypes",
    "spec.minReady", "spec.retention.pinned", "spec.retention.ttlAfterLastUse",
    "spec.targets.nodeNames", "spec.targets.nodeSelector", "spec.targets.minReady",
    "status.observedGeneration", "status.manifestDigest", "status.desiredNodes",
    "status.readyNodes", "status.downloadingNodes", "status.failedNodes", "status.conditions",
]


@pytest.mark.parametrize("path", FIELDS)
def test_every_field_is_described(path: str) -> None:
    node = at("ModelPrefetch", path)
    assert node.get("description") and (node.get("type") or node.get("allOf")), path


def test_lists_carry_their_apply_keys_and_the_status_names_no_node() -> None:
    assert at("ModelPrefetch", "spec.targets.nodeNames")["x-kubernetes-list-type"] == "set"
    assert at("ModelPrefetch", "spec.placement.instanceTypes")["x-kubernetes-list-type"] == "set"
    assert at("ModelPrefetch", "spec.placement.nodeSelector.matchExpressions")[
        "x-kubernetes-list-type"] == "atomic"
    conditions = at("ModelPrefetch", "status.conditions")
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert schemas.resolve(conditions["items"])["properties"]["type"]["enum"] == [
        "Available", "Progressing", "Degraded", "Lapsed"]
    assert set(schemas.MODEL_PREFETCH_STATUS["properties"]) == {
        "observedGeneration", "manifestDigest", "desiredNodes", "readyNodes",
        "downloadingNodes", "failedNodes", "conditions"}
    assert schemas.MODEL_PREFETCH_SPEC["required"] == ["artifactRef"]  # bindingRef: admission


def test_defaults_prune_and_validate() -> None:
    obj = {"spec": {"artifactRef": {"name": "qwen"}, "bindingRef": {"name": "grant"},
                    "placement": {"nodeSelector": {"matchLabels": {"a": "b"}}},
                    "color": "blue"}}
    defaults.apply_defaults("ModelPrefetch", obj)
    assert obj["spec"]["retention"] == {"pinned": False}
    assert obj["spec"]["minReady"] == 0
    assert pruning.prune_unknown("ModelPrefetch", obj) == ["spec.color"]
    assert validation.validate("ModelPrefetch", obj) == []
    too_many = {"spec": {"artifactRef": {"name": "q"}, "placement": {"nodeSelector": {
        "matchLabels": {f"k{i}": "v" for i in range(65)}}}}}
    (error,) = validation.validate("ModelPrefetch", too_many)
    assert (error.field, error.type) == ("spec.placement.nodeSelector.matchLabels",
                                         "FieldValueTooMany")


def test_columns_and_a_row() -> None:
    assert [c["name"] for c in columns.columns("ModelPrefetch")] == [
        "Name", "Artifact", "Ready", "Downloading", "Pinned", "Available", "Age"]
    now = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    obj = {"metadata": {"name": "warm", "creationTimestamp": "2026-01-02T03:00:00Z"},
           "spec": {"artifactRef": {"name": "qwen"}, "retention": {"pinned": True}},
           "status": {"desiredNodes": 3, "readyNodes": 2, "downloadingNodes": 1,
                      "conditions": [{"type": "Available", "status": "True"}]}}
    assert columns.cells("ModelPrefetch", obj, now) == [
        "warm", "qwen", "2/3", 1, True, "True", "4m5s"]
    fresh = {"metadata": {"name": "new"}, "spec": {"artifactRef": {"name": "qwen"}}}
    assert columns.cells("ModelPrefetch", fresh, now) == [
        "new", "qwen", None, None, None, None, "<unknown>"]
