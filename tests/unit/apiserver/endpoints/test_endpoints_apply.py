"""Server-side apply and managedFields on the resource routes, as kube-apiserver answers them."""

from __future__ import annotations

from typing import Any

import httpx
import yaml

from tests.unit.apiserver.endpoints.conftest import WORKER

BASE = "/apis/worker.gpustack.ai/v1"
ARTIFACTS = BASE + "/namespaces/a/modelartifacts"
APPLY = {"content-type": "application/apply-patch+yaml"}
MERGE = {"content-type": "application/merge-patch+json"}
GV = "worker.gpustack.ai/v1"


def config(name: str = "qwen", **labels: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": GV, "kind": "ModelArtifact", "metadata": {"name": name},
        "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2-0.5B"}}},
    }
    if labels:
        body["metadata"]["labels"] = labels
    return body


async def _apply(client: httpx.AsyncClient, body: dict[str, Any], manager: str = "kubectl",
                 name: str = "qwen", **params: str) -> httpx.Response:
    query = {"fieldManager": manager, **params} if manager else dict(params)
    return await client.patch(f"{ARTIFACTS}/{name}", content=yaml.safe_dump(body).encode(),
                              headers=APPLY, params=query)


def _managers(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(e["manager"], e["operation"], e.get("subresource", ""))
            for e in obj["metadata"].get("managedFields", [])]


async def test_apply_creates_then_reapply_changes_nothing(client: httpx.AsyncClient) -> None:
    created = await _apply(client, config(app="a"))
    assert created.status_code == 201, created.text
    body = created.json()
    entry = body["metadata"]["managedFields"][0]
    assert set(entry) == {"manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1"}
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == ("kubectl", "Apply", GV)
    assert entry["fieldsV1"] == {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {"f:source": {"f:huggingFace": {"f:repository": {}}}}}
    assert body["spec"]["source"]["huggingFace"]["revision"] == "main"  # defaulted, not owned
    again = await _apply(client, config(app="a"))
    assert again.status_code == 200
    assert again.json()["metadata"]["resourceVersion"] == body["metadata"]["resourceVersion"]
    assert again.json() == body


async def test_apply_needs_a_field_manager_and_force_only_on_apply(
        client: httpx.AsyncClient) -> None:
    missing = await _apply(client, config(), manager="")
    assert missing.status_code == 422
    assert missing.json()["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for'
        " apply patch")
    assert missing.json()["details"]["causes"][0]["field"] == "fieldManager"
    await _apply(client, config())
    forced = await client.patch(ARTIFACTS + "/qwen", json={"metadata": {"labels": {"x": "1"}}},
                                headers=MERGE, params={"force": "true"})
    assert forced.status_code == 422
    assert "force: Forbidden: may not be specified for non-apply patch" in forced.json()["message"]


async def test_conflict_names_fields_and_manager_then_force_takes_over(
        client: httpx.AsyncClient) -> None:
    await _apply(client, config(team="a"), manager="alpha")
    patched = await client.patch(ARTIFACTS + "/qwen", headers=MERGE,
                                 json={"metadata": {"labels": {"team": "b"}}},
                                 params={"fieldManager": "editor"})
    assert patched.status_code == 200
    assert ("editor", "Update", "") in _managers(patched.json())
    conflict = await _apply(client, config(team="c"), manager="alpha")
    assert conflict.status_code == 409
    status = conflict.json()
    assert status["reason"] == "Conflict"
    assert status["message"] == ('Apply failed with 1 conflict: conflict with "editor" using'
                                 f" {GV}: .metadata.labels.team")
    assert status["details"] == {"causes": [{
        "reason": "FieldManagerConflict", "message": f'conflict with "editor" using {GV}',
        "field": ".metadata.labels.team"}]}
    forced = await _apply(client, config(team="c"), manager="alpha", force="true")
    assert forced.status_code == 200
    assert forced.json()["metadata"]["labels"] == {"team": "c"}
    assert _managers(forced.json()) == [("alpha", "Apply", "")]


async def test_two_appliers_share_equal_values_and_conflict_on_others(
        client: httpx.AsyncClient) -> None:
    await _apply(client, config(team="a", tier="1"), manager="alpha")
    shared = await _apply(client, config(team="a"), manager="beta")
    assert shared.status_code == 200
    assert [m for m, _, _ in _managers(shared.json())] == ["alpha", "beta"]
    conflict = await _apply(client, config(team="x", tier="2"), manager="beta")
    assert conflict.status_code == 409
    assert conflict.json()["message"] == (
        'Apply failed with 2 conflicts: conflicts with "alpha":\n- .metadata.labels.team\n'
        "- .metadata.labels.tier")


