"""A storage progress mark is never sent itself; it moves the next bookmark's resourceVersion."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest

from apiserver.endpoints import negotiation, watch
from apiserver.registry import events
from apiserver.storage import interface
from openapi import resources


async def _source(record: interface.Record, progress: int) -> AsyncIterator[events.WatchEvent]:
    yield events.WatchEvent("ADDED", record, record.revision)
    yield events.WatchEvent("PROGRESS", revision=progress)
    await asyncio.sleep(1)


async def test_bookmarks_carry_the_progress_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "BOOKMARK_INTERVAL", 0.05)
    value = orjson.dumps({"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
                          "metadata": {"name": "m", "namespace": "a"}, "spec": {}})
    record = interface.Record("/modelartifacts/a/m", value, 7, 7)
    encoder = watch.Encoder(resources.MODEL_ARTIFACT, negotiation.OBJECT)
    lines = [orjson.loads(line) async for line in watch.lines(
        _source(record, 42), encoder, timeout=0.3, bookmarks=True)]
    assert lines[0]["type"] == "ADDED"
    assert {line["type"] for line in lines[1:]} == {"BOOKMARK"}
    assert len(lines) >= 2
    assert {line["object"]["metadata"]["resourceVersion"] for line in lines[1:]} == {"42"}
