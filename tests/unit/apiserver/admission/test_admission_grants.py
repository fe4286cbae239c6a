"""A prefetch's grant at admission (``PrefetchGrant``): a binding required and existing, pinning
only with ``allowPinned``, the target set inside the binding's stores, and the projection within
the budget; each refusal names its field and rule, and none names a node."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from apiserver.admission import chain, facts
from apiserver.registry import strategy
from devkit import admitting
from openapi import defaults, fields, keys, resources, wire

GIB = 1 << 30
DIGEST = "sha256:" + "a" * 64


class Governance:
    """The pool layer as a replica's informers would hold it."""

    def __init__(self) -> None:
        self.is_ready = True
        self.bindings: dict[tuple[str, str], wire.Obj] = {}
        # node -> (the store it is merged from, its labels)
        self.nodes: dict[str, tuple[str, dict[str, str]]] = {
            "gpu-1": ("large", {"pool": "large"}), "gpu-2": ("large", {"pool": "large"}),
            "cpu-1": ("small", {"pool": "small"}), "bare": ("", {})}
        self.stored: list[wire.Obj] = []
        self.artifacts: dict[str, wire.Obj] = {}

    def ready(self) -> bool:
        return self.is_ready

    def binding(self, namespace: str, name: str) -> wire.Obj | None:
        return self.bindings.get((namespace, name))

    def plugin_nodes(self) -> list[tuple[str, str]]:
        return sorted((node, store) for node, (store, _) in self.nodes.items())

    def labels(self, node: str) -> Mapping[str, str]:
        return {keys.HOSTNAME: node, **self.nodes[node][1]}

    def prefetches(self, namespace: str) -> list[wire.Obj]:
        return [p for p in self.stored if p["metadata"]["namespace"] == namespace]

    def artifact(self, namespace: str, name: str) -> wire.Obj | None:
        return self.artifacts.get(name)


def grant(quota: int = 10 * GIB, *, pinned: bool = False,
          stores: tuple[str, ...] = ("large",)) -> wire.Obj:
    return {"metadata": {"name": "grant", "namespace": "team-a"},
            "spec": {"storeRefs": [{"name": s} for s in stores], "quota": {"bytes": quota},
                     "allowPinned": pinned}}


def resolved(name: str, size: int, digest: str = DIGEST) -> wire.Obj:
    return {"metadata": {"name": name, "namespace": "team-a"},
            "status": {"resolved": {"manifestDigest": digest, "sizeBytes": size}}}


def prefetch(name: str = "warm", artifact: str = "qwen", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": resources.GROUP_VERSION, "kind": "ModelPrefetch",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"artifactRef": {"name": artifact}, "bindingRef": {"name": "grant"},
                     **spec}}


@pytest.fixture
def governance() -> Governance:
    found = Governance()
    found.bindings[("team-a", "grant")] = grant()
    found.artifacts["qwen"] = resolved("qwen", 2 * GIB)
    return found


def admit(governance: Governance, obj: dict[str, Any],
          old: dict[str, Any] | None = None) -> list[fields.FieldError]:
    cluster = facts.standalone(admitting.WORKER, admitting.PLUGIN)
    cluster.governance = governance
    obj = copy.deepcopy(obj)
    defaults.apply_defaults("ModelPrefetch", obj)
    operation = "CREATE" if old is None else "UPDATE"
    return chain.build(cluster).admit(strategy.Write(operation, resources.MODEL_PREFETCH, obj,
                                                     old))


def test_inside_the_stores_and_the_budget_is_admitted(governance: Governance) -> None:
    assert admit(governance, prefetch()) == []  # every node of "large": 2 x 2 GiB
    assert admit(governance, prefetch(placement={"nodeSelector": {"matchExpressions": [
        {"key": keys.HOSTNAME, "operator": "In", "values": ["gpu-1"]}]}})) == []


def test_a_missing_binding_is_refused(governance: Governance) -> None:
    (error,) = admit(governance, prefetch(bindingRef={"name": "nope"}))
    assert (error.field, error.type) == ("spec.bindingRef.name", "FieldValueInvalid")
    assert "no ModelStoreBinding of that name in namespace team-a" in error.message


def test_pinning_needs_allow_pinned(governance: Governance) -> None:
    (error,) = admit(governance, prefetch(retention={"pinned": True}))
    assert (error.field, error.type) == ("spec.retention.pinned", "FieldValueForbidden")
    assert "does not allow pinning" in error.message
    governance.bindings[("team-a", "grant")] = grant(pinned=True)
    assert admit(governance, prefetch(retention={"pinned": True})) == []


def test_a_target_set_outside_the_stores_is_refused_naming_no_node(
        governance: Governance) -> None:
    (error,) = admit(governance, prefetch(placement={"nodeSelector": {}}))
    assert (error.field, error.type) == ("spec.placement.nodeSelector", "FieldValueForbidden")
    assert "selects 2 node(s) outside every ModelStore the binding grant names (large)" in (
        error.message)
    assert "cpu-1" not in error.message and "bare" not in error.message


def test_the_projection_past_the_budget_is_refused(governance: Governance) -> None:
    governance.bindings[("team-a", "grant")] = grant(quota=5 * GIB)
    # another prefetch of the same digest on one node: the widest count (2) is what counts
    governance.stored.append(prefetch("one", placement={"nodeSelector": {"matchExpressions": [
        {"key": keys.HOSTNAME, "operator": "In", "values": ["gpu-1"]}]}}))
    assert admit(governance, prefetch()) == []  # 2 GiB x 2 nodes = 4 GiB <= 5 GiB
    governance.artifacts["llama"] = resolved("llama", 1 * GIB, "sha256:" + "b" * 64)
    governance.stored.append(prefetch("two"))  # qwen on both nodes: 4 GiB
    (error,) = admit(governance, prefetch("three", "llama"))  # + 1 GiB x 2 = 6 GiB
    assert (error.field, error.type) == ("spec.bindingRef", "FieldValueForbidden")
    assert "is 6442450944 bytes" in error.message and "budget of 5368709120 bytes" in (
        error.message)


def test_an_unresolved_artifact_projects_nothing(governance: Governance) -> None:
    governance.bindings[("team-a", "grant")] = grant(quota=1)
    governance.artifacts["later"] = {"metadata": {"name": "later"}}
    assert admit(governance, prefetch(artifact="later")) == []
    assert admit(governance, prefetch(artifact="absent")) == []


def test_not_judged_before_the_informers_listed_or_when_the_spec_did_not_change(
        governance: Governance) -> None:
    governance.is_ready = False
    assert admit(governance, prefetch(bindingRef={"name": "nope"})) == []
    governance.is_ready = True
    stored = prefetch(placement={"nodeSelector": {}})
    defaults.apply_defaults("ModelPrefetch", stored)
    labelled = copy.deepcopy(stored)
    labelled["metadata"]["labels"] = {"team": "a"}
    assert admit(governance, labelled, stored) == []  # metadata only: the grant stands
