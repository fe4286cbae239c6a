from __future__ import annotations

import asyncio

from nodeplugin import apiclient, artifacts
from tests.support import toolarge
from tests.unit.nodeplugin import fakes


def test_from_object_reads_what_authorization_needs() -> None:
    obj = fakes.artifact_object()
    obj["spec"]["allowPatterns"] = ["*.json"]
    obj["spec"]["source"]["huggingFace"]["secretRef"] = {"name": "hf"}
    art = artifacts.from_object(obj)
    assert (art.namespace, art.name, art.uid, art.source_kind) == (
        "team-a", "qwen", "uid-1", "huggingFace")
    assert art.resolved and art.manifest_digest == fakes.DIGEST and art.revision == "c" * 40
    assert art.allow_patterns == ("*.json",) and art.secret_name == "hf"
    bare = artifacts.from_object({"metadata": {"name": "x", "namespace": "n"}})
    assert bare.source_kind == "" and not bare.resolved


async def _until(predicate: object, timeout: float = 2.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():  # type: ignore[operator]
            await asyncio.sleep(0.001)


async def test_lists_pages_then_follows_the_watch_and_resumes() -> None:
    client = fakes.FakeClient([
        fakes.page([fakes.artifact_object("a")], "", next_token="1"),
        fakes.page([fakes.artifact_object("b")], "10"),
    ])
    informer = artifacts.Informer(client, retry_initial=0.001)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), 2)
        assert informer.get("team-a", "a") and informer.get("team-a", "b")
        assert informer.resource_version == "10"
        await client.events.put(apiclient.WatchEvent(
            type="MODIFIED", object=fakes.artifact_object("a", resolved=False, version="11")))
        await client.events.put(apiclient.WatchEvent(
            type="DELETED", object=fakes.artifact_object("b", version="12")))
        await client.events.put(apiclient.WatchEvent(
            type="BOOKMARK", object={"metadata": {"resourceVersion": "15"}}))
        await _until(lambda: informer.resource_version == "15")
        assert not informer.get("team-a", "a").resolved  # type: ignore[union-attr]
        assert informer.get("team-a", "b") is None
        # A dropped connection resumes from the last version, without listing again.
        await client.events.put(apiclient.ApiError("connection reset"))
        await _until(lambda: len(client.watch_calls) == 2)
        assert client.watch_calls == ["10", "15"] and informer.lists == 1
        # 410 Gone lists again.
        await client.events.put(apiclient.WatchEvent(
            type="ERROR", object={"kind": "Status", "code": 410, "message": "too old"}))
        await _until(lambda: informer.lists == 2)
        # and so does kube-apiserver's 504 "Too large resource version" (its store went back)
        await client.events.put(apiclient.WatchEvent(type="ERROR", object=toolarge.status(
            toolarge.UNCACHED["watch-initial-events"], 176, 6)))
        await _until(lambda: informer.lists == 3)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_stays_unsynced_while_the_api_is_down_then_syncs() -> None:
    client = fakes.FakeClient([fakes.page([], "3")])
    client.fail_lists = 3
    informer = artifacts.Informer(client, retry_initial=0.001)
    task = asyncio.create_task(informer.run())
    try:
        await _until(lambda: len(client.list_calls) >= 1)
        assert not informer.synced and "connection refused" in informer.last_error
        await asyncio.wait_for(informer.wait_synced(), 2)
        assert len(client.list_calls) == 4 and informer.last_error == ""
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
