"""Every kind has a view (``openapi/kinds/<kind>.py``) and every view is its schema's shape: the
same keys at every path, required where the schema requires, ``Literal`` where it has an enum,
``int``/``str``/``bool``/lists/maps where it says integer/string/boolean/array/object. And the
readers answer as the docs say for an object that is missing what they read."""

from __future__ import annotations

import ast
import importlib
import pathlib
import pkgutil
import types
import typing
from typing import Any, get_args, get_origin, get_type_hints

import pytest

from nodeplugin.materialize import interface
from openapi import anchors, kinds, plugin, reasons, resources, schema, states, wire
from openapi.kinds import modelartifact, modelprefetch, nodemodelstore, progress

MODULES = [importlib.import_module(f"openapi.kinds.{info.name}")
           for info in pkgutil.iter_modules(kinds.__path__)]
SCALARS = {"string": str, "integer": int, "boolean": bool}


def _is_typeddict(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, dict) and hasattr(hint, "__total__")


def _body(node: schema.Schema) -> schema.Schema:
    return schema.resolve(node)


def _mismatches(hint: Any, node: schema.Schema, path: str) -> list[str]:
    """Where ``hint`` (a view's type) and ``node`` (the schema) disagree, one line each."""
    body = _body(node)
    nullable = bool(node.get("nullable") or body.get("nullable"))
    if get_origin(hint) in (typing.Union, types.UnionType):
        members = [arg for arg in get_args(hint) if arg is not type(None)]
        if not nullable or len(members) != 1:
            return [f"{path}: {hint} but the schema is not a nullable {body.get('type')}"]
        hint = members[0]
    elif nullable:
        return [f"{path}: nullable in the schema, {hint} in the view"]
    kind = body.get("type")
    if _is_typeddict(hint):
        if kind != "object" or "properties" not in body:
            return [f"{path}: a TypedDict, but the schema's type is {kind}"]
        return _object(hint, body, path)
    if get_origin(hint) is list:
        if kind != "array":
            return [f"{path}: a list, but the schema's type is {kind}"]
        return _mismatches(get_args(hint)[0], body["items"], f"{path}[]")
    if hint == wire.Obj:
        return [] if kind == "object" else [f"{path}: an object in the view, {kind} in the schema"]
    if get_origin(hint) is dict:
        if kind != "object" or "additionalProperties" not in body:
            return [f"{path}: a map, but the schema is not an object of additionalProperties"]
        return _mismatches(get_args(hint)[1], body["additionalProperties"], f"{path}{{}}")
    if get_origin(hint) is typing.Literal:
        values = set(get_args(hint))
        if set(body.get("enum") or ()) != values:
            return [f"{path}: Literal{sorted(values)} but the schema's enum is "
                    f"{body.get('enum')}"]
        return [] if kind == "string" else [f"{path}: a Literal of a {kind}"]
    if "enum" in body and not path.endswith(".conditions[].type"):
        # Only a condition's type is a plain str: wire.Condition serves every kind, whose
        # CONDITIONS the module names (checked below).
        return [f"{path}: the schema has an enum {body['enum']}, the view a {hint}"]
    wanted = SCALARS.get(str(kind))
    return [] if wanted is hint else [f"{path}: {hint} in the view, {kind} in the schema"]


def _object(view: Any, body: schema.Schema, path: str) -> list[str]:
    hints = get_type_hints(view)
    properties, required = body["properties"], set(body.get("required") or ())
    found: list[str] = []
    if set(hints) != set(properties):
        found.append(f"{path}: the view has {sorted(set(hints) - set(properties))} more and "
                     f"{sorted(set(properties) - set(hints))} fewer keys than the schema")
    if set(view.__required_keys__) != required:
        found.append(f"{path}: required {sorted(view.__required_keys__)} in the view, "
                     f"{sorted(required)} in the schema")
    for key in sorted(set(hints) & set(properties)):
        found += _mismatches(hints[key], properties[key], f"{path}.{key}")
    return found


def test_every_kind_has_a_view() -> None:
    assert {module.KIND for module in MODULES} == set(resources.BY_KIND), (
        "add openapi/kinds/<kind>.py (KIND, VIEW, its readers) for every kind the group serves")
    assert len(MODULES) == len(resources.BY_KIND)


def test_view_matches_schema() -> None:
    assert len(MODULES) >= 4
    for module in MODULES:
        problems = _object(module.VIEW, schema.KINDS[module.KIND], module.KIND)
        assert problems == [], "\n".join(problems)
        conditions = schema.KINDS[module.KIND]["properties"].get("status", {}).get(
            "properties", {}).get("conditions")
        declared = conditions["items"]["properties"]["type"]["enum"] if conditions else []
        assert tuple(declared) == module.CONDITIONS


