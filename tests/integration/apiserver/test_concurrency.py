"""Concurrent writers against one server: optimistic concurrency holds under contention."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from devkit.harness import apiserver as support
from tests.support import kubeclient

NS = "concurrency"
COLLECTION = f"/apis/worker.gpustack.ai/v1/namespaces/{NS}/modelartifacts"
WRITERS = 20


def _client(server: support.RunningServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.url,
        verify=support.ssl_context(server.ca_file),
        headers={"Authorization": f"Bearer {server.admin_token}"},
        timeout=30,
    )


async def test_writers_on_one_object_see_only_200_and_409(
    apiserver: support.RunningServer,
) -> None:
    async with _client(apiserver) as setup:
        created = await setup.post(COLLECTION, json=kubeclient.artifact("contended", NS))
        assert created.status_code == 201, created.text

    async def writer(index: int) -> list[tuple[int, str, str]]:
        results: list[tuple[int, str, str]] = []
        async with _client(apiserver) as client:
            for attempt in range(3):
                current: dict[str, Any] = (await client.get(f"{COLLECTION}/contended")).json()
                value = f"w{index}-{attempt}"
                current["metadata"]["labels"] = {"writer": value}
                response = await client.put(f"{COLLECTION}/contended", json=current)
                rv = response.json().get("metadata", {}).get("resourceVersion", "")
                results.append((response.status_code, value, rv))
        return results

    outcomes = [r for rs in await asyncio.gather(*(writer(i) for i in range(WRITERS))) for r in rs]
    codes = {code for code, _, _ in outcomes}
    assert codes <= {200, 409}, outcomes
    wins = sorted((int(rv), value) for code, value, rv in outcomes if code == 200)
    assert wins, "at least one write must win"
    assert len({rv for rv, _ in wins}) == len(wins)  # every accepted write has its own revision
    async with _client(apiserver) as client:
        final = (await client.get(f"{COLLECTION}/contended")).json()
    assert final["metadata"]["labels"]["writer"] == wins[-1][1]
    assert int(final["metadata"]["resourceVersion"]) == wins[-1][0]


async def test_concurrent_creates_of_one_name_have_one_winner(
    apiserver: support.RunningServer,
) -> None:
    async def create(index: int) -> tuple[int, dict[str, Any]]:
        async with _client(apiserver) as client:
            body = kubeclient.artifact("raced", NS, creator=str(index))
            response = await client.post(COLLECTION, json=body)
            return response.status_code, response.json()

    results = await asyncio.gather(*(create(i) for i in range(WRITERS)))
    codes = sorted(code for code, _ in results)
    assert codes == [201] + [409] * (WRITERS - 1)
    assert all(body["reason"] == "AlreadyExists" for code, body in results if code == 409)
    (winner,) = [body for code, body in results if code == 201]
    async with _client(apiserver) as client:
        stored = (await client.get(f"{COLLECTION}/raced")).json()
    assert stored["metadata"]["uid"] == winner["metadata"]["uid"]
    assert stored["metadata"]["labels"] == winner["metadata"]["labels"]
