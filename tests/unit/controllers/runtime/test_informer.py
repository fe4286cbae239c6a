"""The informer: list then watch, bookmarks, a relist after 410 (or 504 "Too large resource
version") reported as a difference,
backoff after failures on the manual clock, indexes, and resync."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from controllers.runtime import client as clients
from controllers.runtime import errors, informer
from devkit import clock as manual
from tests.support import waiting

RESOURCE = clients.MODEL_ARTIFACTS


def obj(name: str, version: int, **labels: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "a", "name": name, "resourceVersion": str(version),
                         "labels": labels}}


class Scripted:
    """A client answering lists and watches from scripts the test fills."""

    def __init__(self) -> None:
        self.lists: list[clients.ListResult | Exception] = []
        self.watches: list[list[clients.WatchEvent | Exception]] = []
        self.watched_from: list[str] = []
        self.hang = asyncio.Event()

    async def list(self, resource: clients.Resource, *, namespace: str = "",
                   label_selector: str = "") -> clients.ListResult:
        answer = self.lists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def watch(self, resource: clients.Resource, *, resource_version: str,
                    namespace: str = "", label_selector: str = ""
                    ) -> AsyncIterator[clients.WatchEvent]:
        self.watched_from.append(resource_version)
        script = self.watches.pop(0) if self.watches else []
        for item in script:
            if isinstance(item, Exception):
                raise item
            yield item
        if not self.watches:
            await self.hang.wait()

    async def get(self, resource: clients.Resource, namespace: str, name: str) -> Any:
        raise NotImplementedError

    async def update_status(self, resource: clients.Resource, o: Any) -> Any:
        raise NotImplementedError


async def test_list_watch_bookmarks_and_a_relist_after_expiry() -> None:
    api = Scripted()
    api.lists = [clients.ListResult([obj("x", 1), obj("y", 2)], "2"),
                 clients.ListResult([obj("x", 5), obj("z", 6)], "6")]
    api.watches = [
        [clients.WatchEvent("MODIFIED", obj("x", 3)),
         clients.WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "4"}}),
         errors.Expired("too old")],
        [],
    ]
    seen: list[tuple[str | None, str | None]] = []
    inf = informer.Informer(api, RESOURCE, manual.ManualClock())
    inf.add_handler(lambda old, new: seen.append(
        ((old or {}).get("metadata", {}).get("resourceVersion"),
         (new or {}).get("metadata", {}).get("resourceVersion"))))
    task = asyncio.create_task(inf.run())
    await waiting.until(lambda: len(api.watched_from) == 2)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert api.watched_from == ["2", "6"]
    assert seen == [(None, "1"), (None, "2"), ("1", "3"),  # list, then the watch
                    ("2", None), ("3", "5"), (None, "6")]  # the relist's difference
    assert sorted(inf.keys()) == [("a", "x"), ("a", "z")]


async def test_a_version_the_server_has_not_reached_is_a_relist_too() -> None:
    # the server's store went back to an empty one: the worker's informer held 176; the store's
    # answer (the in-process client's and the HTTP one's, worded as kube-apiserver's) lists
    # again, and what the old store held is deleted from the copy, what it holds now added
    too_large = errors.from_status(504, "Timeout: Too large resource version: 176, current: 6")
    assert isinstance(too_large, errors.TooLarge)
    api = Scripted()
    api.lists = [clients.ListResult([obj("x", 170), obj("y", 176)], "176"),
                 clients.ListResult([obj("z", 6)], "6")]
    api.watches = [[too_large], []]
    seen: list[tuple[str | None, str | None]] = []
    clock = manual.ManualClock()
    inf = informer.Informer(api, RESOURCE, clock)
    inf.add_handler(lambda old, new: seen.append(
        ((old or {}).get("metadata", {}).get("name"),
         (new or {}).get("metadata", {}).get("name"))))
    task = asyncio.create_task(inf.run())
    await waiting.until(lambda: len(api.watched_from) == 2)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert api.watched_from == ["176", "6"] and clock.pending() == []
    assert seen[2:] == [("x", None), ("y", None), (None, "z")]
    assert inf.keys() == [("a", "z")]


async def test_failures_back_off_on_the_clock() -> None:
    api = Scripted()
    api.lists = [errors.ApiError("down", code=503), errors.ApiError("down", code=503),
                 clients.ListResult([obj("x", 1)], "1")]
    clock = manual.ManualClock()
    inf = informer.Informer(api, RESOURCE, clock)
    task = asyncio.create_task(inf.run())
    await waiting.until(lambda: clock.pending() == [0.5])
    assert "503" in inf.last_error and not inf.synced.is_set()
    clock.advance(0.5)
    await waiting.until(lambda: clock.pending() == [1.0])
    clock.advance(1.0)
    await inf.synced.wait()
    assert inf.get("a", "x") is not None and inf.last_error == ""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_indexes_and_resync() -> None:
    api = Scripted()
    api.lists = [clients.ListResult([obj("x", 1, team="red"), obj("y", 2, team="blue")], "2")]
    api.watches = [[clients.WatchEvent("MODIFIED", obj("y", 3, team="red")),
                    clients.WatchEvent("DELETED", obj("x", 3, team="red"))]]
    clock = manual.ManualClock()
    inf = informer.Informer(api, RESOURCE, clock, resync=60)
    inf.add_index("team", lambda o: [o["metadata"]["labels"]["team"]])
    updates: list[str] = []
    inf.add_handler(lambda old, new: updates.append("resync") if old is new else None)
    task = asyncio.create_task(inf.run())
    await waiting.until(lambda: len(api.watched_from) == 1 and inf.get("a", "x") is None)
    assert inf.index_keys("team", "red") == [("a", "y")] and inf.by_index("team", "blue") == []
    await waiting.until(lambda: clock.pending() == [60.0])
    clock.advance(60)
    await waiting.until(lambda: updates)
    assert updates == ["resync"]  # the one object left, seen again
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
