"""ModelPrefetch admission: the schema and the prefetch rules, each accepted and refused with its
field path; an existing claim or image artifact refused naming why, an unknown one admitted."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.admission import chain, facts
from apiserver.registry import strategy
from devkit import admitting
from openapi import defaults, fields, resources


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
    body: dict[str, Any] = {"artifactRef": {"name": "qwen"}, "targets": {"nodeNames": ["n1"]}}
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


@pytest.mark.parametrize("obj", [
    prefetch(),
    prefetch(targets={"nodeSelector": {}}),
    prefetch(targets={"nodeSelector": {"gpu.example.com/model": "h100", "pool": "a"},
                      "nodeNames": ["n1", "node.b"], "minReady": 1}),
    prefetch(retention={"pinned": False}),
    prefetch(retention={"pinned": True, "ttlAfterLastUse": "72h"}),
    prefetch(retention={"ttlAfterLastUse": "1h30m"}),
])
def test_accepted(obj: dict[str, Any]) -> None:
    assert create(obj) == []


@pytest.mark.parametrize(("obj", "field", "kind"), [
    ({**prefetch(), "spec": {"targets": {"nodeNames": ["n1"]}}}, "spec.artifactRef",
     "FieldValueRequired"),
    (prefetch(artifactRef={"name": "Not_A_Name"}), "spec.artifactRef.name", "FieldValueInvalid"),
    (prefetch(targets={}), "spec.targets", "FieldValueRequired"),
    (prefetch(targets={"nodeNames": []}), "spec.targets", "FieldValueRequired"),
    (prefetch(targets={"nodeNames": ["UPPER"]}), "spec.targets.nodeNames[0]",
     "FieldValueInvalid"),
    (prefetch(targets={"nodeNames": ["n1", "n1"]}), "spec.targets.nodeNames[1]",
     "FieldValueDuplicate"),
    (prefetch(targets={"nodeNames": [f"n{i}" for i in range(257)]}), "spec.targets.nodeNames",
     "FieldValueTooMany"),
    (prefetch(targets={"nodeSelector": {"bad key!": "x"}}), "spec.targets.nodeSelector[bad key!]",
     "FieldValueInvalid"),
    (prefetch(targets={"nodeSelector": {"pool": "-bad"}}), "spec.targets.nodeSelector[pool]",
     "FieldValueInvalid"),
    (prefetch(targets={"nodeSelector": {f"k{i}": "v" for i in range(65)}}),
     "spec.targets.nodeSelector", "FieldValueTooMany"),
    (prefetch(targets={"nodeNames": ["n1"], "minReady": -1}), "spec.targets.minReady",
     "FieldValueInvalid"),
    (prefetch(retention={"ttlAfterLastUse": "soon"}), "spec.retention.ttlAfterLastUse",
     "FieldValueInvalid"),
    (prefetch(retention={"ttlAfterLastUse": "30m"}), "spec.retention.ttlAfterLastUse",
     "FieldValueInvalid"),
    (prefetch(retention={"pinned": False, "ttlAfterLastUse": "2h"}),
     "spec.retention.ttlAfterLastUse", "FieldValueForbidden"),
])
def test_refused(obj: dict[str, Any], field: str, kind: str) -> None:
    assert (field, kind) in refusals(obj)


def test_defaults_pin_and_count_every_node() -> None:
    obj = prefetch()
    defaults.apply_defaults("ModelPrefetch", obj)
    assert obj["spec"]["retention"] == {"pinned": True}
    assert obj["spec"]["targets"]["minReady"] == 0


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


def test_a_target_set_that_matches_nothing_is_not_refused() -> None:
    assert create(prefetch(targets={"nodeSelector": {"no-such": "label"}, "minReady": 9})) == []


def test_the_artifact_is_fixed_but_targets_and_retention_may_change() -> None:
    old = prefetch()
    defaults.apply_defaults("ModelPrefetch", old)
    moved = copy.deepcopy(old)
    moved["spec"]["targets"] = {"nodeSelector": {"pool": "a"}, "minReady": 0}
    moved["spec"]["retention"] = {"pinned": False}
    assert _chain().admit(strategy.Write("UPDATE", resources.MODEL_PREFETCH, moved, old)) == []
    other = copy.deepcopy(old)
    other["spec"]["artifactRef"] = {"name": "llama"}
    (error,) = _chain().admit(strategy.Write("UPDATE", resources.MODEL_PREFETCH, other, old))
    assert (error.field, error.type) == ("spec.artifactRef", "FieldValueForbidden")
    assert "create a new ModelPrefetch" in error.message


def test_the_status_path_is_not_judged_by_the_spec_rules() -> None:
    old = prefetch(targets={})  # even a stored spec the rules would refuse now
    new = {**copy.deepcopy(old), "status": {"desiredNodes": 0}}
    write = strategy.Write("UPDATE", resources.MODEL_PREFETCH, new, old, subresource="status")
    assert [e.field for e in _chain().admit(write)] == []