async def test_dropped_fields_are_removed_unless_someone_else_owns_them(
        client: httpx.AsyncClient) -> None:
    await _apply(client, config(team="a", tier="1"), manager="alpha")
    await _apply(client, config(tier="1"), manager="beta")
    dropped = await _apply(client, config(), manager="alpha")
    assert dropped.status_code == 200
    assert dropped.json()["metadata"]["labels"] == {"tier": "1"}


async def test_dry_run_apply_stores_nothing(client: httpx.AsyncClient) -> None:
    dry = await _apply(client, config(), dryRun="All")
    assert dry.status_code == 201
    assert dry.json()["metadata"]["managedFields"][0]["manager"] == "kubectl"
    assert (await client.get(ARTIFACTS + "/qwen")).status_code == 404
    await _apply(client, config())
    dry_change = await _apply(client, config(app="x"), dryRun="All")
    assert dry_change.json()["metadata"]["labels"] == {"app": "x"}
    assert "labels" not in (await client.get(ARTIFACTS + "/qwen")).json()["metadata"]


async def test_apply_refusals_are_400s_naming_the_problem(client: httpx.AsyncClient) -> None:
    wrong_version = await _apply(client, {**config(), "apiVersion": "v1"})
    assert wrong_version.status_code == 400
    assert wrong_version.json()["message"] == (
        f"Incorrect version specified in apply patch. Specified patch version: v1, expected: {GV}")
    body = config()
    body["metadata"]["managedFields"] = [{"manager": "x", "operation": "Apply"}]
    assert (await _apply(client, body)).json()["message"] == "metadata.managedFields must be nil"
    other = await _apply(client, config("other"))
    assert other.status_code == 400 and "does not match the name on the URL" in other.text
    not_yaml = await client.patch(ARTIFACTS + "/qwen", content=b"{a: [", headers=APPLY,
                                  params={"fieldManager": "m"})
    assert not_yaml.status_code == 400
    strict = config()
    strict["spec"]["surprise"] = 1
    refused = await _apply(client, strict, fieldValidation="Strict")
    assert refused.status_code == 400
    assert refused.json()["message"] == 'strict decoding error: unknown field "spec.surprise"'


async def test_updates_record_their_manager_or_the_user_agent(client: httpx.AsyncClient) -> None:
    created = await client.post(ARTIFACTS, json=config(), headers={"user-agent": "curl/8.5.0"})
    assert _managers(created.json()) == [("curl", "Update", "")]
    fields = created.json()["metadata"]["managedFields"][0]["fieldsV1"]
    assert fields["f:spec"]["f:source"]["f:huggingFace"] == {"f:repository": {}, "f:revision": {}}
    patched = await client.patch(ARTIFACTS + "/qwen", headers=MERGE,
                                 json={"metadata": {"labels": {"a": "1"}}},
                                 params={"fieldManager": "kubectl-label"})
    assert _managers(patched.json()) == [("curl", "Update", ""), ("kubectl-label", "Update", "")]
    same = await client.patch(ARTIFACTS + "/qwen", headers=MERGE,
                              json={"metadata": {"labels": {"a": "1"}}},
                              params={"fieldManager": "kubectl-label"})
    assert same.json() == patched.json()  # nothing changed: nothing written


async def test_clients_cannot_corrupt_managed_fields(client: httpx.AsyncClient) -> None:
    created = (await _apply(client, config(app="a"))).json()
    kept = created["metadata"]["managedFields"]
    garbage = dict(created)
    garbage["metadata"] = {**created["metadata"], "managedFields": [
        {"manager": "x", "operation": "Update", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:spec": "not a set"}}], "labels": {"app": "b"}}
    put = await client.put(ARTIFACTS + "/qwen", json=garbage, params={"fieldManager": "editor"})
    assert put.status_code == 200, put.text
    entries = put.json()["metadata"]["managedFields"]
    assert [e["manager"] for e in entries] == ["kubectl", "editor"]  # the stored ones, kept
    assert entries[0]["fieldsV1"]["f:spec"] == kept[0]["fieldsV1"]["f:spec"]
    reset = await client.patch(ARTIFACTS + "/qwen", headers=MERGE,
                               json={"metadata": {"managedFields": [{}]}})
    assert reset.status_code == 200
    assert "managedFields" not in reset.json()["metadata"]


async def test_status_writes_are_tracked_as_the_status_subresource(
        client: httpx.AsyncClient) -> None:
    await _apply(client, config())
    written = await client.patch(ARTIFACTS + "/qwen/status", headers={
        **MERGE, "x-test-user": WORKER, "user-agent": "model-manager-worker/0.1"},
        json={"status": {"observedGeneration": 1}})
    assert written.status_code == 200, written.text
    entries = written.json()["metadata"]["managedFields"]
    status_entry = entries[-1]
    assert (status_entry["manager"], status_entry["subresource"]) == (
        "model-manager-worker", "status")
    assert status_entry["fieldsV1"] == {"f:status": {"f:observedGeneration": {}}}
    assert all("f:status" not in e["fieldsV1"] for e in entries[:-1])
