"""Discovery: legacy documents, aggregated v2/v2beta1 by Accept, ETag/304, the 406 rule."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from apiserver import errors
from apiserver.endpoints import discovery

V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
V1ALPHA = "application/json;g=apidiscovery.k8s.io;v=v1alpha1;as=APIGroupDiscoveryList"


async def _render(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, errors.StatusError):
        raise exc
    return JSONResponse(exc.body(), status_code=exc.code)


def _client() -> httpx.AsyncClient:
    application = Starlette(
        routes=discovery.routes(), exception_handlers={errors.StatusError: _render}
    )
    return httpx.AsyncClient(transport=httpx.ASGITransport(application), base_url="https://t")


async def test_group_list() -> None:
    async with _client() as client:
        response = await client.get("/apis", headers={"Accept": "application/json"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["vary"] == "Accept"
    version = {"groupVersion": "worker.gpustack.ai/v1", "version": "v1"}
    assert response.json() == {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {"name": "worker.gpustack.ai", "versions": [version], "preferredVersion": version}
        ],
    }


async def test_api_group() -> None:
    async with _client() as client:
        body = (await client.get("/apis/worker.gpustack.ai")).json()
    assert body["kind"] == "APIGroup"
    assert body["name"] == "worker.gpustack.ai"
    assert body["preferredVersion"]["groupVersion"] == "worker.gpustack.ai/v1"


async def test_resource_list() -> None:
    async with _client() as client:
        body = (await client.get("/apis/worker.gpustack.ai/v1")).json()
    assert body["kind"] == "APIResourceList"
    assert body["groupVersion"] == "worker.gpustack.ai/v1"
    by_name = {r["name"]: r for r in body["resources"]}
    assert set(by_name) == {
        "modelartifacts",
        "modelartifacts/progress",
        "modelartifacts/copies",
        "modelartifacts/manifest",
        "nodemodelstores",
        "nodemodelstores/status",
        "modelprefetches",
        "modelstores",
        "modelstorebindings",
    }
    ms, msb = by_name["modelstores"], by_name["modelstorebindings"]
    assert ms["namespaced"] is False and ms["kind"] == "ModelStore"
    assert ms["shortNames"] == ["ms"] and ms["categories"] == ["gpustack"]
    assert msb["namespaced"] is True and msb["kind"] == "ModelStoreBinding"
    assert msb["shortNames"] == ["msb"]
    for found in (ms, msb):
        assert found["verbs"] == ["create", "delete", "get", "list", "patch", "update", "watch"]
    mpf = by_name["modelprefetches"]
    assert mpf["namespaced"] is True and mpf["kind"] == "ModelPrefetch"
    assert mpf["shortNames"] == ["mpf"] and mpf["categories"] == ["gpustack"]
    assert mpf["verbs"] == ["create", "delete", "get", "list", "patch", "update", "watch"]
    mart = by_name["modelartifacts"]
    assert mart["namespaced"] is True
    assert mart["kind"] == "ModelArtifact"
    assert mart["shortNames"] == ["mart"]
    assert mart["verbs"] == ["create", "delete", "get", "list", "patch", "update", "watch"]
    nms = by_name["nodemodelstores"]
    assert nms["namespaced"] is False
    assert nms["shortNames"] == ["nms"]
    assert nms["categories"] == ["gpustack"]
    assert nms["verbs"] == ["delete", "get", "list", "watch"]
    # a subresource's scope must equal its parent's
    assert by_name["modelartifacts/progress"]["namespaced"] is True
    assert by_name["modelartifacts/progress"]["kind"] == "ModelArtifactProgress"
    assert by_name["modelartifacts/copies"]["namespaced"] is True
    assert by_name["modelartifacts/copies"]["kind"] == "ModelArtifactCopies"
    assert by_name["modelartifacts/copies"]["verbs"] == ["get"]
    assert by_name["nodemodelstores/status"]["namespaced"] is False


@pytest.mark.parametrize(("accept", "version"), [(V2, "v2"), (V2BETA1, "v2beta1")])
async def test_aggregated(accept: str, version: str) -> None:
    async with _client() as client:
        response = await client.get("/apis", headers={"Accept": accept})
    assert response.status_code == 200
    assert response.headers["content-type"] == accept
    assert response.headers["vary"] == "Accept"
    assert response.headers["cache-control"] == "public"
    assert response.headers["etag"].startswith('"')
    body = response.json()
    assert body["kind"] == "APIGroupDiscoveryList"
    assert body["apiVersion"] == f"apidiscovery.k8s.io/{version}"
    (group,) = body["items"]
    assert group["metadata"]["name"] == "worker.gpustack.ai"
    (gv,) = group["versions"]
    assert gv["version"] == "v1"
    assert gv["freshness"] == "Current"
    by_name = {r["resource"]: r for r in gv["resources"]}
    assert by_name["modelartifacts"]["scope"] == "Namespaced"
    assert by_name["modelartifacts"]["responseKind"] == {
        "group": "worker.gpustack.ai",
        "version": "v1",
        "kind": "ModelArtifact",
    }
    assert by_name["modelartifacts"]["subresources"] == [
        {
            "subresource": "progress",
            "responseKind": {
                "group": "worker.gpustack.ai",
                "version": "v1",
                "kind": "ModelArtifactProgress",
            },
            "verbs": ["get"],
        },
        {
            "subresource": "copies",
            "responseKind": {
                "group": "worker.gpustack.ai",
                "version": "v1",
                "kind": "ModelArtifactCopies",
            },
            "verbs": ["get"],
        },
        {
            "subresource": "manifest",
            "responseKind": {
                "group": "worker.gpustack.ai",
                "version": "v1",
                "kind": "ModelArtifactManifest",
            },
            "verbs": ["get"],
        },
    ]
    assert by_name["nodemodelstores"]["scope"] == "Cluster"
    assert by_name["nodemodelstores"]["categories"] == ["gpustack"]
    assert by_name["modelprefetches"]["scope"] == "Namespaced"
    assert by_name["modelprefetches"]["responseKind"]["kind"] == "ModelPrefetch"
    assert by_name["modelprefetches"].get("subresources", []) == []  # status is the worker's


async def test_aggregated_etag_304() -> None:
    async with _client() as client:
        first = await client.get("/apis", headers={"Accept": V2})
        tag = first.headers["etag"]
        again = await client.get("/apis", headers={"Accept": V2, "If-None-Match": tag})
        stale = await client.get("/apis", headers={"Accept": V2, "If-None-Match": '"nope"'})
        beta = await client.get("/apis", headers={"Accept": V2BETA1, "If-None-Match": tag})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == tag
    assert stale.status_code == 200
    assert beta.status_code == 200  # another body, another tag


async def test_both_versions_prefers_first() -> None:
    async with _client() as client:
        response = await client.get("/apis", headers={"Accept": f"{V2},{V2BETA1}"})
    assert response.json()["apiVersion"] == "apidiscovery.k8s.io/v2"


async def test_only_unserved_aggregated_type_is_406() -> None:
    async with _client() as client:
        response = await client.get("/apis", headers={"Accept": V1ALPHA})
    assert response.status_code == 406
    assert response.json()["reason"] == "NotAcceptable"


async def test_unserved_aggregated_with_json_fallback_is_legacy() -> None:
    async with _client() as client:
        response = await client.get("/apis", headers={"Accept": f"{V1ALPHA},application/json"})
    assert response.status_code == 200
    assert response.json()["kind"] == "APIGroupList"


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        ("", "legacy"),
        ("*/*", "legacy"),
        ("application/json, */*", "legacy"),
        (f"{V2};q=0.5,application/json;q=0.9", "legacy"),
        (f"{V2BETA1};q=0.9,{V2}", "v2"),
        (f"{V2};q=0", None),
        ("application/json;as=Table;g=meta.k8s.io;v=v1", None),
        ("application/vnd.kubernetes.protobuf", None),
    ],
)
def test_choose(accept: str, chosen: str | None) -> None:
    assert discovery.choose(accept) == chosen
