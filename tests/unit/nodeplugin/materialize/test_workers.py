"""``workers.fetch``: every part of every file from the source named for its file at that moment,
written and verified in order; the first failure ends the fetch, an integrity failure first."""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import pathlib
from collections.abc import AsyncGenerator

import pytest

from hub import errors as hub_errors
from hub import files as hub_files
from nodeplugin.cache import files, layout
from nodeplugin.materialize import (
    attempt,
    capacity,
    checkpoint,
    limits,
    ranges,
    receive,
    transfer,
    workers,
)
from openapi import manifest, reasons

CONTENT = {"a.bin": bytes(range(256)) * 40, "b.bin": b"\x07" * 9000}


class Bytes:
    """An async-only source of ``CONTENT``; remembers which paths and tokens it was asked."""

    def __init__(self, name: str, content: dict[str, bytes]) -> None:
        self.name = name
        self.content = content
        self.asked: list[tuple[str, str | None]] = []

    async def resolve_revision(self, repo: str, revision: str, *, token: str | None) -> str:
        return revision

    async def list_files(self, repo: str, commit: str, *, token: str | None
                         ) -> list[hub_files.RemoteFile]:
        return []

    async def stream(self, repo: str, commit: str, path: str, *, start: int = 0,
                     end: int | None = None, token: str | None) -> AsyncGenerator[bytes, None]:
        self.asked.append((path, token))
        data = self.content[path]
        stop = len(data) if end is None else end + 1
        for at in range(start, stop, 1000):
            yield data[at:min(stop, at + 1000)]
            await asyncio.sleep(0)


def _node(tmp: pathlib.Path, pool: concurrent.futures.Executor) -> attempt.Node:
    cache = layout.Layout(tmp / "cache")
    cache.create()
    return attempt.Node(
        cache=cache, requests=limits.RequestLimiter(2), rate=limits.RateLimiter(0),
        budget=limits.Budget(1 << 20), capacity=capacity.Capacity(cache.root),
        tuning=transfer.Tuning(part_bytes=3000, checkpoint_bytes=4096),
        policy=ranges.Policy(stall_seconds=30.0, max_failures=2, retry_base_seconds=0.01),
        workers=2, executor=pool, buffers=receive.BufferPool(), store=files.of(cache))


def _transfers(node: attempt.Node, tmp: pathlib.Path, content: dict[str, bytes]
               ) -> list[transfer.FileTransfer]:
    staging = tmp / "staging"
    staging.mkdir()
    writer = transfer.LedgerWriter(checkpoint.Ledger.load(staging, "sha256:" + "0" * 64))
    found = []
    for path, data in content.items():
        entry = manifest.Entry(path, "sha256", hashlib.sha256(data).hexdigest(), len(data))
        f = transfer.FileTransfer(entry, staging, writer, node.budget, node.tuning,
                                  lambda n: None, store=node.store)
        f.prepare()
        found.append(f)
    return found


async def test_each_file_comes_from_its_own_source_with_the_token_of_the_moment(
        tmp_path: pathlib.Path) -> None:
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        node = _node(tmp_path, pool)
        todo = _transfers(node, tmp_path, CONTENT)
        hub, peer = Bytes("hub", CONTENT), Bytes("peer", CONTENT)
        token = ["t1"]
        await workers.fetch(todo, node, lambda path: peer if path == "b.bin" else hub,
                            "org/m", "c" * 40, lambda: token[0])
    assert all(f.complete and f.stored for f in todo)
    for f in todo:
        assert f.path.read_bytes() == CONTENT[f.entry.path]
    assert {p for p, _ in hub.asked} == {"a.bin"} and {p for p, _ in peer.asked} == {"b.bin"}
    assert len(hub.asked) == 4  # 10240 bytes in parts of 3000
    assert {t for _, t in hub.asked + peer.asked} == {"t1"}


async def test_an_integrity_failure_is_reported_before_another_failure(
        tmp_path: pathlib.Path) -> None:
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        node = _node(tmp_path, pool)
        todo = _transfers(node, tmp_path, CONTENT)
        lying = Bytes("hub", {**CONTENT, "a.bin": b"\x00" * len(CONTENT["a.bin"])})
        with pytest.raises(transfer.IntegrityError) as caught:
            await workers.fetch(todo, node, lambda path: lying, "org/m", "c" * 40,
                                lambda: None)
    assert caught.value.path == "a.bin"


def test_first_prefers_integrity_then_anything_but_cancellation() -> None:
    broken = hub_errors.HubError(reasons.SOURCE_UNAVAILABLE, "down")
    bad = transfer.IntegrityError("x: sha256 does not match the manifest", path="x")
    group = BaseExceptionGroup("g", [asyncio.CancelledError(), broken,
                                     BaseExceptionGroup("inner", [bad])])
    assert workers.first(group) is bad
    assert workers.first(BaseExceptionGroup("g", [asyncio.CancelledError(), broken])) is broken
    cancelled = asyncio.CancelledError()
    assert workers.first(BaseExceptionGroup("g", [cancelled])) is cancelled
