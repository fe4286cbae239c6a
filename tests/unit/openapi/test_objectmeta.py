"""ObjectMeta validation as kube-apiserver does it: types from the schema, then each rule."""

from __future__ import annotations

from typing import Any

import pytest

from openapi import objectmeta

OWNER = {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u1"}


def refused(metadata: Any) -> list[tuple[str, str]]:
    return [(p.field, p.type) for p in objectmeta.validate(metadata)]


@pytest.mark.parametrize("metadata", [
    None,
    {},
    {"name": "a.b-c", "labels": {"a.io/b": "c", "k": ""}, "finalizers": ["x.io/y", "orphan"]},
    {"generateName": "web-"},
    {"annotations": {"Example.COM/Key": "anything at all\n", "kubectl.kubernetes.io/x": "{}"}},
    {"ownerReferences": [OWNER, {**OWNER, "uid": "u2", "controller": True}]},
    {"managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:spec": {}}, "time": "2026-01-02T03:04:05Z"}]},
    {"name": "x" * 253, "generation": 0, "resourceVersion": "5"},
])
def test_accepted(metadata: Any) -> None:
    assert objectmeta.validate(metadata) == []


@pytest.mark.parametrize(("metadata", "expected"), [
    # types, from the schema
    ("x", [("metadata", "FieldValueInvalid")]),
    ({"name": 5}, [("metadata.name", "FieldValueInvalid")]),
    ({"name": ["a"]}, [("metadata.name", "FieldValueInvalid")]),
    ({"generateName": 5}, [("metadata.generateName", "FieldValueInvalid")]),
    ({"resourceVersion": 5}, [("metadata.resourceVersion", "FieldValueInvalid")]),
    ({"resourceVersion": ["5"]}, [("metadata.resourceVersion", "FieldValueInvalid")]),
    ({"labels": ["a"]}, [("metadata.labels", "FieldValueInvalid")]),
    ({"labels": {"a": 1}}, [("metadata.labels[a]", "FieldValueInvalid")]),
    ({"annotations": {"a": 5}}, [("metadata.annotations[a]", "FieldValueInvalid")]),
    ({"annotations": {"a": {"b": "c"}}}, [("metadata.annotations[a]", "FieldValueInvalid")]),
    ({"finalizers": "x"}, [("metadata.finalizers", "FieldValueInvalid")]),
    ({"finalizers": [1]}, [("metadata.finalizers[0]", "FieldValueInvalid")]),
    ({"ownerReferences": "x"}, [("metadata.ownerReferences", "FieldValueInvalid")]),
    ({"ownerReferences": [1, 2]}, [("metadata.ownerReferences[0]", "FieldValueInvalid"),
                                   ("metadata.ownerReferences[1]", "FieldValueInvalid")]),
    ({"ownerReferences": [{**OWNER, "controller": "yes"}]},
     [("metadata.ownerReferences[0].controller", "FieldValueInvalid")]),
    ({"ownerReferences": [{"kind": "Node", "name": "n", "uid": "u"}]},
     [("metadata.ownerReferences[0].apiVersion", "FieldValueRequired")]),
    ({"managedFields": "x"}, [("metadata.managedFields", "FieldValueInvalid")]),
    ({"managedFields": [5]}, [("metadata.managedFields[0]", "FieldValueInvalid")]),
    ({"managedFields": [{"operation": "Update", "time": "yesterday"}]},
     [("metadata.managedFields[0].time", "FieldValueInvalid")]),
    ({"generation": "1"}, [("metadata.generation", "FieldValueInvalid")]),
    ({"uid": 7}, [("metadata.uid", "FieldValueInvalid")]),
    ({"creationTimestamp": "now"}, [("metadata.creationTimestamp", "FieldValueInvalid")]),
    # names
    ({"name": "A"}, [("metadata.name", "FieldValueInvalid")]),
    ({"name": "a_b"}, [("metadata.name", "FieldValueInvalid")]),
    ({"name": "."}, [("metadata.name", "FieldValueInvalid")]),
    ({"name": "a/b"}, [("metadata.name", "FieldValueInvalid")]),
    ({"name": "a%b"}, [("metadata.name", "FieldValueInvalid")]),
    ({"name": "x" * 254}, [("metadata.name", "FieldValueInvalid")]),
    ({"generateName": "Web-"}, [("metadata.generateName", "FieldValueInvalid")]),
    ({"generateName": "web_"}, [("metadata.generateName", "FieldValueInvalid")]),
    # labels and annotations
    ({"labels": {"bad key": "v"}}, [("metadata.labels", "FieldValueInvalid")]),
    ({"labels": {"k": "bad value"}}, [("metadata.labels[k]", "FieldValueInvalid")]),
    ({"labels": {"k": "v" * 64}}, [("metadata.labels[k]", "FieldValueInvalid")]),
    ({"annotations": {"a/b/c": "v"}}, [("metadata.annotations", "FieldValueInvalid")]),
    ({"annotations": {"a": "v" * (256 * 1024)}}, [("metadata.annotations", "FieldValueTooLong")]),
    # finalizers
    ({"finalizers": ["ok", "no/pe/x"]}, [("metadata.finalizers[1]", "FieldValueInvalid")]),
    ({"finalizers": ["orphan", "foregroundDeletion"]}, [("metadata.finalizers",
                                                         "FieldValueInvalid")]),
    # owner references
    ({"ownerReferences": [{**OWNER, "apiVersion": "apps/"}]},
     [("metadata.ownerReferences[0].apiVersion", "FieldValueInvalid")]),
    ({"ownerReferences": [{**OWNER, "uid": ""}]},
     [("metadata.ownerReferences[0].uid", "FieldValueInvalid")]),
    ({"ownerReferences": [{**OWNER, "kind": "Event"}]},
     [("metadata.ownerReferences[0]", "FieldValueInvalid")]),
    ({"ownerReferences": [{**OWNER, "controller": True},
                          {**OWNER, "uid": "u2", "controller": True}]},
     [("metadata.ownerReferences", "FieldValueInvalid")]),
    # managed fields
    ({"managedFields": [{"operation": "Patch"}]},
     [("metadata.managedFields[0].operation", "FieldValueInvalid")]),
    ({"managedFields": [{"operation": "Apply", "fieldsType": "FieldsV2"}]},
     [("metadata.managedFields[0].fieldsType", "FieldValueInvalid")]),
    ({"managedFields": [{"operation": "Apply", "manager": "m" * 129}]},
     [("metadata.managedFields[0].manager", "FieldValueTooLong")]),
    ({"managedFields": [{"operation": "Apply", "manager": "a\nb"}]},
     [("metadata.managedFields[0].manager", "FieldValueInvalid")]),
    ({"managedFields": [{"operation": "Apply", "subresource": "s" * 257}]},
     [("metadata.managedFields[0].subresource", "FieldValueTooLong")]),
    ({"generation": -1}, [("metadata.generation", "FieldValueInvalid")]),
])
def test_refused(metadata: Any, expected: list[tuple[str, str]]) -> None:
    assert refused(metadata) == expected


def test_an_owner_list_keyed_by_uid_may_repeat_as_kube_allows() -> None:
    assert objectmeta.validate({"ownerReferences": [OWNER, OWNER],
                                "finalizers": ["a", "a"]}) == []


def test_messages_are_bounded_whatever_the_value() -> None:
    [problem] = objectmeta.validate({"finalizers": ["f" * 100_000 + "/x/y"]})
    assert len(problem.message) < 1000
    [size] = objectmeta.validate({"annotations": {"a": "v" * 300_000}})
    assert size.message == "Too long: may not be more than 262144 bytes"
    laughs: list[Any] = ["x" * 10]
    for _ in range(12):
        laughs = [laughs] * 10
    [typed] = objectmeta.validate({"labels": laughs})
    assert len(typed.message) < 400


def test_the_annotation_total_counts_bytes() -> None:
    almost = {"k": "é" * (128 * 1024 - 1)}  # two bytes each
    assert objectmeta.validate({"annotations": almost}) == []
    over = {"k": "é" * (128 * 1024)}
    assert refused({"annotations": over}) == [("metadata.annotations", "FieldValueTooLong")]
