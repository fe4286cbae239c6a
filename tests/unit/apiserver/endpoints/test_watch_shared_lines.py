"""Watch lines: encoded once per rendering and shared across watchers; the pump-free stream."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import orjson

from apiserver.endpoints import negotiation, watch
from apiserver.registry import codec, events
from apiserver.storage import interface
from openapi import resources


def _record(revision: int, labels: dict[str, str]) -> interface.Record:
    obj = {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
           "metadata": {"name": "m1", "namespace": "a", "labels": labels}}
    return interface.Record("/modelartifacts/a/m1", codec.encode(obj), revision, 2)


def test_watchers_with_the_same_rendering_share_one_line() -> None:
    shared = watch.SharedLines()
    record = _record(5, {"v": "1"})
    event = events.WatchEvent("MODIFIED", record, record.revision)
    first = watch.Encoder(resources.MODEL_ARTIFACT, negotiation.OBJECT, shared=shared)
    second = watch.Encoder(resources.MODEL_ARTIFACT, negotiation.OBJECT, shared=shared)
    line = first.encode(event)
    assert second.encode(event) is line  # the same bytes object: encoded once
    assert orjson.loads(line)["object"]["metadata"]["resourceVersion"] == "5"
    metadata = watch.Encoder(resources.MODEL_ARTIFACT,
                             negotiation.Target(negotiation.View.METADATA), shared=shared)
    partial = orjson.loads(metadata.encode(event))
    assert partial["object"]["kind"] == "PartialObjectMetadata"


def test_other_content_at_the_same_revision_gets_its_own_line() -> None:
    shared = watch.SharedLines()
    encoder = watch.Encoder(resources.MODEL_ARTIFACT, negotiation.OBJECT, shared=shared)
    now = _record(6, {"tier": "silver"})
    before = dataclasses.replace(_record(5, {"tier": "gold"}), revision=6)
    # a selector transition: same key, type and revision as another watcher's event could be,
    # but built from the previous content
    gold = orjson.loads(encoder.encode(events.WatchEvent("DELETED", before, 6)))
    silver = orjson.loads(encoder.encode(events.WatchEvent("DELETED", now, 6)))
    assert gold["object"]["metadata"]["labels"] == {"tier": "gold"}
    assert silver["object"]["metadata"]["labels"] == {"tier": "silver"}


def test_the_cache_is_bounded() -> None:
    shared = watch.SharedLines(size=4)
    encoder = watch.Encoder(resources.MODEL_ARTIFACT, negotiation.OBJECT, shared=shared)
    records = [_record(revision, {}) for revision in range(10, 20)]
    lines = [encoder.encode(events.WatchEvent("MODIFIED", r, r.revision)) for r in records]
    assert len(shared._lines) == 4
    again = encoder.encode(events.WatchEvent("MODIFIED", records[-1], records[-1].revision))
    assert again is lines[-1]


async def _forever(first: events.WatchEvent,
                   closed: list[bool]) -> AsyncIterator[events.WatchEvent]:
    try:
        yield first
        await asyncio.Event().wait()  # no further event ever comes
        yield first  # pragma: no cover
    finally:
        closed.append(True)


async def test_live_lines_end_at_the_deadline_and_close_the_source() -> None:
    record = _record(5, {})
    closed: list[bool] = []
    encoder = watch.Encoder(resources.MODEL_ARTIFACT, negotiation.OBJECT)
    source = _forever(events.WatchEvent("ADDED", record, 5), closed)
    async with asyncio.timeout(5):  # a deadline that did not work would hang here
        got = [line async for line in watch.live_lines(source, encoder, timeout=0.2)]
    assert [orjson.loads(line)["type"] for line in got] == ["ADDED"]
    assert closed == [True]


async def test_live_lines_stop_after_an_error() -> None:
    status = {"kind": "Status", "code": 410}
    record = _record(5, {})

    async def source() -> AsyncIterator[events.WatchEvent]:
        yield events.WatchEvent("ERROR", status=status)
        yield events.WatchEvent("ADDED", record, 5)  # pragma: no cover

    encoder = watch.Encoder(resources.MODEL_ARTIFACT, negotiation.OBJECT)
    got = [orjson.loads(line) async for line in watch.live_lines(source(), encoder, timeout=5)]
    assert got == [{"type": "ERROR", "object": status}]
