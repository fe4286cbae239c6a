"""ModelStore and ModelStoreBinding admission: the schema, the selector and watermark rules, and
the binding's frozen fields, each refusal naming its field and rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.admission import chain, facts
from apiserver.registry import strategy
from devkit import admitting
from openapi import defaults, fields, resources


def _chain() -> chain.Chain:
    return chain.build(facts.standalone(admitting.WORKER, admitting.PLUGIN))


def store(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"nodeSelector": {"pool": "large-disk"}}
    body.update(spec)
    return {"apiVersion": resources.GROUP_VERSION, "kind": "ModelStore",
            "metadata": {"name": "large"}, "spec": body}


def binding(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"storeRefs": [{"name": "large"}], "quota": {"bytes": 10 << 30}}
    body.update(spec)
    return {"apiVersion": resources.GROUP_VERSION, "kind": "ModelStoreBinding",
            "metadata": {"name": "team-a", "namespace": "team-a"}, "spec": body}


def _write(operation: str, obj: dict[str, Any],
           old: dict[str, Any] | None = None) -> list[fields.FieldError]:
    info = resources.BY_KIND[obj["kind"]]
    obj = copy.deepcopy(obj)
    defaults.apply_defaults(info.kind, obj)
    if old is not None:
        old = copy.deepcopy(old)
        defaults.apply_defaults(info.kind, old)
    return _chain().admit(strategy.Write(operation, info, obj, old))


def refusals(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e.field, e.type) for e in _write("CREATE", obj)]


@pytest.mark.parametrize("obj", [
    store(),
    store(nodeSelector={}),
    store(watermarks={"highPercent": 90}),
    store(watermarks={"highPercent": 90, "lowPercent": 60},
          download={"concurrency": 4, "bytesPerSecond": 0}),
    binding(),
    binding(allowPinned=True, storeRefs=[{"name": "large"}, {"name": "small"}]),
])
def test_accepted(obj: dict[str, Any]) -> None:
    assert _write("CREATE", obj) == []


def test_a_field_left_out_stays_out() -> None:
    """No default fills an override: a field the store leaves out keeps the cluster setting."""
    obj = store(watermarks={"highPercent": 90})
    defaults.apply_defaults("ModelStore", obj)
    assert obj["spec"] == {"nodeSelector": {"pool": "large-disk"},
                           "watermarks": {"highPercent": 90}}
    found = binding()
    defaults.apply_defaults("ModelStoreBinding", found)
    assert found["spec"]["allowPinned"] is False


@pytest.mark.parametrize(("obj", "expected", "words"), [
    (store(nodeSelector={"bad key!": "x"}), ("spec.nodeSelector[bad key!]", "FieldValueInvalid"),
     "label key"),
    (store(nodeSelector={"pool": "-x-"}), ("spec.nodeSelector[pool]", "FieldValueInvalid"),
     "label value"),
    (store(watermarks={"highPercent": 60, "lowPercent": 70}),
     ("spec.watermarks.lowPercent", "FieldValueInvalid"), "below highPercent (60)"),
    (store(download={"bytesPerSecond": -1}),
     ("spec.download.bytesPerSecond", "FieldValueInvalid"), "at least 0"),
    ({**store(), "spec": {}}, ("spec.nodeSelector", "FieldValueRequired"), ""),
    (binding(storeRefs=[]), ("spec.storeRefs", "FieldValueRequired"), "no default pool"),
    (binding(storeRefs=[{"name": "Not_A_Name"}]),
     ("spec.storeRefs[0].name", "FieldValueInvalid"), "DNS-1123 subdomain"),
    (binding(storeRefs=[{"name": "a"}, {"name": "a"}]),
     ("spec.storeRefs[1].name", "FieldValueDuplicate"), ""),
    (binding(quota={}), ("spec.quota.bytes", "FieldValueRequired"), ""),
    (binding(quota={"bytes": -5}), ("spec.quota.bytes", "FieldValueInvalid"), ""),
])
def test_refused(obj: dict[str, Any], expected: tuple[str, str], words: str) -> None:
    found = _write("CREATE", obj)
    assert [(e.field, e.type) for e in found] == [expected]
    assert words in found[0].message


@pytest.mark.parametrize(("change", "field", "rule"), [
    ({"storeRefs": [{"name": "small"}]}, "spec.storeRefs", "storeRefs cannot change"),
    ({"storeRefs": [{"name": "large"}, {"name": "small"}]}, "spec.storeRefs",
     "storeRefs cannot change"),
    ({"quota": {"bytes": (10 << 30) - 1}}, "spec.quota.bytes", "the budget can only grow"),
    ({"allowPinned": False}, "spec.allowPinned", "allowPinned can only turn on"),
])
def test_the_grant_is_frozen(change: dict[str, Any], field: str, rule: str) -> None:
    old = binding(allowPinned=True)
    new = copy.deepcopy(old)
    new["spec"].update(change)
    (error,) = _write("UPDATE", new, old)
    assert error.field == field and rule in error.message


def test_the_grant_may_grow_and_turn_pinning_on() -> None:
    old = binding()
    new = binding(quota={"bytes": 20 << 30}, allowPinned=True,
                  storeRefs=[{"name": "large"}])
    assert _write("UPDATE", new, old) == []
    # the same stores in another order are the same grant
    two = binding(storeRefs=[{"name": "a"}, {"name": "b"}])
    swapped = binding(storeRefs=[{"name": "b"}, {"name": "a"}])
    assert _write("UPDATE", swapped, two) == []


def test_every_frozen_refusal_at_once_names_each_field() -> None:
    old = binding(allowPinned=True)
    new = binding(storeRefs=[{"name": "other"}], quota={"bytes": 1})
    assert sorted(e.field for e in _write("UPDATE", new, old)) == [
        "spec.allowPinned", "spec.quota.bytes", "spec.storeRefs"]
