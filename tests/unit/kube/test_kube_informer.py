"""kube.informer.Reflector, the one list-and-watch loop: list, watch from the list's version,
resume from the last version seen, list again only on expiry, back off on failures and on
watches that end at once; and a test that fails when a second loop appears (issue 20)."""

from __future__ import annotations

import ast
import asyncio
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import kube
from devkit import clock as manual
from kube import informer
from tests.support import toolarge, waiting
from timing import backoff as backoffs

REPO = pathlib.Path(__file__).resolve().parents[3]
OWNER = REPO / "kube" / "informer.py"


def obj(name: str, version: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": str(version)}}


class Scripted:
    """ListWatch and Sink at once: scripted lists and watches, and what reached the sink."""

    def __init__(self) -> None:
        self.lists: list[informer.Listed | Exception] = []
        self.watches: list[list[informer.Event | Exception]] = []
        self.watched_from: list[str] = []
        self.seen: list[str] = []
        self.hang = asyncio.Event()

    async def list(self) -> informer.Listed:
        answer = self.lists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def watch(self, resource_version: str) -> AsyncIterator[informer.Event]:
        self.watched_from.append(resource_version)
        script = self.watches.pop(0) if self.watches else None
        if script is None:
            await self.hang.wait()
            return
        for item in script:
            if isinstance(item, Exception):
                raise item
            yield item

    async def replace(self, listed: informer.Listed) -> None:
        self.seen.append(f"list@{listed.resource_version}:{len(listed.items)}")

    async def apply(self, event: informer.Event) -> None:
        self.seen.append(f"{event.type}@{informer.version_of(event.object)}")


async def _run(api: Scripted, clock: manual.ManualClock, until: Any) -> informer.Reflector:
    reflector = informer.Reflector(api, api, what="test", clock=clock)
    task = asyncio.create_task(reflector.run())
    try:
        await waiting.until(lambda: until(reflector))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return reflector


async def test_resumes_from_the_last_version_and_lists_again_only_on_expiry() -> None:
    api = Scripted()
    api.lists = [informer.Listed([obj("a", 1)], "2"), informer.Listed([], "9")]
    api.watches = [
        [informer.Event("MODIFIED", obj("a", 3)),
         informer.Event("BOOKMARK", obj("", 4)),
         kube.ConnectionFailed(0, "ConnectionFailed", "connection reset")],
        [kube.Expired(410, "Expired", "too old")],
    ]
    clock = manual.ManualClock()
    reflector = informer.Reflector(api, api, what="test", clock=clock)
    task = asyncio.create_task(reflector.run())
    try:
        await waiting.until(lambda: clock.pending() == [0.5])  # the failure backs off
        assert "connection reset" in reflector.last_error and reflector.lists == 1
        clock.advance(0.5)
        await waiting.until(lambda: len(api.watched_from) == 3)
        assert api.watched_from == ["2", "4", "9"]  # resumed at the bookmark; relisted at 9
        assert api.seen == ["list@2:1", "MODIFIED@3", "list@9:0"]
        assert reflector.lists == 2 and reflector.last_error == ""
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_failures_and_quick_ends_back_off_doubling() -> None:
    api = Scripted()
    api.lists = [kube.ConnectionFailed(0, "ConnectionFailed", "refused"),
                 kube.ConnectionFailed(0, "ConnectionFailed", "refused"),
                 informer.Listed([], "1")]
    api.watches = [[]]  # the first watch ends at once
    clock = manual.ManualClock()
    reflector = informer.Reflector(api, api, what="test", clock=clock)
    task = asyncio.create_task(reflector.run())
    try:
        for delay in (0.5, 1.0):
            await waiting.until(lambda d=delay: clock.pending() == [d])  # type: ignore[misc]
            clock.advance(delay)
        await waiting.until(lambda: clock.pending() == [0.5])  # a listed, quick-ended watch
        clock.advance(0.5)
        await waiting.until(lambda: api.watched_from == ["1", "1"])
        assert reflector.lists == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_version_the_server_has_not_reached_lists_again_and_replaces_everything(
) -> None:
    # The server's store went back (an empty one after a roll, an older copy): kube-apiserver's
    # 504 "Too large resource version" (as recorded, in a watch's ERROR event or a list's
    # answer) means the same as a 410 here: list again at once, and the sink is rebuilt from
    # that list alone, so objects gone with the old store leave the copy
    recorded = toolarge.status(toolarge.CACHED["list-notolderthan"], 176, 6)
    too_large = kube.errors.from_status(recorded, 504)
    assert isinstance(too_large, kube.TooLargeResourceVersion)
    api = Scripted()
    api.lists = [informer.Listed([obj("a", 170), obj("b", 176)], "176"),
                 informer.Listed([obj("a", 177)], "178")]
    api.watches = [[too_large]]
    clock = manual.ManualClock()
    reflector = await _run(api, clock, lambda r: r.lists == 2 and len(api.watched_from) == 2)
    assert api.watched_from == ["176", "178"]
    assert api.seen == ["list@176:2", "list@178:1"]
    assert clock.pending() == []  # at once, no backoff
    assert reflector.last_error == ""


def test_too_large_is_told_apart_from_other_timeouts() -> None:
    for answer in (toolarge.CACHED["list"], toolarge.CACHED["list-exact"],
                   toolarge.UNCACHED["watch-initial-events"]):
        found = kube.errors.from_status(toolarge.status(answer, 9, 1), 504)
        assert isinstance(found, kube.TooLargeResourceVersion) and found.code == 504
    worded_only = {"kind": "Status", "code": 504, "reason": "Timeout",
                   "message": "Timeout: Too large resource version: 9, current: 1"}
    assert isinstance(kube.errors.from_status(worded_only), kube.TooLargeResourceVersion)
    timeout = {"kind": "Status", "code": 504, "reason": "Timeout",
               "message": "Timeout: the storage did not answer within the request timeout"}
    other = kube.errors.from_status(timeout)
    assert isinstance(other, kube.ServerError)
    assert not isinstance(other, kube.TooLargeResourceVersion)


def test_backoff_doubles_to_its_maximum() -> None:
    backoff = backoffs.Backoff(0.5, 4.0)
    assert [backoff.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 4.0]


# -- one loop -------------------------------------------------------------------------------

PRODUCT = ("apiserver", "controllers", "nodeplugin", "hub", "kube", "certs")
NOT_YET = {
    # cluster mode's trust ConfigMap (issue 20 left it: it re-reads through its own load())
    REPO / "apiserver" / "cluster" / "authconfig.py",
}


def _called(node: ast.AST) -> set[str]:
    names = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call):
            func = inner.func
            names.add((func.attr if isinstance(func, ast.Attribute)
                       else getattr(func, "id", "")).lower())
    return names


def _loops(path: pathlib.Path) -> list[str]:
    """``while`` loops that both list and watch (a wait on one object, or a storage backend's
    own watch, is not a list-and-watch loop)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.While):
            called = _called(node)
            if any("watch" in n for n in called) and any("list" in n for n in called):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_no_second_list_and_watch_loop() -> None:
    scanned = [path for package in PRODUCT for path in sorted((REPO / package).rglob("*.py"))
               if path != OWNER and path not in NOT_YET and "/gen/" not in str(path)]
    assert len(scanned) > 100 and _loops(OWNER)  # it finds the loop where it is
    found = [line for path in scanned for line in _loops(path)]
    assert found == [], "run kube.informer.Reflector instead:\n" + "\n".join(found)
