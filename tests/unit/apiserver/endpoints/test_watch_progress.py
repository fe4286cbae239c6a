"""A storage progress mark is never sent itself; it moves the next bookmark's resourceVersion."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson

from apiserver.endpoints import negotiation, watch
from apiserver.registry import events
from apiserver.storage import interface
from openapi import resources


async def _source(record: interface.Record, progress: int) -> AsyncIterator[events.WatchEvent]:
    yield events.WatchEvent("ADDED", record, record.revision)
    yield events.WatchEvent("PROGRESS", revision=progress)
    await asyncio.sleep(60)


async def test_bookmarks_carry_the_progress_revision() -> None:
    value = orjson.dumps({"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
                          "metadata": {"name": "m", "namespace": "a"}, "spec": {}})
    record = interface.Record("/modelartifacts/a/m", value, 7, 7)
    encoder = watch.Encoder(resources.MODEL_ARTIFACT, negotiation.OBJECT)
    stream = watch.lines(_source(record, 42), encoder, timeout=None, bookmarks=True,
                         tuning=watch.Tuning(bookmark_interval=0.01))
    async with asyncio.timeout(30):  # a failure guard: bookmarks come every 10 ms
        lines = [orjson.loads(await anext(stream)) for _ in range(3)]
    await stream.aclose()
    assert lines[0]["type"] == "ADDED"
    assert {line["type"] for line in lines[1:]} == {"BOOKMARK"}
    assert {line["object"]["metadata"]["resourceVersion"] for line in lines[1:]} == {"42"}
