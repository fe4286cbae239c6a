"""The placement term's rules (``openapi.placement``): which nodes are warm, their order and cap,
the Kueue exception, the opt-in, and the merge into a Pod's own affinity."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from openapi import keys, placement, volume

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
PLUGIN_NODES = {f"n{i:02d}" for i in range(40)} | {"a", "b", "c"}


def store(node: str, *, state: str = "Ready", ready: str = "True", digest: str = DIGEST,
          referenced: bool = False, last_used: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"digest": digest, "state": state, "referenced": referenced}
    if last_used is not None:
        entry["lastUsedTime"] = last_used
    return {"metadata": {"name": node},
            "status": {"models": [entry], "conditions": [{"type": "Ready", "status": ready}]}}


def test_a_node_counts_only_while_all_three_hold() -> None:
    assert placement.warm_nodes([store("a")], DIGEST, PLUGIN_NODES) == ["a"]
    # the digest not Ready on the node (downloading, failed), or another digest
    assert placement.warm_nodes([store("a", state="Downloading")], DIGEST, PLUGIN_NODES) == []
    assert placement.warm_nodes([store("a", state="Failed")], DIGEST, PLUGIN_NODES) == []
    assert placement.warm_nodes([store("a", digest=OTHER)], DIGEST, PLUGIN_NODES) == []
    # a stale store: the plugin left, its Ready condition is not True
    assert placement.warm_nodes([store("a", ready="False")], DIGEST, PLUGIN_NODES) == []
    assert placement.warm_nodes([store("a", ready="Unknown")], DIGEST, PLUGIN_NODES) == []
    stale = store("a")
    del stale["status"]["conditions"]
    assert placement.warm_nodes([stale], DIGEST, PLUGIN_NODES) == []
    # the node's CSINode does not list the driver now
    assert placement.warm_nodes([store("a")], DIGEST, {"b"}) == []


def test_lists_driver_reads_the_csinode() -> None:
    csinode = {"metadata": {"name": "a"}, "spec": {"drivers": [
        {"name": "other.csi.example.com", "nodeID": "a"},
        {"name": volume.DRIVER, "nodeID": "a"}]}}
    assert placement.lists_driver(csinode)
    assert not placement.lists_driver({"metadata": {"name": "a"}, "spec": {"drivers": [
        {"name": "other.csi.example.com", "nodeID": "a"}]}})
    assert not placement.lists_driver({"metadata": {"name": "a"}, "spec": {"drivers": None}})
    assert not placement.lists_driver({})


def test_order_mounting_then_most_recent_then_name() -> None:
    stores = [
        store("c", last_used="2026-01-01T10:00:00Z"),
        store("b", last_used="2026-01-01T12:00:00Z"),
        store("n05"),  # never used: after every used one
        store("n01", referenced=True, last_used="2025-01-01T00:00:00Z"),
        store("a", last_used="2026-01-01T12:00:00Z"),
        store("n03", last_used="not a time"),  # unreadable: as never used
        store("n00", referenced=True),
    ]
    assert placement.warm_nodes(stores, DIGEST, PLUGIN_NODES) == [
        "n01", "n00", "a", "b", "c", "n03", "n05"]


def test_at_most_sixteen_nodes_the_first_by_the_order() -> None:
    stores = [store(f"n{i:02d}", last_used=f"2026-01-{i + 1:02d}T00:00:00Z") for i in range(30)]
    stores.append(store("n39", referenced=True))
    found = placement.warm_nodes(stores, DIGEST, PLUGIN_NODES)
    assert len(found) == placement.MAX_NODES == 16
    assert found[0] == "n39"
    assert found[1:] == [f"n{i:02d}" for i in range(29, 14, -1)]


def test_the_term_names_the_nodes_by_hostname() -> None:
    term = placement.preferred_term(["a", "b"])
    assert term == {"weight": placement.WEIGHT, "preference": {"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a", "b"]}]}}
    assert 1 <= placement.WEIGHT <= 100


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "annotations": {}}, "spec": {"containers": [], **spec}}


def apply(obj: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    patched: dict[str, Any] = jsonpatch.apply_patch(obj, operations)
    return patched


TERM = placement.preferred_term(["a"])
THEIRS = {"weight": 7, "preference": {"matchExpressions": [
    {"key": "gpu", "operator": "In", "values": ["h100"]}]}}


@pytest.mark.parametrize("spec", [
    {},
    {"affinity": None},
    {"affinity": {}},
    {"affinity": {"podAntiAffinity": {"x": 1}}},
    {"affinity": {"nodeAffinity": None}},
    {"affinity": {"nodeAffinity": {}}},
    {"affinity": {"nodeAffinity": {placement.PREFERRED: None}}},
    {"affinity": {"nodeAffinity": {placement.PREFERRED: []}}},
])
def test_the_preference_is_added_whatever_the_pod_has(spec: dict[str, Any]) -> None:
    original = pod(**spec)
    patched = apply(original, placement.preferred_patch(original, [TERM]))
    assert patched["spec"]["affinity"]["nodeAffinity"][placement.PREFERRED] == [TERM]
    if spec.get("affinity") and "podAntiAffinity" in spec["affinity"]:
        assert patched["spec"]["affinity"]["podAntiAffinity"] == {"x": 1}


def test_existing_terms_are_kept_first_and_never_replaced() -> None:
    required = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["z1"]}]}]}
    original = pod(affinity={"nodeAffinity": {placement.PREFERRED: [THEIRS],
                                              placement.REQUIRED: required}})
    other = placement.preferred_term(["b", "c"])
    operations = placement.preferred_patch(original, [TERM, other])
    assert all(op["op"] == "add" for op in operations)
    patched = apply(original, operations)
    node_affinity = patched["spec"]["affinity"]["nodeAffinity"]
    assert node_affinity[placement.PREFERRED] == [THEIRS, TERM, other]
    assert node_affinity[placement.REQUIRED] == required
    # asked again (a reinvocation, or a Pod that already carries it): nothing added twice
    assert placement.preferred_patch(patched, [TERM, other]) == []


def test_required_is_anded_into_every_existing_term() -> None:
    zone = {"key": "zone", "operator": "In", "values": ["z1"]}
    original = pod(affinity={"nodeAffinity": {placement.REQUIRED: {"nodeSelectorTerms": [
        {"matchExpressions": [zone]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["x"]}]}]}}})
    ours = [placement.expression(["a"]), placement.expression(["a", "b"])]
    patched = apply(original, placement.required_patch(original, ours))
    terms = patched["spec"]["affinity"]["nodeAffinity"][placement.REQUIRED]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"] == [zone, *ours]
    assert terms[1]["matchExpressions"] == ours
    assert terms[1]["matchFields"] == [{"key": "metadata.name", "operator": "In",
                                        "values": ["x"]}]
    assert placement.required_patch(patched, ours) == []


@pytest.mark.parametrize("spec", [
    {}, {"affinity": {"nodeAffinity": {}}},
    {"affinity": {"nodeAffinity": {placement.REQUIRED: {}}}},
    {"affinity": {"nodeAffinity": {placement.REQUIRED: {"nodeSelectorTerms": []}}}},
])
def test_required_makes_one_term_when_the_pod_has_none(spec: dict[str, Any]) -> None:
    original = pod(**spec)
    ours = [placement.expression(["a"])]
    patched = apply(original, placement.required_patch(original, ours))
    assert patched["spec"]["affinity"]["nodeAffinity"][placement.REQUIRED] == {
        "nodeSelectorTerms": [{"matchExpressions": ours}]}


def test_the_kueue_exception_and_the_opt_in() -> None:
    plain = pod()
    assert not placement.kueue_places(plain) and not placement.requires_warm(plain)
    kueued = pod()
    kueued["metadata"]["annotations"][keys.KUEUE_PREFERRED_TOPOLOGY] = "cloud.com/block"
    assert placement.kueue_places(kueued)
    opted = pod()
    opted["metadata"]["annotations"][keys.REQUIRE_WARM_NODE] = "true"
    assert placement.requires_warm(opted)
    opted["metadata"]["annotations"][keys.REQUIRE_WARM_NODE] = "yes"
    assert not placement.requires_warm(opted)
