"""OpenAPI serving: ETag/304 on v2 and v3, the v3 index hash, 301 on a stale hash."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import orjson
from starlette.applications import Starlette

from apiserver.endpoints import openapi

V2: dict[str, Any] = {"swagger": "2.0", "info": {"title": "t", "version": "v1"}, "paths": {}}
V3: dict[str, Any] = {"openapi": "3.0.0", "info": {"title": "t", "version": "v1"}, "paths": {}}
GROUP = "/openapi/v3/apis/worker.gpustack.ai/v1"


def _client(docs: openapi.Documents | None = None) -> httpx.AsyncClient:
    application = Starlette(routes=(docs or openapi.Documents(V2, V3)).routes())
    return httpx.AsyncClient(transport=httpx.ASGITransport(application), base_url="https://t")


async def test_v2_with_etag_and_304() -> None:
    async with _client() as client:
        first = await client.get("/openapi/v2", headers={"Accept": "application/json"})
        tag = first.headers["etag"]
        cached = await client.get("/openapi/v2", headers={"If-None-Match": tag})
        changed = await client.get("/openapi/v2", headers={"If-None-Match": '"other"'})
    assert first.status_code == 200
    assert first.headers["content-type"] == "application/json"
    assert first.json() == V2
    assert cached.status_code == 304
    assert cached.content == b""
    assert changed.status_code == 200


async def test_v3_index_points_at_current_hash() -> None:
    expected = hashlib.sha512(orjson.dumps(V3)).hexdigest().upper()
    async with _client() as client:
        index = (await client.get("/openapi/v3")).json()
    assert index == {
        "paths": {"apis/worker.gpustack.ai/v1": {"serverRelativeURL": f"{GROUP}?hash={expected}"}}
    }


async def test_v3_group_document() -> None:
    async with _client() as client:
        plain = await client.get(GROUP)
        url = (await client.get("/openapi/v3")).json()["paths"]["apis/worker.gpustack.ai/v1"]
        hashed = await client.get(url["serverRelativeURL"])
        cached = await client.get(GROUP, headers={"If-None-Match": plain.headers["etag"]})
    assert plain.status_code == 200
    assert plain.json() == V3
    assert "immutable" not in plain.headers.get("cache-control", "")
    assert hashed.status_code == 200
    assert hashed.headers["cache-control"] == "public, immutable"
    assert hashed.headers["etag"] == plain.headers["etag"]
    assert cached.status_code == 304


async def test_stale_hash_redirects_to_current() -> None:
    docs = openapi.Documents(V2, V3)
    async with _client(docs) as client:
        response = await client.get(f"{GROUP}?hash=0123", follow_redirects=False)
    assert response.status_code == 301
    assert response.headers["location"] == f"{GROUP}?hash={docs.v3_hash}"


async def test_documents_from_the_contract_serve() -> None:
    """The real documents encode and carry the group-version paths."""
    docs = openapi.Documents.build()
    assert b"/apis/worker.gpustack.ai/v1/namespaces/{namespace}/modelartifacts" in docs.v3
    assert b"/apis/worker.gpustack.ai/v1/nodemodelstores" in docs.v2
