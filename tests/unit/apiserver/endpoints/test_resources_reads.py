"""HTTP reads: list bodies, Table and PartialObjectMetadata views, negotiation, progress."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from apiserver.registry import build
from tests.unit.apiserver.endpoints.conftest import PLUGIN_ON, WORKER

BASE = "/apis/worker.gpustack.ai/v1"
ARTIFACTS = BASE + "/namespaces/a/modelartifacts"
TABLE = ("application/json;as=Table;v=v1;g=meta.k8s.io,"
         "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")
METADATA_LIST = ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;"
                 "g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;"
                 "g=meta.k8s.io;v=v1,application/json")
METADATA = METADATA_LIST.replace("MetadataList", "Metadata")


async def _seed(client: httpx.AsyncClient, *names: str, namespace: str = "a") -> None:
    for name in names:
        response = await client.post(
            f"{BASE}/namespaces/{namespace}/modelartifacts",
            json={"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
                  "metadata": {"name": name, "labels": {"n": name}},
                  "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2-0.5B"}}}})
        assert response.status_code == 201, response.text


async def test_list_body_and_pagination(client: httpx.AsyncClient) -> None:
    empty = (await client.get(ARTIFACTS)).json()
    assert empty["kind"] == "ModelArtifactList" and empty["items"] == []
    await _seed(client, "m1", "m2", "m3")
    await _seed(client, "m4", namespace="b")
    first = (await client.get(ARTIFACTS, params={"limit": "2"})).json()
    assert [i["metadata"]["name"] for i in first["items"]] == ["m1", "m2"]
    assert all(i["kind"] == "ModelArtifact" and i["apiVersion"] == "worker.gpustack.ai/v1"
               for i in first["items"])
    assert first["metadata"]["remainingItemCount"] == 1
    rest = (await client.get(ARTIFACTS, params={"limit": "2",
                                                "continue": first["metadata"]["continue"]})).json()
    assert [i["metadata"]["name"] for i in rest["items"]] == ["m3"]
    assert "continue" not in rest["metadata"]
    everywhere = (await client.get(BASE + "/modelartifacts")).json()
    assert len(everywhere["items"]) == 4
    selected = (await client.get(BASE + "/modelartifacts",
                                 params={"labelSelector": "n in (m2,m4)"})).json()
    assert [i["metadata"]["name"] for i in selected["items"]] == ["m2", "m4"]
    bad_field = await client.get(ARTIFACTS, params={"fieldSelector": "spec.x=1"})
    assert bad_field.status_code == 400
    bad_combo = await client.get(ARTIFACTS, params={"resourceVersionMatch": "Exact"})
    assert bad_combo.status_code == 422
    too_large = await client.get(ARTIFACTS, params={"resourceVersion": "999"})
    assert too_large.status_code == 504


async def test_table_rows_columns_and_include_object(client: httpx.AsyncClient) -> None:
    await _seed(client, "m1")
    listed = await client.get(ARTIFACTS, headers={"accept": TABLE})
    body = listed.json()
    assert listed.headers["content-type"] == "application/json"
    assert body["kind"] == "Table" and body["apiVersion"] == "meta.k8s.io/v1"
    assert body["columnDefinitions"][0]["name"] == "Name"
    assert any(c["priority"] == 1 for c in body["columnDefinitions"])
    [row] = body["rows"]
    assert row["cells"][0] == "m1"
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["namespace"] == "a"
    full = (await client.get(ARTIFACTS, headers={"accept": TABLE},
                             params={"includeObject": "Object"})).json()
    assert full["rows"][0]["object"]["kind"] == "ModelArtifact"
    bare = (await client.get(ARTIFACTS, headers={"accept": TABLE},
                             params={"includeObject": "None"})).json()
    assert bare["rows"][0]["object"] is None
    bad = await client.get(ARTIFACTS, headers={"accept": TABLE},
                           params={"includeObject": "Some"})
    assert bad.status_code == 400
    one = (await client.get(ARTIFACTS + "/m1", headers={
        "accept": "application/json;as=Table;v=v1beta1;g=meta.k8s.io"})).json()
    assert one["apiVersion"] == "meta.k8s.io/v1beta1" and len(one["rows"]) == 1


async def test_partial_object_metadata_views(client: httpx.AsyncClient) -> None:
    await _seed(client, "m1")
    listed = (await client.get(ARTIFACTS, headers={"accept": METADATA_LIST})).json()
    assert listed["kind"] == "PartialObjectMetadataList"
    assert listed["items"][0]["kind"] == "PartialObjectMetadata"
    assert "spec" not in listed["items"][0] and listed["metadata"]["resourceVersion"]
    one = (await client.get(ARTIFACTS + "/m1", headers={"accept": METADATA})).json()
    assert one["kind"] == "PartialObjectMetadata" and one["metadata"]["name"] == "m1"


@pytest.mark.parametrize(("accept", "status"), [
    ("application/vnd.kubernetes.protobuf", 406),
    ("application/yaml", 406),
    ("application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io", 406),
    ("*/*", 200),
    ("application/vnd.kubernetes.protobuf, */*", 200),
])
async def test_not_acceptable_only_when_nothing_fits(client: httpx.AsyncClient, accept: str,
                                                     status: int) -> None:
    await _seed(client, "m1")
    response = await client.get(ARTIFACTS + "/m1", headers={"accept": accept})
    assert response.status_code == status
    if status == 406:
        assert response.json()["reason"] == "NotAcceptable"


async def test_not_found_status(client: httpx.AsyncClient) -> None:
    response = await client.get(ARTIFACTS + "/nope")
    assert response.status_code == 404
    assert response.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'modelartifacts.worker.gpustack.ai "nope" not found', "reason": "NotFound",
        "code": 404,
        "details": {"name": "nope", "group": "worker.gpustack.ai", "kind": "modelartifacts"}}


async def test_progress_and_node_model_store_status(client: httpx.AsyncClient,
                                                    registry: build.Registry) -> None:
    await _seed(client, "m1")
    progress = (await client.get(ARTIFACTS + "/m1/progress")).json()
    assert progress["kind"] == "ModelArtifactProgress" and progress["reason"]
    assert (await client.get(ARTIFACTS + "/nope/progress")).status_code == 404

    await registry.nodemodelstores.create({"metadata": {"name": "node-1"}, "spec": {}})
    stores = await client.get(BASE + "/nodemodelstores")
    assert [i["metadata"]["name"] for i in stores.json()["items"]] == ["node-1"]
    current: dict[str, Any] = (await client.get(BASE + "/nodemodelstores/node-1/status")).json()
    current["status"] = {"observedGeneration": 1}
    for who in ("admin", WORKER, PLUGIN_ON + "node-2"):
        refused = await client.put(BASE + "/nodemodelstores/node-1/status", json=current,
                                   headers={"x-test-user": who})
        assert refused.status_code == 403, who
        assert "refused by rule" in refused.json()["message"]
    written = await client.put(BASE + "/nodemodelstores/node-1/status", json=current,
                               headers={"x-test-user": PLUGIN_ON + "node-1"})
    assert written.status_code == 200, written.text
    assert written.json()["status"] == {"observedGeneration": 1}
    deleted = await client.delete(BASE + "/nodemodelstores/node-1")
    assert deleted.status_code == 200 and deleted.json()["status"] == "Success"
