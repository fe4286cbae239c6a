"""ResourceStore.watch: initial events, resume, sendInitialEvents, selectors and 410."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apiserver import errors
from apiserver.registry import build, codec, events, options, selectors
from apiserver.storage import sqlite
from tests.unit.apiserver.registry.conftest import artifact


async def _take(events: AsyncIterator[events.WatchEvent], count: int) -> list[events.WatchEvent]:
    taken = []
    async with asyncio.timeout(5):
        async for event in events:
            taken.append(event)
            if len(taken) == count:
                break
    return taken


def _summary(events: list[events.WatchEvent]) -> list[tuple[str, str]]:
    return [(e.type, codec.decode(e.record)["metadata"]["name"] if e.record else "")
            for e in events]


async def _label(registry: build.Registry, name: str, **labels: str) -> None:
    current = await registry.modelartifacts.get("a", name)
    current["metadata"]["labels"] = labels
    await registry.modelartifacts.update(current, namespace="a", name=name)


async def test_unset_version_sends_current_state_then_live_changes(
        registry: build.Registry) -> None:
    await registry.modelartifacts.create(artifact("one"), namespace="a")
    events = registry.modelartifacts.watch("a")
    first = await _take(events, 1)
    await _label(registry, "one", x="1")
    await registry.modelartifacts.create(artifact("two"), namespace="a")
    await registry.modelartifacts.delete("a", "one")
    rest = await _take(events, 3)
    assert _summary(first + rest) == [("ADDED", "one"), ("MODIFIED", "one"), ("ADDED", "two"),
                                      ("DELETED", "one")]
    deleted = rest[-1]
    assert deleted.record is not None
    assert codec.decode(deleted.record)["metadata"]["labels"] == {"x": "1"}


async def test_resume_is_strictly_after_the_version(registry: build.Registry) -> None:
    created = await registry.modelartifacts.create(artifact("one"), namespace="a")
    await _label(registry, "one", x="1")
    events = registry.modelartifacts.watch("a", options.WatchOptions(
        resource_version=created["metadata"]["resourceVersion"]))
    [event] = await _take(events, 1)
    assert event.type == "MODIFIED"
    assert event.revision == int(created["metadata"]["resourceVersion"]) + 1


async def test_send_initial_events_ends_with_the_marked_bookmark(
        registry: build.Registry) -> None:
    await registry.modelartifacts.create(artifact("one"), namespace="a")
    await registry.modelartifacts.create(artifact("two"), namespace="a")
    events = registry.modelartifacts.watch("a", options.WatchOptions(
        send_initial_events=True, resource_version_match=options.NOT_OLDER_THAN,
        allow_bookmarks=True))
    taken = await _take(events, 3)
    assert _summary(taken)[:2] == [("ADDED", "one"), ("ADDED", "two")]
    assert taken[2].type == "BOOKMARK" and taken[2].initial_events_end
    assert taken[2].revision == 3  # a fresh store is at revision 1: "two" is revision 3


async def test_initial_events_newer_than_the_store_are_a_504(
        registry: build.Registry) -> None:
    events = registry.modelartifacts.watch("a", options.WatchOptions(
        send_initial_events=True, resource_version_match=options.NOT_OLDER_THAN,
        resource_version="50"))
    [event] = await _take(events, 1)
    assert event.type == "ERROR" and event.status is not None
    assert event.status["code"] == 504
    assert event.status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert event.status["details"]["retryAfterSeconds"] == 1


async def test_label_selector_turns_transitions_into_added_and_deleted(
        registry: build.Registry) -> None:
    await registry.modelartifacts.create(artifact("one"), namespace="a")
    events = registry.modelartifacts.watch("a", options.WatchOptions(
        label_selector=selectors.parse_labels("tier in (gold)"), resource_version="2"))
    await _label(registry, "one", tier="gold")
    await _label(registry, "one", tier="gold", extra="y")
    await _label(registry, "one", tier="silver")
    taken = await _take(events, 3)
    assert [e.type for e in taken] == ["ADDED", "MODIFIED", "DELETED"]
    gone = taken[2]
    assert gone.record is not None
    # The DELETED event carries the last matching content, at the event's revision.
    assert codec.decode(gone.record)["metadata"]["labels"]["tier"] == "gold"
    assert gone.revision == gone.record.revision == 5  # a fresh store starts at revision 1


async def test_field_selector_filters_by_name(registry: build.Registry) -> None:
    events = registry.modelartifacts.watch("a", options.WatchOptions(
        field_selector=selectors.parse_fields("metadata.name=two"), resource_version="0"))
    await registry.modelartifacts.create(artifact("one"), namespace="a")
    await registry.modelartifacts.create(artifact("two"), namespace="a")
    assert _summary(await _take(events, 1)) == [("ADDED", "two")]


async def test_a_watch_of_one_name_reads_its_key_and_still_filters(
        registry: build.Registry, storage: sqlite.Store) -> None:
    """The storage is asked for the named object's key alone (so other keys' writes do not wake
    the watch), and the selector still decides: ``node-1`` is a prefix of ``node-10``."""
    stores = registry.nodemodelstores
    named = options.WatchOptions(field_selector=selectors.parse_fields("metadata.name=node-1"),
                                 resource_version=str(await storage.current_revision()))
    events = stores.watch("", named)
    for name in ("node-10", "node-2", "node-1"):
        await stores.create({"metadata": {"name": name}, "spec": {}})
    assert _summary(await _take(events, 1)) == [("ADDED", "node-1")]
    asked: list[str] = []
    watch = storage.watch

    def recorded(prefix: str, *, after: int) -> Any:
        asked.append(prefix)
        return watch(prefix, after=after)

    storage.watch = recorded  # type: ignore[method-assign]
    try:
        for opts in (named, options.WatchOptions(
                field_selector=selectors.parse_fields("metadata.name!=node-1"),
                resource_version=named.resource_version)):
            waiting = asyncio.ensure_future(anext(stores.watch("", opts)))
            async with asyncio.timeout(5):
                while len(asked) < 1 + (opts is not named):
                    await asyncio.sleep(0.01)
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
    finally:
        del storage.watch
    assert asked == ["/nodemodelstores/node-1", "/nodemodelstores/"]


async def test_too_old_version_ends_with_a_410_error(registry: build.Registry,
                                                     storage: sqlite.Store) -> None:
    await registry.modelartifacts.create(artifact("one"), namespace="a")
    for round_ in range(3):
        await _label(registry, "one", round=str(round_))
    await storage.compact(await storage.current_revision() - 1)
    events = registry.modelartifacts.watch("a", options.WatchOptions(resource_version="1"))
    [event] = await _take(events, 1)
    assert event.type == "ERROR" and event.status is not None
    assert event.status["code"] == 410 and event.status["reason"] == "Expired"
    assert event.status["message"].startswith("too old resource version: 1 (")


async def test_dry_run_writes_emit_no_events(registry: build.Registry) -> None:
    events = registry.modelartifacts.watch("a", options.WatchOptions(resource_version="0"))
    await registry.modelartifacts.create(artifact("dry"), namespace="a", dry_run=True)
    await registry.modelartifacts.create(artifact("real"), namespace="a")
    assert _summary(await _take(events, 1)) == [("ADDED", "real")]


@pytest.mark.parametrize("opts", [
    options.WatchOptions(send_initial_events=True),
    options.WatchOptions(resource_version_match=options.NOT_OLDER_THAN),
    options.WatchOptions(send_initial_events=True, resource_version_match=options.EXACT),
])
async def test_invalid_watch_combinations(registry: build.Registry,
                                          opts: options.WatchOptions) -> None:
    with pytest.raises(errors.Invalid, match=r"ListOptions\.meta\.k8s\.io"):
        await _take(registry.modelartifacts.watch("a", opts), 1)
