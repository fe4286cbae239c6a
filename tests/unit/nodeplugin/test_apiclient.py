from __future__ import annotations

import json

import httpx
import pytest

from nodeplugin import apiclient, kubeconfig
from tests.unit.nodeplugin import fakes

TOKEN = "plugin-secret-token"


def _client(handler: object) -> apiclient.HttpArtifactClient:
    connection = kubeconfig.Connection(server="https://api.test", token=TOKEN)
    return apiclient.HttpArtifactClient(
        connection, transport=httpx.MockTransport(handler))  # type: ignore[arg-type]


async def test_list_pages_carry_limit_continue_and_the_token() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={
            "items": [fakes.artifact_object()],
            "metadata": {"resourceVersion": "9", "continue": "next"}})

    client = _client(handler)
    page = await client.list_page(limit=500, continue_token="abc")
    await client.aclose()
    assert page["resourceVersion"] == "9" and page["continueToken"] == "next"
    assert len(page["items"]) == 1
    request = seen[0]
    assert request.url.path == apiclient.PATH
    assert request.url.params["limit"] == "500" and request.url.params["continue"] == "abc"
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"


async def test_410_is_gone_and_other_errors_carry_no_token() -> None:
    client = _client(lambda r: httpx.Response(410, json={"message": "too old"}))
    with pytest.raises(apiclient.Gone):
        await client.list_page(limit=1, continue_token="")
    client = _client(lambda r: httpx.Response(403, json={"message": "forbidden"}))
    with pytest.raises(apiclient.ApiError) as info:
        await client.list_page(limit=1, continue_token="")
    assert "403" in str(info.value) and TOKEN not in str(info.value)


async def test_watch_reads_json_lines_from_a_version() -> None:
    lines = [
        {"type": "ADDED", "object": fakes.artifact_object(version="10")},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "11"}}},
    ]
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = "".join(json.dumps(line) + "\n" for line in lines) + "\n"
        return httpx.Response(200, content=body.encode())

    client = _client(handler)
    events = [event async for event in client.watch("7")]
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    params = seen[0].url.params
    assert params["watch"] == "true" and params["resourceVersion"] == "7"
    assert params["allowWatchBookmarks"] == "true"
    gone = _client(lambda r: httpx.Response(410, json={"message": "expired"}))
    with pytest.raises(apiclient.Gone):
        _ = [event async for event in gone.watch("1")]
