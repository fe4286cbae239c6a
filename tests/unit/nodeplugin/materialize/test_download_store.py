"""The hub downloader over the node's file store: a digest is assembled from the files the node
holds, only the others are fetched, the capacity reservation counts only those, and a file a
manifest lists twice is fetched once."""

from __future__ import annotations

import asyncio
import os
import pathlib
from collections.abc import AsyncIterator

import pytest

from hub import files as hub_files
from hub import source
from nodeplugin.cache import check, files, layout
from nodeplugin.materialize import capacity, download, interface
from tests.unit.nodeplugin.materialize.test_download import (
    MemoryHub,
    _content,
    _request,
    _settings,
    _settle,
)

MiB = 1 << 20


@pytest.fixture
def cache(tmp_path: pathlib.Path) -> layout.Layout:
    return layout.Layout(tmp_path / "cache")


class Ledger(capacity.Capacity):
    """The capacity ledger over a filesystem that has ``free`` bytes under the high watermark;
    it records every reservation asked for."""

    def __init__(self, root: pathlib.Path, free: int) -> None:
        total = 100 * MiB
        used = total * 80 // 100 - free
        super().__init__(root, high_percent=80,
                         usage=lambda _root: capacity.Usage(total, used))
        self.asked: list[int] = []

    def reserve(self, key: str, size: int) -> capacity.Reservation:
        self.asked.append(size)
        return super().reserve(key, size)


@pytest.fixture
async def opened() -> AsyncIterator[list[download.HubMaterializer]]:
    made: list[download.HubMaterializer] = []
    yield made
    for m in made:
        await m.close()


def _start(cache: layout.Layout, hub: MemoryHub, made: list[download.HubMaterializer],
           space: capacity.Capacity | None = None) -> download.HubMaterializer:
    sources: dict[interface.SourceKind, source.Source] = {"huggingFace": hub}
    m = download.HubMaterializer(cache, sources, _settings(), space=space)
    made.append(m)
    return m


async def test_a_second_revision_fetches_only_the_changed_file(
        cache: layout.Layout, opened: list[download.HubMaterializer]) -> None:
    first = MemoryHub(_content())
    m = _start(cache, first, opened)
    one = _request(first)
    assert (await _settle(m, one)).state is interface.State.PUBLISHED
    fetched = m.downloaded_bytes
    second = MemoryHub({**first.content, "config.json": b'{"a": 2}\n'})
    # room for the changed file only: the reservation must count nothing else
    ledger = Ledger(cache.root, free=64 << 10)
    m2 = _start(cache, second, opened, space=ledger)
    two = _request(second)
    assert one.digest != two.digest
    progress = await m2.ensure(two)
    assert (await _settle(m2, two)).state is interface.State.PUBLISHED
    assert second.served == {"config.json": len(b'{"a": 2}\n')}
    assert m2.downloaded_bytes == len(b'{"a": 2}\n') and m.downloaded_bytes == fetched
    assert ledger.asked == [len(b'{"a": 2}\n')]
    assert progress.state is interface.State.DOWNLOADING
    tree1, tree2 = cache.published_path(one.digest), cache.published_path(two.digest)
    for path, data in second.content.items():
        assert (tree2 / path).read_bytes() == data
        if path not in ("config.json", "empty.txt"):  # one file on disk for both trees
            assert (tree2 / path).stat().st_ino == (tree1 / path).stat().st_ino, path
    assert (tree1 / "config.json").read_bytes() == first.content["config.json"]
    assert check.problem(cache, two.digest) is None
    assert cache.partials() == []


async def test_a_file_listed_twice_is_fetched_once(
        cache: layout.Layout, opened: list[download.HubMaterializer]) -> None:
    weights = os.urandom(2 * MiB)
    hub = MemoryHub({"a/model.bin": weights, "b/model.bin": weights, "c.json": b"{}"})
    ledger = Ledger(cache.root, free=50 * MiB)
    m = _start(cache, hub, opened, space=ledger)
    request = _request(hub)
    assert (await _settle(m, request)).state is interface.State.PUBLISHED
    assert hub.served == {"a/model.bin": 2 * MiB, "c.json": 2}
    assert ledger.asked == [2 * MiB + 2]
    tree = cache.published_path(request.digest)
    assert (tree / "b/model.bin").read_bytes() == weights
    assert (tree / "a/model.bin").stat().st_ino == (tree / "b/model.bin").stat().st_ino
    assert check.problem(cache, request.digest) is None


async def test_files_stored_before_an_attempt_are_linked_and_count_as_held(
        cache: layout.Layout, opened: list[download.HubMaterializer]) -> None:
    """A file the store holds is never fetched and never counted as fetched bytes: progress
    shows it received at once (held), the staged bytes and the source count only what
    arrives."""
    content = _content()
    hub = MemoryHub(content)
    shared = MemoryHub({"weights/model.safetensors": content["weights/model.safetensors"]})
    m = _start(cache, shared, opened)
    assert (await _settle(m, _request(shared))).state is interface.State.PUBLISHED
    hub.gate = asyncio.Event()  # the rest arrives only when let through
    m2 = _start(cache, hub, opened)
    request = _request(hub)
    await m2.ensure(request)
    async with asyncio.timeout(10):
        while (running := m2.running()[0]).received_bytes < 3 * MiB:
            await asyncio.sleep(0.01)
    assert running.staged_bytes is not None and running.staged_bytes < MiB
    assert running.origin == "Hub"
    hub.gate.set()
    hub.gate = None
    assert (await _settle(m2, request)).state is interface.State.PUBLISHED
    assert "weights/model.safetensors" not in hub.served
    entry = next(hub_files.to_entry(f) for f in hub.listed
                 if f.path == "weights/model.safetensors")
    stored = files.of(cache).stored(entry)
    assert stored is not None and stored.st_nlink == 3  # the store and both trees
