"""The artifacts' ``status.nodes`` as reads hand it out: computed from the view on GET, LIST and
watch events, never stored, cached per artifact revision and digest version (the same bytes for
every reader until one of them changes), and a value an older version stored never shown."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from apiserver.endpoints import negotiation, watch
from apiserver.registry import build, codec, nodecounts, options
from apiserver.storage import interface
from openapi import resources, wire
from openapi.kinds import modelartifact
from tests.unit.apiserver.registry.conftest import artifact

DIGEST = "sha256:" + "ab" * 32


class View:
    """Counts by digest, set by the test; ``version`` moves with every change, as the index's."""

    def __init__(self) -> None:
        self.by_digest: dict[str, modelartifact.NodeCounts] = {}
        self.versions: dict[str, int] = {}
        self.asked = 0

    def set(self, digest: str, **counts: int) -> None:
        self.by_digest[digest] = modelartifact.NodeCounts(**counts)  # type: ignore[typeddict-item]
        self.versions[digest] = self.versions.get(digest, 0) + 1

    def digest(self, obj: wire.Readable) -> str:
        digest, _ = modelartifact.hub_digest(obj)
        return digest

    def counts(self, obj: wire.Readable) -> modelartifact.NodeCounts | None:
        self.asked += 1
        digest = self.digest(obj)
        if not digest:
            return None
        return self.by_digest.get(digest, modelartifact.NodeCounts(ready=0, downloading=0,
                                                                   failed=0))

    def version(self, digest: str) -> int:
        return self.versions.get(digest, 0)


async def _resolved(registry: build.Registry, name: str, **status: Any) -> None:
    created = await registry.modelartifacts.create(artifact(name), namespace="a")
    created["status"] = {"resolved": {"manifestDigest": DIGEST, "sizeBytes": 10}, **status}
    await registry.modelartifacts.update_status(created, namespace="a", name=name)


async def _stored(registry: build.Registry, name: str) -> interface.Record:
    found = await registry.storage.get(registry.modelartifacts.key("a", name))
    assert found is not None
    return found


def _nodes(obj: dict[str, Any]) -> Any:
    return (obj.get("status") or {}).get("nodes")


async def test_get_list_and_watch_carry_the_counts_no_write_does(
        registry: build.Registry) -> None:
    view = View()
    registry.node_counts.view = view
    await _resolved(registry, "m", nodes={"ready": 7, "downloading": 0, "failed": 0})
    stored = await _stored(registry, "m")
    assert b'"nodes"' not in stored.value  # the written counts were dropped
    assert _nodes(await registry.modelartifacts.get("a", "m")) == {
        "ready": 0, "downloading": 0, "failed": 0}
    view.set(DIGEST, ready=2, downloading=1, failed=0, downloadingPercent=35)
    wanted = {"ready": 2, "downloading": 1, "failed": 0, "downloadingPercent": 35}
    assert _nodes(await registry.modelartifacts.get("a", "m")) == wanted
    assert [_nodes(o) for o in (await registry.modelartifacts.list("a")).items()] == [wanted]
    events = registry.modelartifacts.watch("a")
    async with asyncio.timeout(5):
        first = await anext(events)
    assert first.type == "ADDED" and first.record is not None
    assert _nodes(codec.decode(first.record)) == wanted
    assert (await _stored(registry, "m")).revision == stored.revision  # nothing was written


async def test_one_answer_per_revision_and_digest_version(registry: build.Registry) -> None:
    view = View()
    registry.node_counts.view = view
    await _resolved(registry, "m")
    view.set(DIGEST, ready=1, downloading=0, failed=0)
    first = await registry.modelartifacts.get_record("a", "m")
    asked = view.asked
    again = await registry.modelartifacts.get_record("a", "m")
    listed = (await registry.modelartifacts.list("a")).records[0]
    assert again.value is first.value and listed.value is first.value  # the same bytes, shared
    assert view.asked == asked  # and not counted again
    view.set(DIGEST, ready=2, downloading=0, failed=0)  # a node changed: counted again
    moved = await registry.modelartifacts.get_record("a", "m")
    assert moved.value is not first.value and moved.revision == first.revision
    assert _nodes(codec.decode(moved))["ready"] == 2
    current = await registry.modelartifacts.get("a", "m")  # a write: a new revision
    current["metadata"]["labels"] = {"x": "1"}
    await registry.modelartifacts.update(current, namespace="a", name="m")
    relabeled = codec.decode(await registry.modelartifacts.get_record("a", "m"))
    assert relabeled["metadata"]["labels"] == {"x": "1"} and _nodes(relabeled)["ready"] == 2


async def test_watchers_share_one_line_until_the_counts_move(registry: build.Registry) -> None:
    view = View()
    registry.node_counts.view = view
    await _resolved(registry, "m")
    view.set(DIGEST, ready=3, downloading=0, failed=0)
    shared = watch.SharedLines()
    target = negotiation.Target(negotiation.View.OBJECT)
    lines = []
    for _ in range(2):
        events = registry.modelartifacts.watch("a")
        async with asyncio.timeout(5):
            event = await anext(events)
        lines.append(watch.Encoder(resources.MODEL_ARTIFACT, target, shared=shared).encode(event))
    assert lines[0] is lines[1]
    assert orjson.loads(lines[0])["object"]["status"]["nodes"]["ready"] == 3
    view.set(DIGEST, ready=4, downloading=0, failed=0)
    events = registry.modelartifacts.watch("a")
    async with asyncio.timeout(5):
        event = await anext(events)
    line = watch.Encoder(resources.MODEL_ARTIFACT, target, shared=shared).encode(event)
    assert orjson.loads(line)["object"]["status"]["nodes"]["ready"] == 4


async def test_before_the_view_an_old_stored_value_is_never_shown(
        registry: build.Registry) -> None:
    """Counts an older version stored stay out of every read until the view is plugged in,
    then the view's replace them; an artifact with nothing stored there is handed out as is."""
    await _resolved(registry, "m")
    await registry.modelartifacts.create(artifact("plain"), namespace="a")
    record = await _stored(registry, "m")
    old = codec.decode(record)
    old["status"]["nodes"] = {"ready": 9, "downloading": 0, "failed": 0}
    await registry.storage.update(record.key, codec.encode(old), expected_revision=record.revision)
    assert _nodes(await registry.modelartifacts.get("a", "m")) is None
    plain = await _stored(registry, "plain")
    assert (await registry.modelartifacts.get_record("a", "plain")).value is plain.value
    view = View()
    view.set(DIGEST, ready=1, downloading=0, failed=0)
    registry.node_counts.view = view
    assert _nodes(await registry.modelartifacts.get("a", "m"))["ready"] == 1
    registry.node_counts.view = None
    assert _nodes(await registry.modelartifacts.get("a", "m")) is None


async def test_a_small_cache_still_answers_every_artifact(registry: build.Registry) -> None:
    presenter = nodecounts.Presenter(size=2)
    view = View()
    presenter.view = view
    await _resolved(registry, "m")
    for name in ("p", "q", "r"):
        await registry.modelartifacts.create(artifact(name), namespace="a")
    view.set(DIGEST, ready=5, downloading=0, failed=0)
    for _ in range(2):
        shown = [codec.decode(presenter.present(r))
                 for r in (await registry.modelartifacts.list(
                     "a", options.ListOptions())).records]
        assert [(o["metadata"]["name"], _nodes(o)) for o in shown] == [
            ("m", {"ready": 5, "downloading": 0, "failed": 0}), ("p", None), ("q", None),
            ("r", None)]
