"""Watch over HTTP (JSON lines) and the stream mechanics: bookmarks, timeout, views, errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import httpx
import orjson
import pytest
from starlette import applications

from apiserver.endpoints import negotiation, watch
from apiserver.endpoints import resources as routes
from apiserver.registry import build, events
from openapi import resources
from tests.unit.apiserver.endpoints.conftest import status_guards
from tests.unit.apiserver.endpoints.test_resources_reads import ARTIFACTS, TABLE, _seed


def _events(text: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in text.splitlines()]


async def _watch_while(client: httpx.AsyncClient, params: dict[str, str],
                       during: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    """Run a watch with a 1 s timeout while ``during()`` writes."""
    task = asyncio.ensure_future(client.get(ARTIFACTS, params={"watch": "true",
                                                               "timeoutSeconds": "1", **params},
                                            headers=headers))
    await asyncio.sleep(0.2)
    await during()
    return await task


async def test_watch_lines_initial_then_live(client: httpx.AsyncClient) -> None:
    await _seed(client, "m1")

    async def write() -> None:
        await _seed(client, "m2")
        await client.delete(ARTIFACTS + "/m1")

    response = await _watch_while(client, {}, write)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.text.endswith("\n")
    events = _events(response.text)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "m1"), ("ADDED", "m2"), ("DELETED", "m1")]
    assert events[0]["object"]["kind"] == "ModelArtifact"


async def test_watch_resume_and_send_initial_events(client: httpx.AsyncClient) -> None:
    await _seed(client, "m1", "m2")

    async def nothing() -> None:
        return None

    # A fresh store is at revision 1, so the first object is revision 2.
    resumed = await _watch_while(client, {"resourceVersion": "2"}, nothing)
    assert [e["type"] for e in _events(resumed.text)] == ["ADDED"]
    listed = await _watch_while(client, {"sendInitialEvents": "true",
                                         "resourceVersionMatch": "NotOlderThan",
                                         "allowWatchBookmarks": "true"}, nothing)
    events = _events(listed.text)
    assert [e["type"] for e in events] == ["ADDED", "ADDED", "BOOKMARK"]
    bookmark = events[-1]["object"]
    assert bookmark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert bookmark["metadata"]["resourceVersion"] == "3"
    assert bookmark["kind"] == "ModelArtifact"


@pytest.mark.parametrize(("params", "status"), [
    ({"sendInitialEvents": "true"}, 422),
    ({"resourceVersionMatch": "NotOlderThan"}, 422),
    ({"resourceVersion": "abc"}, 400),
    ({"labelSelector": "a b"}, 400),
])
async def test_watch_refusals_come_before_the_stream(client: httpx.AsyncClient,
                                                     params: dict[str, str],
                                                     status: int) -> None:
    response = await client.get(ARTIFACTS, params={"watch": "1", **params})
    assert response.status_code == status


async def test_table_watch_rows(client: httpx.AsyncClient) -> None:
    async def write() -> None:
        await _seed(client, "m1", "m2")

    response = await _watch_while(client, {"resourceVersion": "0"}, write,
                                  headers={"accept": TABLE})
    first, second = _events(response.text)
    assert first["object"]["kind"] == "Table" and first["object"]["columnDefinitions"]
    assert second["object"]["columnDefinitions"] == []
    assert len(second["object"]["rows"]) == 1
    assert second["object"]["rows"][0]["cells"][0] == "m2"


async def _events_from(items: list[events.WatchEvent], pause: float = 10.0
                       ) -> AsyncIterator[events.WatchEvent]:
    for item in items:
        yield item
    await asyncio.sleep(pause)


async def test_bookmarks_while_idle_and_timeout(registry: build.Registry) -> None:
    created = await registry.modelartifacts.create(
        {"metadata": {"name": "m1"},
         "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2-0.5B"}}}},
        namespace="a")
    record = await registry.modelartifacts.get_record("a", "m1")
    encoder = watch.Encoder(resources.MODEL_ARTIFACT,
                            negotiation.Target(negotiation.View.METADATA))
    stream = watch.lines(
        _events_from([events.WatchEvent("ADDED", record, record.revision)], pause=60), encoder,
        timeout=None, bookmarks=True, tuning=watch.Tuning(bookmark_interval=0.01))
    async with asyncio.timeout(30):  # a failure guard: bookmarks come every 10 ms
        decoded = [orjson.loads(await anext(stream)) for _ in range(3)]
    await stream.aclose()
    assert decoded[0]["type"] == "ADDED"
    assert decoded[0]["object"]["kind"] == "PartialObjectMetadata"
    assert decoded[0]["object"]["metadata"]["uid"] == created["metadata"]["uid"]
    bookmarks = decoded[1:]
    assert [e["type"] for e in bookmarks] == ["BOOKMARK", "BOOKMARK"]
    # the timeout ends a stream whose source has nothing more to say
    ending = watch.lines(
        _events_from([events.WatchEvent("ADDED", record, record.revision)], pause=60), encoder,
        timeout=0.05, bookmarks=True)
    async with asyncio.timeout(30):
        assert [orjson.loads(line)["type"] async for line in ending] == ["ADDED"]
    assert bookmarks[0]["object"] == {"kind": "PartialObjectMetadata",
                                      "apiVersion": "meta.k8s.io/v1",
                                      "metadata": {"resourceVersion": str(record.revision)}}


async def test_error_event_ends_the_stream() -> None:
    status = {"kind": "Status", "code": 410}
    encoder = watch.Encoder(resources.MODEL_ARTIFACT, negotiation.OBJECT)
    lines = [line async for line in watch.lines(
        _events_from([events.WatchEvent("ERROR", status=status)]), encoder, timeout=5,
        bookmarks=False)]
    assert [orjson.loads(line) for line in lines] == [{"type": "ERROR", "object": status}]


async def test_compacted_resume_is_200_with_a_410_error(client: httpx.AsyncClient,
                                                        registry: build.Registry) -> None:
    await _seed(client, "m1")
    for value in ("1", "2", "3"):
        await client.patch(ARTIFACTS + "/m1", content=b'{"metadata":{"labels":{"v":"%s"}}}'
                           % value.encode(), headers={"content-type":
                                                      "application/merge-patch+json"})
    await registry.storage.compact(await registry.storage.current_revision() - 1)
    response = await client.get(ARTIFACTS, params={"watch": "1", "resourceVersion": "1"})
    assert response.status_code == 200
    [event] = _events(response.text)
    assert event["type"] == "ERROR" and event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"



async def test_client_disconnect_ends_an_idle_watch(registry: build.Registry) -> None:
    app = applications.Starlette(routes=routes.routes(registry, status_guards()))
    messages: list[dict[str, Any]] = []
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(0.2)
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        messages.append(dict(message))

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.1"},
             "http_version": "1.1", "method": "GET", "scheme": "http", "path": ARTIFACTS,
             "raw_path": ARTIFACTS.encode(), "query_string": b"watch=true", "root_path": "",
             "headers": [], "server": ("test", 80), "client": ("test", 1)}
    async with asyncio.timeout(3):  # without the disconnect the stream would last 30+ minutes
        await app(scope, receive, send)
    assert messages[0]["status"] == 200


async def test_a_client_that_stops_reading_gets_a_410(registry: build.Registry) -> None:
    await registry.modelartifacts.create(
        {"metadata": {"name": "m1"},
         "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2-0.5B"}}}},
        namespace="a")
    record = await registry.modelartifacts.get_record("a", "m1")
    burst = [events.WatchEvent("MODIFIED", record, record.revision)] * 10
    encoder = watch.Encoder(resources.MODEL_ARTIFACT, negotiation.OBJECT)
    stream = watch.lines(_events_from(burst), encoder, timeout=5, bookmarks=False,
                         tuning=watch.Tuning(max_backlog=3))
    received = [await anext(stream)]
    await asyncio.sleep(0.05)  # the client stalls while the burst arrives
    received += [line async for line in stream]
    kinds = [orjson.loads(line)["type"] for line in received]
    # at most the backlog plus the event in hand, then the end: not the whole burst
    assert kinds[-1] == "ERROR" and set(kinds[:-1]) == {"MODIFIED"} and len(kinds) <= 5
    assert orjson.loads(received[-1])["object"]["code"] == 410
