"""The registry over etcd behind the watch cache (the production wiring of ``--storage=etcd``):
which reads the cache answers, which go to etcd, and bookmarks from etcd's progress."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator

import pytest

from apiserver import __main__ as entry
from apiserver import errors
from apiserver.flags import config
from apiserver.registry import build, events, options
from apiserver.storage import interface, watchcache
from apiserver.storage.etcd import client as etcd_client
from devkit import admitting
from devkit.harness import etcd
from tests.unit.apiserver.registry.conftest import artifact

NS = "ns"


def _settings(member: etcd.Etcd, tmp_path: pathlib.Path) -> config.Settings:
    return config.Settings(
        data_dir=tmp_path, tls_cert_file=tmp_path / "c", tls_private_key_file=tmp_path / "k",
        token_auth_file=tmp_path / "t",
        storage=config.StorageSettings(
            etcd=etcd_client.Config((member.url,), request_timeout=1.0),
            etcd_compaction_interval=0),
    )  # fmt: skip


@pytest.fixture
async def wired(etcd_server: etcd.Etcd,
                tmp_path: pathlib.Path) -> AsyncIterator[build.Registry]:
    storage = entry.open_storage(_settings(etcd_server, tmp_path))
    assert isinstance(storage, watchcache.Cache)
    assert sorted(storage.windows) == ["/modelartifacts/", "/modelprefetches/",
                                       "/modelstorebindings/", "/modelstores/",
                                       "/nodemodelstores/"]
    await storage.start()
    try:
        yield build.build(storage, admission=admitting.standalone())
    finally:
        etcd_server.resume()
        await storage.close()


async def _caught_up(registry: build.Registry, revision: int) -> None:
    assert isinstance(registry.storage, watchcache.Cache)
    window = registry.storage.windows["/modelartifacts/"]
    async with asyncio.timeout(30):
        while window.revision < revision:
            await window.changed()


async def test_resource_version_0_lists_come_from_the_cache(
    wired: build.Registry, etcd_server: etcd.Etcd
) -> None:
    created = await wired.modelartifacts.create(artifact("a"), namespace=NS)
    revision = int(created["metadata"]["resourceVersion"])
    await _caught_up(wired, revision)
    etcd_server.pause()
    listed = await wired.modelartifacts.list(NS, options.ListOptions(resource_version="0"))
    assert [r.revision for r in listed.records] == [revision]
    paged = await wired.modelartifacts.list(NS, options.ListOptions(resource_version="0",
                                                                    limit=1))  # fmt: skip
    assert len(paged.records) == 1 and paged.continue_token == ""
    with pytest.raises(interface.Timeout):  # consistent: etcd, which answers nothing
        await wired.modelartifacts.list(NS)


async def test_not_older_than_waits_for_the_cache(wired: build.Registry) -> None:
    created = await wired.modelartifacts.create(artifact("b"), namespace=NS)
    rv = created["metadata"]["resourceVersion"]
    listed = await wired.modelartifacts.list(NS, options.ListOptions(
        resource_version=rv, resource_version_match=options.NOT_OLDER_THAN))
    assert [r.key for r in listed.records] == [f"/modelartifacts/{NS}/b"]
    assert listed.revision >= int(rv)
    with pytest.raises(errors.Timeout):  # newer than etcd itself: refused at once
        await wired.modelartifacts.list(NS, options.ListOptions(
            resource_version=str(int(rv) + 1000), resource_version_match=options.NOT_OLDER_THAN))


async def test_watch_bookmarks_follow_etcd_progress(tmp_path: pathlib.Path) -> None:
    with etcd.running(tmp_path / "etcd", progress_interval=0.2) as member:
        storage = entry.open_storage(_settings(member, tmp_path))
        await storage.start()
        try:
            registry = build.build(storage, admission=admitting.standalone())
            created = await registry.modelartifacts.create(artifact("c"), namespace=NS)
            rv = created["metadata"]["resourceVersion"]
            stream = registry.modelartifacts.watch(NS, options.WatchOptions(
                resource_version=rv, allow_bookmarks=True))
            # writes elsewhere move etcd on; nothing changes under modelartifacts
            other = await registry.nodemodelstores.create(
                {"metadata": {"name": "node-a"}, "spec": {}})
            moved = int(other["metadata"]["resourceVersion"])
            seen: list[events.WatchEvent] = []
            async with asyncio.timeout(30):
                async for event in stream:
                    seen.append(event)
                    if event.revision >= moved:
                        break
            assert {e.type for e in seen} == {"PROGRESS"}
            assert seen[-1].revision >= moved
            await stream.aclose()  # type: ignore[attr-defined]
        finally:
            await storage.close()
