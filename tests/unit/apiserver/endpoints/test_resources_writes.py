"""HTTP writes on the resource routes: create, update, patch, delete and their refusals."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.unit.apiserver.endpoints.conftest import WORKER

BASE = "/apis/worker.gpustack.ai/v1"
ARTIFACTS = BASE + "/namespaces/a/modelartifacts"
MERGE = {"content-type": "application/merge-patch+json"}
JSON_PATCH = {"content-type": "application/json-patch+json"}


def artifact(name: str = "qwen", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
        "metadata": {"name": name},
        "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2-0.5B"}}},
    }
    body.update(extra)
    return body


async def _create(client: httpx.AsyncClient, name: str = "qwen") -> dict[str, Any]:
    response = await client.post(ARTIFACTS, json=artifact(name))
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def test_create_201_and_get(client: httpx.AsyncClient) -> None:
    created = await _create(client)
    got = await client.get(ARTIFACTS + "/qwen")
    assert got.status_code == 200 and got.json() == created
    assert got.headers["content-type"] == "application/json"


async def test_field_validation_warn_strict_ignore(client: httpx.AsyncClient) -> None:
    body = artifact("warned")
    body["spec"]["foo"] = 1
    warned = await client.post(ARTIFACTS, json=body)
    assert warned.status_code == 201
    assert warned.headers.get_list("warning") == ['299 - "unknown field \\"spec.foo\\""']
    assert "foo" not in warned.json()["spec"]
    body["metadata"]["name"] = "strict"
    strict = await client.post(ARTIFACTS, json=body, params={"fieldValidation": "Strict"})
    assert strict.status_code == 400
    assert strict.json()["message"] == 'strict decoding error: unknown field "spec.foo"'
    body["metadata"]["name"] = "ignored"
    ignored = await client.post(ARTIFACTS, json=body, params={"fieldValidation": "Ignore"})
    assert ignored.status_code == 201 and "warning" not in ignored.headers
    bad = await client.post(ARTIFACTS, json=body, params={"fieldValidation": "Loud"})
    assert bad.status_code == 422
    assert bad.json()["message"].startswith('CreateOptions.meta.k8s.io "" is invalid')


async def test_dry_run_all_only(client: httpx.AsyncClient) -> None:
    dry = await client.post(ARTIFACTS, json=artifact(), params={"dryRun": "All"})
    assert dry.status_code == 201
    assert (await client.get(ARTIFACTS + "/qwen")).status_code == 404
    bad = await client.post(ARTIFACTS, json=artifact(), params={"dryRun": "Some"})
    assert bad.status_code == 422 and bad.json()["reason"] == "Invalid"


async def test_dry_run_update_patch_and_delete_change_nothing(
        client: httpx.AsyncClient) -> None:
    created = await _create(client)
    created["metadata"]["labels"] = {"dry": "run"}
    put = await client.put(ARTIFACTS + "/qwen", json=created, params={"dryRun": "All"})
    assert put.status_code == 200 and put.json()["metadata"]["labels"] == {"dry": "run"}
    patched = await client.patch(ARTIFACTS + "/qwen", params={"dryRun": "All"}, headers=MERGE,
                                 content=b'{"metadata":{"labels":{"p":"1"}}}')
    assert patched.status_code == 200 and patched.json()["metadata"]["labels"] == {"p": "1"}
    deleted = await client.delete(ARTIFACTS + "/qwen", params={"dryRun": "All"})
    assert deleted.status_code == 200
    stored = (await client.get(ARTIFACTS + "/qwen")).json()
    assert "labels" not in stored["metadata"]
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_create_refusals(client: httpx.AsyncClient) -> None:
    wrong_ns = artifact()
    wrong_ns["metadata"]["namespace"] = "b"
    mismatch = await client.post(ARTIFACTS, json=wrong_ns)
    assert mismatch.status_code == 400
    assert mismatch.json()["message"] == (
        "the namespace of the provided object does not match the namespace sent on the request")
    invalid = await client.post(ARTIFACTS, json=artifact(spec={"source": {}}))
    assert invalid.status_code == 422
    body = invalid.json()
    assert body["details"]["kind"] == "ModelArtifact" and body["details"]["causes"]
    wrong_kind = await client.post(ARTIFACTS, json=artifact(kind="Pod"))
    assert wrong_kind.status_code == 400
    not_json = await client.post(ARTIFACTS, content=b"{", headers={"content-type":
                                                                   "application/json"})
    assert not_json.status_code == 400
    await _create(client)
    again = await client.post(ARTIFACTS, json=artifact())
    assert again.status_code == 409 and again.json()["reason"] == "AlreadyExists"


async def test_bodies_over_3_mib_are_413(client: httpx.AsyncClient) -> None:
    response = await client.post(ARTIFACTS, content=b" " * (3 * 1024 * 1024 + 1),
                                 headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["reason"] == "RequestEntityTooLarge"


async def test_put_semantics(client: httpx.AsyncClient) -> None:
    created = await _create(client)
    unversioned = artifact()
    empty = await client.put(ARTIFACTS + "/qwen", json=unversioned)
    assert empty.status_code == 422
    assert empty.json()["details"]["causes"][0]["field"] == "metadata.resourceVersion"
    created["metadata"]["labels"] = {"a": "b"}
    ok = await client.put(ARTIFACTS + "/qwen", json=created)
    assert ok.status_code == 200 and ok.json()["metadata"]["labels"] == {"a": "b"}
    stale = await client.put(ARTIFACTS + "/qwen", json=created)
    assert stale.status_code == 409 and stale.json()["reason"] == "Conflict"
    renamed = await client.put(ARTIFACTS + "/other", json=ok.json())
    assert renamed.status_code == 400
    assert renamed.json()["message"] == (
        "the name of the object (qwen) does not match the name on the URL (other)")
    versioned = artifact("nope", metadata={"name": "nope", "resourceVersion": "1"})
    missing = await client.put(ARTIFACTS + "/nope", json=versioned)
    assert missing.status_code == 404
    respec = ok.json()
    respec["spec"]["source"]["huggingFace"]["repository"] = "Qwen/Other"
    refused = await client.put(ARTIFACTS + "/qwen", json=respec)
    assert refused.status_code == 422 and refused.json()["details"]["causes"][0]["field"] == "spec"


async def test_merge_and_json_patch(client: httpx.AsyncClient) -> None:
    created = await _create(client)
    merged = await client.patch(ARTIFACTS + "/qwen", content=b'{"metadata":{"labels":{"a":"1"}}}',
                                headers=MERGE)
    assert merged.status_code == 200 and merged.json()["metadata"]["labels"] == {"a": "1"}
    removed = await client.patch(ARTIFACTS + "/qwen",
                                 content=b'{"metadata":{"labels":{"a":null}}}', headers=MERGE)
    assert removed.json()["metadata"].get("labels", {}) == {}
    stale = await client.patch(
        ARTIFACTS + "/qwen", headers=MERGE,
        content=b'{"metadata":{"resourceVersion":"%s","labels":{"b":"2"}}}'
        % created["metadata"]["resourceVersion"].encode())
    assert stale.status_code == 409
    patched = await client.patch(
        ARTIFACTS + "/qwen", headers=JSON_PATCH,
        content=b'[{"op":"add","path":"/metadata/annotations","value":{"x":"y"}}]')
    assert patched.status_code == 200 and patched.json()["metadata"]["annotations"] == {"x": "y"}
    failed = await client.patch(ARTIFACTS + "/qwen", headers=JSON_PATCH,
                                content=b'[{"op":"test","path":"/metadata/name","value":"z"}]')
    assert failed.status_code == 422
    malformed = await client.patch(ARTIFACTS + "/qwen", headers=JSON_PATCH, content=b'{"a":1}')
    assert malformed.status_code == 400
    missing = await client.patch(ARTIFACTS + "/nope", headers=MERGE, content=b"{}")
    assert missing.status_code == 404
    strict = await client.patch(ARTIFACTS + "/qwen", headers=MERGE, content=b'{"spec":{"x":1}}',
                                params={"fieldValidation": "Strict"})
    assert strict.status_code == 400 and "unknown field" in strict.json()["message"]


@pytest.mark.parametrize("media", ["application/strategic-merge-patch+json", "text/plain"])
async def test_other_patch_types_are_415(client: httpx.AsyncClient, media: str) -> None:
    await _create(client)
    response = await client.patch(ARTIFACTS + "/qwen", content=b"{}",
                                  headers={"content-type": media})
    assert response.status_code == 415
    assert response.json()["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")


async def test_delete_with_options_in_body_or_query(client: httpx.AsyncClient) -> None:
    created = await _create(client)
    uid = created["metadata"]["uid"]
    wrong = await client.request("DELETE", ARTIFACTS + "/qwen", json={
        "kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1",
        "preconditions": {"uid": "other"}})
    assert wrong.status_code == 409
    assert "Precondition failed: UID in precondition: other" in wrong.json()["message"]
    foreground = await client.request("DELETE", ARTIFACTS + "/qwen",
                                      params={"propagationPolicy": "Foreground"})
    assert foreground.status_code == 200
    assert foreground.json()["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert foreground.json()["metadata"]["deletionTimestamp"]
    cleared = await client.patch(ARTIFACTS + "/qwen", headers=MERGE,
                                 content=b'{"metadata":{"finalizers":null}}')
    assert cleared.status_code == 200
    assert (await client.get(ARTIFACTS + "/qwen")).status_code == 404

    await _create(client, "second")
    done = await client.request("DELETE", ARTIFACTS + "/second", json={
        "kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
    assert done.status_code == 200
    assert done.json()["status"] == "Success"
    assert done.json()["details"]["name"] == "second"
    assert done.json()["details"]["kind"] == "modelartifacts"
    assert uid != done.json()["details"]["uid"]
    bad = await client.request("DELETE", ARTIFACTS + "/x", json={"apiVersion": "apps/v1"})
    assert bad.status_code == 400


async def test_verbs_not_served_are_405(client: httpx.AsyncClient) -> None:
    assert (await client.delete(ARTIFACTS)).status_code == 405
    assert (await client.post(BASE + "/modelartifacts", json=artifact())).status_code == 405
    assert (await client.post(BASE + "/nodemodelstores", json={})).status_code == 405
    assert (await client.put(BASE + "/nodemodelstores/n", json={})).status_code == 405
    response = await client.patch(BASE + "/nodemodelstores/n", content=b"{}", headers=MERGE)
    assert response.status_code == 405 and response.json()["reason"] == "MethodNotAllowed"
    assert (await client.delete(BASE + "/nodemodelstores")).status_code == 405
    assert (await client.post(ARTIFACTS + "/x/progress")).status_code == 405


async def test_status_writes_are_for_the_worker_only(client: httpx.AsyncClient) -> None:
    created = await _create(client)
    created["status"] = {"observedGeneration": 1}
    refused = await client.put(ARTIFACTS + "/qwen/status", json=created)
    assert refused.status_code == 403
    assert "only the worker writes a ModelArtifact's status" in refused.json()["message"]
    written = await client.put(ARTIFACTS + "/qwen/status", json=created,
                               headers={"x-test-user": WORKER})
    assert written.status_code == 200 and written.json()["status"] == {"observedGeneration": 1}
    patched = await client.patch(ARTIFACTS + "/qwen/status",
                                 content=b'{"status":{"observedGeneration":2},'
                                         b'"metadata":{"labels":{"no":"pe"}}}',
                                 headers={**MERGE, "x-test-user": WORKER})
    assert patched.status_code == 200
    assert patched.json()["status"] == {"observedGeneration": 2}
    assert "labels" not in patched.json()["metadata"]
    read = await client.get(ARTIFACTS + "/qwen/status")
    assert read.status_code == 200 and read.json()["status"] == {"observedGeneration": 2}
