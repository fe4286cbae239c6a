"""ModelPrefetch admission: the schema and the prefetch rules, each accepted and refused with its
field path; an existing claim or image artifact refused naming why, an unknown one admitted; the
shape before the pool layer (``spec.targets``) converted on write."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.admission import chain, facts
from apiserver.registry import strategy
from devkit import admitting
from openapi import defaults, fields, keys, resources


class _Artifacts:
    def __init__(self, known: dict[tuple[str, str], str]) -> None:
        self.known = known

    def source_of(self, namespace: str, name: str) -> str | None:
        return self.known.get((namespace, name))


def _chain(known: dict[tuple[str, str], str] | None = None) -> chain.Chain:
    cluster = facts.standalone(admitting.WORKER, admitting.PLUGIN)
    if known is not None:
        cluster.artifacts = _Artifacts(known)
    return chain.build(cluster)


def prefetch(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"artifactRef": {"name": "qwen"}, "bindingRef": {"name": "grant"}}
    body.update(spec)
    return {"apiVersion": resources.GROUP_VERSION, "kind": "ModelPrefetch",
            "metadata": {"name": "warm", "namespace": "team-a"}, "spec": body}


def create(obj: dict[str, Any], admission: chain.Chain | None = None) -> list[fields.FieldError]:
    obj = copy.deepcopy(obj)
    defaults.apply_defaults("ModelPrefetch", obj)
    write = strategy.Write("CREATE", resources.MODEL_PREFETCH, obj)
    return (admission or _chain()).admit(write)


def refusals(obj: dict[str, Any], admission: chain.Chain | None = None) -> list[tuple[str, str]]:
    return [(e.field, e.type) for e in create(obj, admission)]


SELECTOR = "spec.placement.nodeSelector"


@pytest.mark.parametrize("obj", [
    prefetch(),
    prefetch(placement={"nodeSelector": {}}),
    prefetch(placement={"nodeSelector": {
        "matchLabels": {"gpu.example.com/model": "h100", "pool": "a"},
        "matchExpressions": [{"key": keys.HOSTNAME, "operator": "In", "values": ["n1", "n.b"]},
                             {"key": "spot", "operator": "DoesNotExist"}]}}, minReady=1),
    prefetch(retention={"pinned": False}),
    prefetch(retention={"pinned": True, "ttlAfterLastUse": "72h"}),
])
def test_accepted(obj: dict[str, Any]) -> None:
    assert create(obj) == []


@pytest.mark.parametrize(("obj", "field", "kind"), [
    ({**prefetch(), "spec": {"bindingRef": {"name": "grant"}}}, "spec.artifactRef",
     "FieldValueRequired"),
    ({**prefetch(), "spec": {"artifactRef": {"name": "qwen"}}}, "spec.bindingRef",
     "FieldValueRequired"),
    (prefetch(artifactRef={"name": "Not_A_Name"}), "spec.artifactRef.name", "FieldValueInvalid"),
    (prefetch(bindingRef={"name": "Not_A_Name"}), "spec.bindingRef.name", "FieldValueInvalid"),
    (prefetch(placement={"instanceTypes": ["a100-pool"]}), "spec.placement.instanceTypes",
     "FieldValueForbidden"),
    (prefetch(placement={"nodeSelector": {"matchLabels": {"bad key!": "x"}}}),
     f"{SELECTOR}.matchLabels[bad key!]", "FieldValueInvalid"),
    (prefetch(placement={"nodeSelector": {"matchLabels": {"pool": "-bad"}}}),
     f"{SELECTOR}.matchLabels[pool]", "FieldValueInvalid"),
    (prefetch(placement={"nodeSelector": {"matchLabels": {f"k{i}": "v" for i in range(65)}}}),
     f"{SELECTOR}.matchLabels", "FieldValueTooMany"),
    (prefetch(placement={"nodeSelector": {"matchExpressions": [
        {"key": "pool", "operator": "In"}]}}), f"{SELECTOR}.matchExpressions[0].values",
     "FieldValueRequired"),
    (prefetch(placement={"nodeSelector": {"matchExpressions": [
        {"key": "pool", "operator": "Exists", "values": ["a"]}]}}),
     f"{SELECTOR}.matchExpressions[0].values", "FieldValueForbidden"),
    (prefetch(placement={"nodeSelector": {"matchExpressions": [
        {"key": "pool", "operator": "Near", "values": ["a"]}]}}),
     f"{SELECTOR}.matchExpressions[0].operator", "FieldValueNotSupported"),
    (prefetch(minReady=-1), "spec.minReady", "FieldValueInvalid"),
    (prefetch(retention={"pinned": True, "ttlAfterLastUse": "soon"}),
     "spec.retention.ttlAfterLastUse", "FieldValueInvalid"),
    (prefetch(retention={"pinned": True, "ttlAfterLastUse": "30m"}),
     "spec.retention.ttlAfterLastUse", "FieldValueInvalid"),
    (prefetch(retention={"ttlAfterLastUse": "2h"}),
     "spec.retention.ttlAfterLastUse", "FieldValueForbidden"),
])
def test_refused(obj: dict[str, Any], field: str, kind: str) -> None:
    assert (field, kind) in refusals(obj)


def test_instance_types_are_refused_with_the_reason() -> None:
    (error,) = create(prefetch(placement={"instanceTypes": ["a100-pool"]}))
    assert "no InstanceType kind" in error.message and "placement.nodeSelector" in error.message


def test_defaults_warm_without_pinning_and_count_every_node() -> None:
    obj = prefetch()
    defaults.apply_defaults("ModelPrefetch", obj)
    assert obj["spec"]["retention"] == {"pinned": False}
    assert obj["spec"]["minReady"] == 0 and obj["spec"]["placement"] == {}


@pytest.mark.parametrize(("kind", "words"), [
    ("persistentVolumeClaim", "mounted from its volume"),
    ("image", "container runtime"),
])
def test_an_existing_claim_or_image_artifact_is_refused_naming_why(kind: str,
                                                                   words: str) -> None:
    admission = _chain({("team-a", "qwen"): kind})
    (error,) = create(prefetch(), admission)
    assert (error.field, error.type) == ("spec.artifactRef.name", "FieldValueForbidden")
    assert f"ModelArtifact team-a/qwen has a {kind} source" in error.message
    assert words in error.message and "only huggingFace and modelScope" in error.message


@pytest.mark.parametrize("known", [
    {("team-a", "qwen"): "huggingFace"},
    {("team-a", "qwen"): "modelScope"},
    {},  # not there (yet): admitted, the controller reports it
    {("team-b", "qwen"): "image"},  # another namespace's artifact is not this one
])
def test_hub_or_unknown_artifacts_are_admitted(known: dict[tuple[str, str], str]) -> None:
    assert create(prefetch(), _chain(known)) == []


def test_the_old_shape_is_converted_on_write() -> None:
    """``targets`` (before the pool layer): nodeNames become a hostname requirement, the
    selector matchLabels, minReady moves up; nothing of ``targets`` is kept."""
    obj = prefetch(targets={"nodeNames": ["n2", "n1"], "nodeSelector": {"pool": "a"},
                            "minReady": 1})
    obj = copy.deepcopy(obj)
    defaults.apply_defaults("ModelPrefetch", obj)
    assert _chain().admit(strategy.Write("CREATE", resources.MODEL_PREFETCH, obj)) == []
    assert "targets" not in obj["spec"]
    assert obj["spec"]["placement"] == {"nodeSelector": {
        "matchLabels": {"pool": "a"},
        "matchExpressions": [{"key": keys.HOSTNAME, "operator": "In", "values": ["n1", "n2"]}]}}
    assert obj["spec"]["minReady"] == 1


def test_a_target_set_that_matches_nothing_is_not_refused() -> None:
    assert create(prefetch(placement={"nodeSelector": {"matchLabels": {"no-such": "label"}}},
                           minReady=9)) == []


def test_the_artifact_and_a_binding_once_set_are_fixed_but_placement_may_change() -> None:
    old = prefetch()
    defaults.apply_defaults("ModelPrefetch", old)
    moved = copy.deepcopy(old)
    moved["spec"]["placement"] = {"nodeSelector": {"matchLabels": {"pool": "a"}}}
    moved["spec"]["retention"] = {"pinned": False}
    assert _chain().admit(strategy.Write("UPDATE", resources.MODEL_PREFETCH, moved, old)) == []
    other = copy.deepcopy(old)
    other["spec"]["artifactRef"] = {"name": "llama"}
    (error,) = _chain().admit(strategy.Write("UPDATE", resources.MODEL_PREFETCH, other, old))
    assert (error.field, error.type) == ("spec.artifactRef", "FieldValueForbidden")
    assert "create a new ModelPrefetch" in error.message
    rebound = copy.deepcopy(old)
    rebound["spec"]["bindingRef"] = {"name": "elsewhere"}
    (error,) = _chain().admit(strategy.Write("UPDATE", resources.MODEL_PREFETCH, rebound, old))
    assert (error.field, error.type) == ("spec.bindingRef", "FieldValueForbidden")
    # a prefetch stored before the pool layer has none, and may be given one
    legacy = copy.deepcopy(old)
    del legacy["spec"]["bindingRef"]
    assert _chain().admit(strategy.Write("UPDATE", resources.MODEL_PREFETCH, old, legacy)) == []


def test_the_status_path_is_not_judged_by_the_spec_rules() -> None:
    old = prefetch(placement={"instanceTypes": ["x"]})  # a stored spec the rules refuse now
    new = {**copy.deepcopy(old), "status": {"desiredNodes": 0}}
    write = strategy.Write("UPDATE", resources.MODEL_PREFETCH, new, old, subresource="status")
    assert [e.field for e in _chain().admit(write)] == []
