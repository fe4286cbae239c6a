"""The field manager against a table of kube-apiserver's behaviour (structured-merge-diff's rules
as kube 1.27-1.36 answer them): field sets by list and map type, FieldsV1, Update and Apply
ownership, conflicts and their messages, removal of given-up fields, caps and decoding."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver import errors
from apiserver.registry.fieldmanager import fieldsets, managed, merge
from openapi import schema as schemas

MA, NMS = "ModelArtifact", "NodeModelStore"
GV = "worker.gpustack.ai/v1"
D1, D2 = "sha256:" + "1" * 64, "sha256:" + "2" * 64


def artifact(**labels: str) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": GV, "kind": MA,
        "metadata": {"name": "q", "namespace": "a", "uid": "u", "resourceVersion": "5"},
        "spec": {"source": {"huggingFace": {"repository": "o/n"}}},
    }
    if labels:
        obj["metadata"]["labels"] = dict(labels)
    return obj


def store(*pinned: str, conditions: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": GV, "kind": NMS, "metadata": {"name": "n"},
                           "spec": {"pinned": list(pinned)}}
    if conditions:
        obj["status"] = {"conditions": [{"type": t, "status": s} for t, s in conditions]}
    return obj


def paths(tree: dict[str, Any]) -> set[fieldsets.Path]:
    return fieldsets.decode(tree)


# Field sets follow the schema's list and map types ---------------------------------------------

FIELD_SETS = [
    pytest.param(
        MA, artifact(app="x"), "",
        {"f:metadata": {"f:labels": {"f:app": {}}},
         "f:spec": {"f:source": {"f:huggingFace": {"f:repository": {}}}}},
        id="granular-map-and-struct-leaves;server-metadata-owned-by-nobody"),
    pytest.param(
        MA, {**artifact(), "spec": {"source": {"huggingFace": {"repository": "o/n"}},
                                    "allowPatterns": ["*.json", "*.bin"]}}, "",
        {"f:spec": {"f:allowPatterns": {},
                    "f:source": {"f:huggingFace": {"f:repository": {}}}}},
        id="atomic-list-is-one-leaf"),
    pytest.param(
        NMS, store(D1, D2), "",
        {"f:spec": {"f:pinned": {f'v:"{D1}"': {}, f'v:"{D2}"': {}}}},
        id="set-list-by-value"),
    pytest.param(
        NMS, store(conditions=(("Ready", "True"),)), "status",
        {"f:status": {"f:conditions": {'k:{"type":"Ready"}': {
            ".": {}, "f:status": {}, "f:type": {}}}}},
        id="map-list-item-by-key-with-its-fields;status-subresource-owns-only-status"),
    pytest.param(
        NMS, store(D1, conditions=(("Ready", "True"),)), "",
        {"f:spec": {"f:pinned": {f'v:"{D1}"': {}}}},
        id="main-resource-never-owns-status"),
]


@pytest.mark.parametrize(("kind", "obj", "subresource", "expected"), FIELD_SETS)
def test_field_sets(kind: str, obj: dict[str, Any], subresource: str,
                    expected: dict[str, Any]) -> None:
    found = fieldsets.of(schemas.for_kind(kind), obj, subresource)
    assert fieldsets.encode(found) == expected
    assert fieldsets.decode(expected) == set(found)


RENDERED = [
    (("f:spec", "f:source", "f:huggingFace", "f:repository"),
     ".spec.source.huggingFace.repository"),
    (("f:status", "f:conditions", 'k:{"type":"Ready"}', "f:status"),
     '.status.conditions[type="Ready"].status'),
    (("f:spec", "f:pinned", f'v:"{D1}"'), f'.spec.pinned[="{D1}"]'),
    (("f:spec", "i:3"), ".spec[3]"),
]


@pytest.mark.parametrize(("path", "text"), RENDERED)
def test_paths_render_as_kube_messages_do(path: fieldsets.Path, text: str) -> None:
    assert fieldsets.render(path) == text


@pytest.mark.parametrize("tree", [
    "x", {"f:spec": "x"}, {"spec": {}}, {"k:[1]": {}}, {"k:{": {}}, {"i:x": {}},
    {"f:spec": {".": {"f:x": {}}}}, {".": {}},
], ids=["not-object", "leaf-not-object", "no-prefix", "key-not-object", "key-not-json",
        "index-not-digits", "dot-not-empty", "dot-at-root"])
def test_fieldsv1_that_is_not_a_set_is_refused(tree: Any) -> None:
    with pytest.raises(ValueError):
        fieldsets.decode(tree)


def test_fieldsv1_nesting_is_bounded() -> None:
    tree: dict[str, Any] = {}
    node = tree
    for _ in range(fieldsets.MAX_DEPTH + 2):
        node["f:x"] = {}
        node = node["f:x"]
    with pytest.raises(ValueError, match="deeper"):
        fieldsets.decode(tree)


# Update: the writer takes every field it added or changed ---------------------------------------


def _update(entries: list[managed.Entry], old: Any, new: Any, manager: str,
            subresource: str = "", kind: str = MA, now: str = "T2") -> list[managed.Entry]:
    return managed.update(kind, entries, old, new, manager=manager, subresource=subresource,
                          api_version=GV, now=now)


def test_create_gives_the_creator_everything_it_set() -> None:
    [entry] = _update([], {}, artifact(app="x"), "kubectl-create", now="T1")
    assert (entry.manager, entry.operation, entry.time) == ("kubectl-create", "Update", "T1")
    assert managed.encode([entry])[0]["fieldsV1"]["f:metadata"] == {"f:labels": {"f:app": {}}}


def test_update_takes_changed_fields_from_everyone_else() -> None:
    created = _update([], {}, artifact(app="x", team="a"), "creator", now="T1")
    after = _update(created, artifact(app="x", team="a"), artifact(app="y", team="a"), "editor")
    by = {e.manager: e for e in after}
    assert ("f:metadata", "f:labels", "f:app") not in by["creator"].fields
    assert ("f:metadata", "f:labels", "f:team") in by["creator"].fields
    assert by["editor"].fields == {("f:metadata", "f:labels", "f:app")}
    assert by["creator"].time == "T1"  # only the writer's time moves


def test_update_that_changes_nothing_changes_no_entry() -> None:
    created = _update([], {}, artifact(app="x"), "creator", now="T1")
    same = _update(created, artifact(app="x"), artifact(app="x"), "creator", now="T9")
    assert managed.encode(same) == managed.encode(created)
    assert _update(created, artifact(app="x"), artifact(app="x"), "idle") == created


def test_removed_fields_leave_every_owner_and_empty_entries_go() -> None:
    created = _update([], {}, artifact(app="x"), "creator")
    labelled = _update(created, artifact(app="x"), artifact(app="x", t="1"), "labeller")
    gone = _update(labelled, artifact(app="x", t="1"), artifact(app="x"), "creator")
    assert [e.manager for e in gone] == ["creator"]


def test_update_managers_are_capped_into_ancient_changes() -> None:
    entries: list[managed.Entry] = []
    obj = artifact()
    for index in range(managed.MAX_UPDATE_MANAGERS + 2):
        new = copy.deepcopy(obj)
        new["metadata"].setdefault("labels", {})[f"l{index}"] = "v"
        entries = _update(entries, obj, new, f"m{index:02}", now=f"T{index:02}")
        obj = new
    names = sorted(e.manager for e in entries)
    assert len(entries) == managed.MAX_UPDATE_MANAGERS
    assert names[0] == managed.ANCIENT and "m00" not in names and "m11" in names


# Apply: exactly the configuration's fields, conflicts, sharing, removal ------------------------


def _apply(entries: list[managed.Entry], live: Any, config: dict[str, Any], manager: str, *,
           force: bool = False, kind: str = MA, subresource: str = "",
           now: str = "T5") -> tuple[dict[str, Any], list[managed.Entry]]:
    return managed.apply(kind, entries, live, config, manager=manager, subresource=subresource,
                         force=force, api_version=GV, now=now)


def _config(**labels: str) -> dict[str, Any]:
    obj = artifact(**labels)
    obj["metadata"] = {"name": "q", **({"labels": labels} if labels else {})}
    return obj


def test_apply_create_owns_only_the_configuration() -> None:
    obj, [entry] = _apply([], None, _config(app="x"), "kubectl")
    assert (entry.manager, entry.operation) == ("kubectl", "Apply")
    assert entry.fields == set(fieldsets.of(schemas.for_kind(MA), _config(app="x")))
    assert obj["metadata"]["labels"] == {"app": "x"}


def test_reapply_is_a_no_op_and_keeps_the_time() -> None:
    live, entries = _apply([], None, _config(app="x"), "kubectl", now="T1")
    again, after = _apply(entries, live, _config(app="x"), "kubectl", now="T9")
    assert again == live and managed.encode(after) == managed.encode(entries)


def test_conflict_with_an_update_manager_is_kubes_409() -> None:
    entries = _update([], {}, artifact(app="x"), "kubectl-client-side-apply")
    with pytest.raises(errors.Conflict) as caught:
        _apply(entries, artifact(app="x"), _config(app="y"), "kubectl")
    assert caught.value.message == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using'
        f" {GV}: .metadata.labels.app")
    assert caught.value.details == {"causes": [{
        "reason": "FieldManagerConflict",
        "message": f'conflict with "kubectl-client-side-apply" using {GV}',
        "field": ".metadata.labels.app"}]}


def test_conflicts_with_appliers_and_subresources_are_grouped_by_manager() -> None:
    _, alpha = _apply([], None, _config(a="1", b="1"), "alpha")
    _, both = _apply(alpha, artifact(a="1", b="1"), _config(a="1", b="1"), "beta")
    status = managed.Entry("worker", "Update", GV, "T1", "status", {("f:metadata", "f:labels",
                                                                    "f:a")})
    with pytest.raises(errors.Conflict) as caught:
        _apply([*both, status], artifact(a="1", b="1"), _config(a="2", b="2"), "gamma")
    assert caught.value.message == (
        'Apply failed with 5 conflicts: conflicts with "alpha":\n- .metadata.labels.a\n'
        '- .metadata.labels.b\nconflicts with "beta":\n- .metadata.labels.a\n'
        '- .metadata.labels.b\nconflicts with "worker" with subresource "status" using'
        f" {GV}:\n- .metadata.labels.a")


def test_the_same_value_is_shared_not_a_conflict() -> None:
    live, entries = _apply([], None, _config(app="x"), "alpha")
    _, shared = _apply(entries, live, _config(app="x"), "beta")
    assert all(("f:metadata", "f:labels", "f:app") in e.fields for e in shared)


def test_force_moves_the_fields() -> None:
    live, entries = _apply([], None, _config(app="x", keep="k"), "alpha")
    obj, forced = _apply(entries, live, _config(app="y"), "beta", force=True)
    by = {e.manager: e for e in forced}
    assert ("f:metadata", "f:labels", "f:app") not in by["alpha"].fields
    assert ("f:metadata", "f:labels", "f:app") in by["beta"].fields
    assert obj["metadata"]["labels"] == {"app": "y", "keep": "k"}


def test_fields_given_up_are_removed_unless_another_manager_owns_them() -> None:
    live, entries = _apply([], None, _config(a="1", b="1"), "alpha")
    live, entries = _apply(entries, live, _config(b="1"), "beta")
    obj, _ = _apply(entries, live, _config(), "alpha")
    assert obj["metadata"]["labels"] == {"b": "1"}


def test_set_lists_union_and_each_applier_removes_only_its_own_values() -> None:
    live, entries = _apply([], None, store(D1), "alpha", kind=NMS)
    live, entries = _apply(entries, live, store(D2), "beta", kind=NMS)
    assert live["spec"]["pinned"] == [D1, D2]
    obj, _ = _apply(entries, live, store(), "alpha", kind=NMS)
    assert obj["spec"]["pinned"] == [D2]


def test_map_lists_merge_items_by_key() -> None:
    live = store(conditions=(("Ready", "True"), ("CapacityLow", "False")))
    config = {"apiVersion": GV, "kind": NMS, "metadata": {"name": "n"},
              "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    obj, [entry] = _apply([], live, config, "plugin", kind=NMS, subresource="status")
    assert obj["status"]["conditions"] == [{"type": "Ready", "status": "False"},
                                           {"type": "CapacityLow", "status": "False"}]
    assert entry.subresource == "status"
    assert ("f:status", "f:conditions", 'k:{"type":"Ready"}') in entry.fields


def test_merge_replaces_atomic_lists_whole() -> None:
    live = {"spec": {"allowPatterns": ["a", "b"]}}
    merged = merge.merge(schemas.for_kind(MA), live, {"spec": {"allowPatterns": ["c"]}})
    assert merged["spec"]["allowPatterns"] == ["c"] and live["spec"]["allowPatterns"] == ["a", "b"]


def test_removal_takes_emptied_parents_away() -> None:
    obj = {"spec": {"source": {"huggingFace": {"repository": "o/n",
                                               "secretRef": {"name": "s"}}}}}
    merge.remove(obj, [("f:spec", "f:source", "f:huggingFace", "f:secretRef", "f:name")])
    assert obj == {"spec": {"source": {"huggingFace": {"repository": "o/n"}}}}


# Entries on the wire ---------------------------------------------------------------------------


def test_entries_encode_in_kubes_order_and_shape() -> None:
    update = managed.Entry("b", "Update", GV, "T1", "", {("f:spec",)})
    status = managed.Entry("a", "Update", GV, "T1", "status", {("f:status",)})
    applied = managed.Entry("z", "Apply", GV, "T3", "", {("f:metadata",)})
    empty = managed.Entry("e", "Update", GV, "T0", "", set())
    encoded = managed.encode([update, status, empty, applied])
    assert [(e["manager"], e["operation"]) for e in encoded] == [
        ("z", "Apply"), ("a", "Update"), ("b", "Update")]
    assert encoded[1] == {"manager": "a", "operation": "Update", "apiVersion": GV,
                          "time": "T1", "fieldsType": "FieldsV1",
                          "fieldsV1": {"f:status": {}}, "subresource": "status"}


def test_decode_merges_duplicates_and_refuses_what_kube_cannot_read() -> None:
    raw = [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {}}},
           {"manager": "m", "operation": "Update", "fieldsV1": {"f:metadata": {}}}]
    [entry] = managed.decode(raw)
    assert entry.fields == {("f:spec",), ("f:metadata",)}
    for bad in ("x", ["x"], [{"operation": "Delete"}],
                [{"operation": "Update", "fieldsType": "FieldsV2"}],
                [{"operation": "Update", "manager": 3}],
                [{"operation": "Apply", "fieldsV1": {"f:spec": []}}]):
        with pytest.raises(ValueError):
            managed.decode(bad)
    assert managed.decode_or_empty([{"operation": "Delete"}]) == []