def test_the_check_sees_a_drift() -> None:
    class Drifted(modelprefetch.Retention, total=False):
        extra: int

    body = schema.MODEL_PREFETCH_SPEC["properties"]["retention"]
    assert _object(Drifted, body, "retention") == [
        "retention: the view has ['extra'] more and [] fewer keys than the schema"]
    assert _mismatches(typing.Literal["Hub"], {"type": "string", "enum": ["Hub", "Peer"]}, "s")
    assert _mismatches(str, {"type": "integer"}, "n")
    assert _object(wire.Condition, {"type": "object", "properties": {
        "type": {"type": "string"}, "status": {"type": "string"}}, "required": ["type"]},
        "c") != []


def test_the_vocabularies_are_the_schemas() -> None:
    models = schema.NODE_MODEL_STORE_STATUS["properties"]["models"]["items"]["properties"]
    assert tuple(models["state"]["enum"]) == states.MODEL_STATES
    assert tuple(models["source"]["enum"]) == states.ORIGINS
    assert "nodes" not in schema.MODEL_PREFETCH_STATUS["properties"]  # counts, no node named
    expression = schema.MODEL_PREFETCH_SPEC["properties"]["placement"]["properties"][
        "nodeSelector"]["properties"]["matchExpressions"]["items"]["properties"]
    assert set(expression["operator"]["enum"]) == set(typing.get_args(modelprefetch.Operator))
    resolved = schema.MODEL_ARTIFACT_STATUS["properties"]["resolved"]["properties"]
    assert tuple(resolved["digestSource"]["enum"]) == anchors.DIGEST_SOURCES
    assert set(typing.get_args(reasons.FailureReasonWord)) == set(reasons.FAILURE_REASONS)
    assert {state.value for state in interface.State} == set(states.DELIVERY_STATES)
    answer = typing.get_type_hints(plugin.PrefetchAnswer)["state"]
    assert set(typing.get_args(answer)) == set(states.DELIVERY_STATES)
    assert set(reasons.HUB_REASONS) >= {reasons.ACCESS_DENIED, reasons.SOURCE_UNAVAILABLE}


def test_readers_of_an_empty_object() -> None:
    for empty in ({}, {"spec": None, "status": "x"}, {"status": {"resolved": []}}):
        assert modelartifact.manifest_digest(empty) == ""
        assert modelartifact.size_bytes(empty) is None
        assert modelartifact.source_kind(empty) == ""
        assert modelartifact.hub_digest(empty) == ("", modelartifact.NOT_RESOLVED)
        assert modelartifact.resolved_condition(empty) is None
        assert not modelartifact.is_resolved(empty)
        assert modelprefetch.pinned(empty) is False
        assert modelprefetch.node_selector(empty) is None
        assert modelprefetch.binding_name(empty) == ""
        assert not modelprefetch.has_targets(empty)
        assert modelprefetch.min_ready(empty) == 0
        assert nodemodelstore.models(empty) == []
        assert nodemodelstore.entry(empty, "sha256:x") is None
        assert nodemodelstore.peer_url(empty) == ""
        assert not nodemodelstore.ready(empty)
        assert progress.failure_reasons(empty) == []
        assert progress.downloading_percent(empty) is None


def test_readers_of_a_full_object() -> None:
    digest = "sha256:" + "a" * 64
    artifact = modelartifact.ModelArtifact(
        spec=modelartifact.ModelArtifactSpec(source=modelartifact.Source(
            huggingFace=modelartifact.HubSource(repository="o/n", revision="main",
                                                secretRef={"name": "tok"}))),
        status=modelartifact.ModelArtifactStatus(
            resolved=modelartifact.Resolved(manifestDigest=digest, sizeBytes=7,
                                            digestSource=anchors.DIGEST_FROM_ANCHOR),
            conditions=[wire.Condition(type=reasons.RESOLVED, status=wire.TRUE)]))
    assert modelartifact.source_kind(artifact) == "huggingFace"
    assert modelartifact.secret_name(artifact) == "tok"
    assert modelartifact.repository(artifact) == "o/n"
    assert modelartifact.hub_digest(artifact) == (digest, "")
    assert modelartifact.size_bytes(artifact) == 7
    assert modelartifact.anchored(artifact)
    assert modelartifact.is_resolved(artifact)
    claim = {"spec": {"source": {"persistentVolumeClaim": {"claimName": "c"}}}}
    assert modelartifact.hub_digest(claim) == ("", modelartifact.CLAIM_COUNTS_NOTHING)
    assert modelartifact.claim_name(claim) == "c" and modelartifact.secret_name(claim) == ""
    store = nodemodelstore.NodeModelStore(status=nodemodelstore.Status(models=[
        nodemodelstore.ModelEntry(digest=digest, state=states.READY, sizeBytes=7)]))
    assert nodemodelstore.holds(store, digest)
    entry = nodemodelstore.entry(store, digest)
    assert entry is not None and nodemodelstore.entry_size(entry) == 7
    prefetch = {"spec": {"retention": {"pinned": True}, "placement": {"nodeSelector": {}},
                         "bindingRef": {"name": "grant"}}}
    assert modelprefetch.pinned(prefetch) is True
    assert modelprefetch.node_selector(prefetch) == {}
    assert modelprefetch.binding_name(prefetch) == "grant"


