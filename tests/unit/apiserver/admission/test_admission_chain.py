"""The admission chain: one ordered list of named rules (writers, then mutating, then
validating), cluster facts read through one object, and no second home for admission."""

from __future__ import annotations

import ast
import copy
import pathlib
from collections.abc import Sequence
from typing import Any

import pytest

from apiserver import errors
from apiserver.admission import chain, facts
from apiserver.auth import user as users
from apiserver.auth import worker as workers
from apiserver.registry import strategy
from devkit import admitting
from openapi import fields, resources

REPO = pathlib.Path(__file__).resolve().parents[4]
IMAGE = "registry.example.com/team/qwen@sha256:" + "0123456789abcdef" * 4


def _store(high: int, low: int) -> dict[str, Any]:
    return {"apiVersion": resources.GROUP_VERSION, "kind": resources.NODE_MODEL_STORE.kind,
            "metadata": {"name": "node-a"},
            "spec": {"watermarks": {"highPercent": high, "lowPercent": low}}}


def _image() -> dict[str, Any]:
    return {"apiVersion": resources.GROUP_VERSION, "kind": resources.MODEL_ARTIFACT.kind,
            "metadata": {"name": "a", "namespace": "team-a"},
            "spec": {"source": {"image": {"reference": IMAGE}}}}


def test_the_rules_run_in_one_documented_order() -> None:
    assert admitting.standalone().names == (
        "WorkerWritesStatus", "NodePluginWritesNodeStoreStatus", "UpgradePrefetchTargets",
        "ComputedNodeCounts",
        "Schema", "ArtifactSource", "ImageVolumeFloor", "ImmutableArtifactSpec",
        "NodeStoreWatermarks", "PrefetchSpec", "PrefetchArtifact", "ImmutablePrefetchArtifact",
        "PrefetchGrant", "ModelStoreSpec", "ModelStoreBindingSpec", "FrozenModelStoreBinding",
        "AnchorGrant")
    docs = (REPO / "docs" / "architecture.md").read_text()
    for name in admitting.standalone().names:
        assert f"`{name}`" in docs, f"docs/architecture.md does not list the rule {name}"


class _Recorder:
    def __init__(self, name: str, seen: list[str]) -> None:
        self.name = name
        self.seen = seen

    def handles(self, write: strategy.Write) -> bool:
        return True

    def mutate(self, write: strategy.Write) -> None:
        self.seen.append(self.name)
        write.obj["mutated"] = True

    def validate(self, write: strategy.Write,
                 found: Sequence[fields.FieldError]) -> list[fields.FieldError]:
        self.seen.append(f"{self.name} saw mutated={write.obj.get('mutated')} found={len(found)}")
        return [fields.invalid(self.name, 1, "refused")]


def test_mutating_rules_run_before_validating_ones_and_each_sees_what_came_before() -> None:
    seen: list[str] = []
    cluster = facts.standalone(admitting.WORKER, admitting.PLUGIN)
    ordered = chain.Chain(cluster, writers=[],
                          validating=[_Recorder("v1", seen), _Recorder("v2", seen)],
                          mutating=[_Recorder("m", seen)])
    problems = ordered.admit(strategy.Write("CREATE", resources.MODEL_ARTIFACT, {}))
    assert seen == ["m", "v1 saw mutated=True found=0", "v2 saw mutated=True found=1"]
    assert [p.field for p in problems] == ["v1", "v2"]


def test_the_version_floor_is_read_from_the_facts_at_each_create() -> None:
    cluster = facts.standalone(admitting.WORKER, admitting.PLUGIN)
    admission = chain.build(cluster)
    write = strategy.Write("CREATE", resources.MODEL_ARTIFACT, _image())
    assert admission.admit(write) == []
    cluster.kubernetes_version = lambda: (1, 34)
    [refused] = admission.admit(write)
    assert (refused.field, refused.type) == ("spec.source.image", "FieldValueForbidden")
    assert "is 1.34" in refused.message


async def test_the_worker_learned_later_reaches_the_writers_through_the_facts() -> None:
    cluster = facts.ClusterFacts(worker=workers.UNKNOWN_YET, plugin=admitting.PLUGIN)
    admission = chain.build(cluster)
    worker = users.UserInfo(admitting.WORKER)
    with pytest.raises(errors.Forbidden, match="worker identity is unknown"):
        await admission.check(resources.MODEL_ARTIFACT, worker, "a")
    cluster.worker = workers.WorkerIdentity.configured(admitting.WORKER)
    await admission.check(resources.MODEL_ARTIFACT, worker, "a")
    # only status writes pass the writers' stage; the main resource is RBAC's alone
    await admission.check(resources.MODEL_ARTIFACT, users.UserInfo("alice"), "a",
                          subresource="")


@pytest.mark.parametrize("subresource", ["", "status"])
def test_the_watermark_rule_runs_on_every_node_store_write(subresource: str) -> None:
    admission = admitting.standalone()
    bad, good = _store(50, 50), _store(50, 49)
    [create] = admission.admit(strategy.Write("CREATE", resources.NODE_MODEL_STORE, bad))
    [update] = admission.admit(strategy.Write("UPDATE", resources.NODE_MODEL_STORE,
                                              copy.deepcopy(bad), good, subresource))
    for refused in (create, update):
        assert (refused.field, refused.message) == (
            "spec.watermarks.lowPercent", "Invalid value: 50: must be below highPercent (50)")
    assert admission.admit(strategy.Write("CREATE", resources.NODE_MODEL_STORE, good)) == []


# -- one home -------------------------------------------------------------------------------

ADMISSION = REPO / "apiserver" / "admission"
KIND_NAMES = {f"{table}.{kind}" for table in ("resources", "contract", "table")
              for kind in ("MODEL_ARTIFACT.kind", "NODE_MODEL_STORE.kind")}


def _product(*packages: str) -> list[pathlib.Path]:
    return [path for package in packages for path in sorted((REPO / package).rglob("*.py"))
            if "/gen/" not in str(path) and ADMISSION not in path.parents]


def _admits(node: ast.AST) -> bool:
    """A call of the schema validation, or a mention of the image-volume floor."""
    if isinstance(node, ast.Call):
        return ast.unparse(node.func) == "validation.validate"
    return isinstance(node, ast.Name | ast.Attribute) and (
        ast.unparse(node).endswith("IMAGE_VOLUME_FLOOR"))


def test_no_second_home_for_admission() -> None:
    """Outside ``apiserver/admission`` nothing in the server dispatches on a kind to refuse a
    write, runs the schema validation of an object, or knows the image-volume floor; openapi's
    validation is the schema's walk only."""
    scanned = _product("apiserver", "openapi")
    assert len(scanned) > 100
    found: list[str] = []
    for path in scanned:
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(REPO)
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                sides = {ast.unparse(side) for side in (node.left, *node.comparators)}
                if sides & KIND_NAMES:
                    found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
            elif _admits(node):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    assert found == [], "admission lives in apiserver/admission:\n" + "\n".join(found)
    validation = (REPO / "openapi" / "validation.py").read_text()
    assert "NodeModelStore" not in validation and "ModelArtifact" not in validation