@pytest.mark.parametrize(("selector", "labels", "held"), [
    (None, {}, True),
    ({}, {"a": "b"}, True),
    ({"matchLabels": {"pool": "a"}}, {"pool": "a", "x": "y"}, True),
    ({"matchLabels": {"pool": "a"}}, {"pool": "b"}, False),
    ({"matchExpressions": [{"key": "k", "operator": "In", "values": ["1", "2"]}]},
     {"k": "2"}, True),
    ({"matchExpressions": [{"key": "k", "operator": "In", "values": ["1"]}]}, {}, False),
    ({"matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["1"]}]}, {}, True),
    ({"matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["1"]}]},
     {"k": "1"}, False),
    ({"matchExpressions": [{"key": "k", "operator": "Exists"}]}, {"k": ""}, True),
    ({"matchExpressions": [{"key": "k", "operator": "DoesNotExist"}]}, {"k": ""}, False),
    ({"matchExpressions": [{"key": "k", "operator": "Near"}]}, {"k": ""}, False),
    ({"matchLabels": {"pool": "a"}, "matchExpressions": [
        {"key": "k", "operator": "Exists"}]}, {"pool": "a"}, False),
])
def test_a_label_selector_selects_as_kube_does(selector: Any, labels: dict[str, str],
                                               held: bool) -> None:
    assert modelprefetch.selects(selector, labels) is held


def test_the_old_shape_upgrades_and_the_new_one_is_left_alone() -> None:
    old: dict[str, Any] = {"metadata": {"name": "w"}, "spec": {
        "artifactRef": {"name": "q"}, "targets": {"nodeNames": ["b", "a", "a"], "minReady": 2}}}
    new = modelprefetch.upgraded(old)
    assert new["spec"] == {"artifactRef": {"name": "q"}, "minReady": 2, "placement": {
        "nodeSelector": {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a", "b"]}]}}}
    assert "targets" in old["spec"]  # a copy: the caller's object is left alone
    labels_only = modelprefetch.upgraded({"spec": {"targets": {"nodeSelector": {}}}})
    assert labels_only["spec"] == {"placement": {"nodeSelector": {}}}
    assert modelprefetch.upgraded(new) is new


CLIENT_FACING = ("wire", "states", "volume", "plugin", "keys", "install", "reasons", "sources",
                 "placement", "podvolumes",
                 "anchors", "resources", "kinds/__init__", "kinds/modelartifact",
                 "kinds/nodemodelstore", "kinds/modelprefetch", "kinds/progress")
NEWER_THAN_310 = {"Required", "NotRequired", "StrEnum", "UTC", "Self", "override",
                  "TypeAliasType", "ReadOnly"}


def test_the_views_run_on_python_310() -> None:
    """The installable client depends on these modules, and it supports Python 3.10: its syntax
    and none of the names 3.11 added (``typing.Required``, ``enum.StrEnum``, ``datetime.UTC``)."""
    root = pathlib.Path(kinds.__file__).resolve().parents[1]
    for name in CLIENT_FACING:
        path = root / f"{name}.py"
        tree = ast.parse(path.read_text(), str(path), feature_version=(3, 10))
        used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        used |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 for alias in node.names}
        assert not used & NEWER_THAN_310, f"{name}: {sorted(used & NEWER_THAN_310)}"
        imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.Import) for alias in node.names}
        imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom)}
        assert imported <= {"__future__", "collections", "typing", "enum", "dataclasses",
                            "openapi"}, f"{name} imports {sorted(imported)}"
