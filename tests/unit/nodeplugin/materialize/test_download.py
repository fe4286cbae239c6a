"""HubMaterializer against an in-memory hub: join, verify, fail, back off, resume, cancel."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import pathlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable

import pytest

from hub import errors as hub_errors
from hub import files, listing, source
from nodeplugin.cache import layout
from nodeplugin.materialize import capacity, checkpoint, download, interface, ranges, transfer
from openapi import manifest

REPO = "org/model"
COMMIT = "c" * 40
CHUNK = 64 << 10


def _remote(path: str, data: bytes, lfs: bool) -> files.RemoteFile:
    if lfs:
        return files.RemoteFile(path, len(data), "sha256", hashlib.sha256(data).hexdigest(), True)
    blob = manifest.git_blob_sha1_prefix(len(data)) + data
    return files.RemoteFile(path, len(data), "gitsha1", hashlib.sha1(blob).hexdigest(), False)


class MemoryHub:
    """A ``hub.source.Source`` over in-memory files, with faults and counters."""

    def __init__(self, content: dict[str, bytes]) -> None:
        self.content = content
        self.listed = [_remote(p, d, len(d) > 100_000) for p, d in content.items()]
        self.listings = 0
        self.served: dict[str, int] = {}
        self.tokens: set[str | None] = set()
        self.corrupt: dict[str, int] = {}
        self.gate: asyncio.Event | None = None
        """When set, streaming waits for it after the first chunk of each request."""
        self.listing_error: hub_errors.HubError | None = None

    def digest(self) -> str:
        return listing.build(self.listed, (), ())[2]

    async def resolve_revision(self, repo: str, revision: str, *, token: str | None) -> str:
        return COMMIT

    async def list_files(
        self, repo: str, commit: str, *, token: str | None
    ) -> list[files.RemoteFile]:
        self.listings += 1
        self.tokens.add(token)
        if self.listing_error is not None:
            raise self.listing_error
        return list(self.listed)

    async def stream(
        self, repo: str, commit: str, path: str, *, start: int = 0, end: int | None = None,
        token: str | None,
    ) -> AsyncGenerator[bytes, None]:
        self.tokens.add(token)
        data = self.content[path]
        stop = len(data) if end is None else end + 1
        for offset in range(start, stop, CHUNK):
            chunk = bytearray(data[offset : min(stop, offset + CHUNK)])
            bad = self.corrupt.get(path)
            if bad is not None and offset <= bad < offset + len(chunk):
                chunk[bad - offset] ^= 0xFF
            self.served[path] = self.served.get(path, 0) + len(chunk)
            yield bytes(chunk)
            if self.gate is not None:
                await self.gate.wait()


def _content() -> dict[str, bytes]:
    return {
        "config.json": b'{"a": 1}\n',
        "weights/model.safetensors": os.urandom(3 << 20),
        "weights/extra.bin": os.urandom(1 << 20),
        "empty.txt": b"",
        "tokenizer.json": os.urandom(50_000),
    }


def _settings(**overrides: object) -> download.Settings:
    base = download.Settings(
        concurrency=4,
        memory_bytes=2 << 20,
        tuning=transfer.Tuning(part_bytes=512 << 10, checkpoint_bytes=256 << 10),
        policy=ranges.Policy(stall_seconds=1.0, max_failures=2, retry_base_seconds=0.0),
    )
    return dataclasses.replace(base, **overrides)  # type: ignore[arg-type]


Start = Callable[[layout.Layout, MemoryHub, download.Settings], download.HubMaterializer]


@pytest.fixture
async def materializers() -> AsyncIterator[Start]:
    """``start(cache, hub, settings)``; every materializer is closed at teardown, even when the
    test failed, so no attempt outlives its test."""
    started: list[download.HubMaterializer] = []

    def start(
        cache: layout.Layout, hub: MemoryHub, settings: download.Settings
    ) -> download.HubMaterializer:
        sources: dict[interface.SourceKind, source.Source] = {"huggingFace": hub}
        m = download.HubMaterializer(cache, sources, settings)
        started.append(m)
        return m

    yield start
    for m in started:
        await m.close()


def _request(hub: MemoryHub, token: str | None = "hf_secret") -> interface.Request:
    source = interface.Source("huggingFace", REPO, COMMIT)
    return interface.Request(hub.digest(), source, token)


async def _settle(m: download.HubMaterializer, request: interface.Request) -> interface.Progress:
    async with asyncio.timeout(20):
        while True:
            progress = await m.ensure(request)
            if progress.state != interface.State.DOWNLOADING:
                return progress
            await asyncio.sleep(0.01)


@pytest.fixture
def cache(tmp_path: pathlib.Path) -> layout.Layout:
    return layout.Layout(tmp_path / "cache")


async def test_publishes_verified_bytes_and_joins_concurrent_calls(
    cache: layout.Layout, materializers: Start
) -> None:
    hub = MemoryHub(_content())
    m = materializers(cache, hub, _settings())
    done: list[interface.Completion] = []
    m.add_done_callback(done.append)
    request = _request(hub)
    first = await asyncio.gather(*(m.ensure(request) for _ in range(20)))
    assert {p.state for p in first} == {interface.State.DOWNLOADING}
    assert "materializing sha256:" in first[0].message
    assert (await _settle(m, request)).state == interface.State.PUBLISHED
    tree = cache.published_path(request.digest)
    for path, data in hub.content.items():
        assert (tree / path).read_bytes() == data
    assert hub.listings == 1
    assert sum(hub.served.values()) == sum(len(d) for d in hub.content.values())
    assert hub.tokens == {"hf_secret"}
    assert sorted(os.listdir(cache.partial)) == []
    assert m.node.budget.used == 0
    assert m.node.requests.peak <= 4
    async with asyncio.timeout(5):  # the callback runs as the attempt's task ends
        while not done:
            await asyncio.sleep(0.01)
    assert [(d.digest, d.result, d.published) for d in done] == [
        (request.digest, "Published", True)]
    assert done[0].seconds >= 0
    assert m.downloaded_bytes == sum(len(d) for d in hub.content.values())
    await m.close()
    assert len(done) == 1  # closing with nothing running tells nothing more


async def test_a_corrupted_byte_fails_discards_the_file_and_backs_off(
    cache: layout.Layout, caplog: pytest.LogCaptureFixture, materializers: Start
) -> None:
    hub = MemoryHub(_content())
    hub.corrupt["weights/model.safetensors"] = 2_000_000
    m = materializers(cache, hub, _settings())
    done: list[interface.Completion] = []
    m.add_done_callback(done.append)
    request = _request(hub)
    failed = await _settle(m, request)
    assert failed.state == interface.State.FAILED
    assert failed.reason == interface.Reason.INTEGRITY_MISMATCH
    assert failed.retry_time is not None
    assert "model.safetensors" not in failed.message  # status names no file
    assert "weights/model.safetensors: sha256 does not match" in caplog.text
    assert not cache.is_published(request.digest)
    (partial,) = cache.partials()
    assert not (partial.path / "weights/model.safetensors").exists()
    listings = hub.listings
    again = await m.ensure(request)
    assert again.state == interface.State.FAILED
    assert hub.listings == listings  # backing off: nothing started
    async with asyncio.timeout(5):
        while not done:
            await asyncio.sleep(0.01)
    assert [(d.result, d.published) for d in done] == [("IntegrityMismatch", False)]
    assert [d.check for d in done] == [interface.Check.HASH]  # the metrics' reason
    await m.close()


async def test_a_listing_with_another_digest_fails(
    cache: layout.Layout, materializers: Start
) -> None:
    hub = MemoryHub(_content())
    m = materializers(cache, hub, _settings())
    source = interface.Source("huggingFace", REPO, COMMIT)
    request = interface.Request("sha256:" + "0" * 64, source, None)
    done: list[interface.Completion] = []
    m.add_done_callback(done.append)
    failed = await _settle(m, request)
    assert failed.reason == interface.Reason.INTEGRITY_MISMATCH
    assert hub.served == {}
    async with asyncio.timeout(5):
        while not done:
            await asyncio.sleep(0.01)
    assert [d.check for d in done] == [interface.Check.MANIFEST]
    await m.close()


@pytest.mark.parametrize(
    ("error", "reason", "backs_off"),
    [
        (hub_errors.HubError("AccessDenied", "refused", status=403),
         interface.Reason.ACCESS_DENIED, True),
        (hub_errors.HubError("SourceUnavailable", "hub answered 503", status=503),
         interface.Reason.SOURCE_UNAVAILABLE, True),
        (hub_errors.HubError("InvalidRequest", "bad endpoint"),
         interface.Reason.INVALID_REQUEST, False),
    ],
)
async def test_hub_errors_map_to_reasons(
    cache: layout.Layout, error: hub_errors.HubError, reason: interface.Reason, backs_off: bool,
    materializers: Start,
) -> None:
    hub = MemoryHub(_content())
    hub.listing_error = error
    m = materializers(cache, hub, _settings())
    failed = await _settle(m, _request(hub))
    assert failed.reason == reason
    assert (failed.retry_time is not None) == backs_off
    await m.close()


async def test_insufficient_capacity(cache: layout.Layout, materializers: Start) -> None:
    hub = MemoryHub(_content())
    m = materializers(cache, hub, _settings())
    m.node.capacity._usage = lambda _root: capacity.Usage(10 << 20, 7 << 20)
    failed = await _settle(m, _request(hub))
    assert failed.reason == interface.Reason.INSUFFICIENT_CAPACITY
    assert hub.served == {}
    # nothing was held from before: the staging directory (empty placeholders) is gone at once
    assert cache.partials() == []
    await m.close()


async def test_insufficient_capacity_keeps_bytes_held_from_before(
    cache: layout.Layout, materializers: Start
) -> None:
    hub, request = await _interrupted(cache, materializers)
    held = _checkpointed(cache, request)
    hub.gate = None
    m = materializers(cache, hub, _settings())
    m.node.capacity._usage = lambda _root: capacity.Usage(10 << 20, 10 << 20)
    failed = await _settle(m, request)
    assert failed.reason == interface.Reason.INSUFFICIENT_CAPACITY
    # the verified bytes of the earlier attempt stay for a resume once space is freed
    assert _checkpointed(cache, request) == held
    await m.close()


async def _interrupted(cache: layout.Layout,
                       materializers: Start) -> tuple[MemoryHub, interface.Request]:  # fmt: skip
    """A hub and a request whose attempt was let through the gate chunk by chunk until at
    least 1 MB was durable, then stopped (the caller sets ``hub.gate = None`` before it lets
    bytes flow freely)."""
    hub = MemoryHub(_content())
    request = _request(hub)
    hub.gate = asyncio.Event()
    m = materializers(cache, hub, _settings(concurrency=1))
    await m.ensure(request)
    async with asyncio.timeout(30):
        # Until at least 1 MB is durable: received bytes alone may still sit in memory when the
        # machine is busy, and the point here is what a restart can keep.
        while m.running()[0].received_bytes < 1_500_000 or _checkpointed(cache, request) < 1 << 20:
            hub.gate.set()
            await asyncio.sleep(0)
            hub.gate.clear()
            await asyncio.sleep(0.001)
    await m.close()
    return hub, request


def _checkpointed(cache: layout.Layout, request: interface.Request) -> int:
    """Bytes the attempt's ledger records as durable (0 before its first checkpoint)."""
    partials = cache.partials()
    if not partials or not partials[0].resumable:
        return 0
    return checkpoint.Ledger.load(partials[0].path, request.digest).held_bytes()


async def test_a_restart_resumes_from_checkpoints(
    cache: layout.Layout, materializers: Start
) -> None:
    hub, request = await _interrupted(cache, materializers)
    (partial,) = cache.partials()
    ledger = checkpoint.Ledger.load(partial.path, request.digest)
    # The ledger never claims bytes the file does not hold. (How far the file runs ahead of its
    # last checkpoint depends on how long fsync takes while writing goes on, so it is measured by
    # the resume benchmark, not bounded here.)
    for path in hub.content:
        on_disk = (partial.path / path).stat().st_size if (partial.path / path).exists() else 0
        saved = ledger.get(path)
        assert (saved.offset if saved else 0) <= on_disk, path
    held = ledger.held_bytes()
    assert held >= 1 << 20
    before = sum(hub.served.values())
    hub.gate = None
    hub.served.clear()
    restarted = materializers(cache, hub, _settings())
    assert (await _settle(restarted, request)).state == interface.State.PUBLISHED
    total = sum(len(d) for d in hub.content.values())
    refetched = before + sum(hub.served.values()) - total
    assert refetched >= 0
    # The restart fetches only what the checkpoints did not hold.
    assert sum(hub.served.values()) <= total - held
    tree = cache.published_path(request.digest)
    for path, data in hub.content.items():
        assert (tree / path).read_bytes() == data
    await restarted.close()


async def test_an_attempt_nobody_asks_about_is_canceled_and_keeps_its_files(
    cache: layout.Layout, materializers: Start
) -> None:
    hub = MemoryHub(_content())
    hub.gate = asyncio.Event()
    m = materializers(cache, hub, _settings(idle_cancel_seconds=0.2))
    request = _request(hub)
    await m.ensure(request)
    async with asyncio.timeout(5):
        while m.running():
            await asyncio.sleep(0.02)
    record = m.backoff.get(request.digest)
    assert record is not None and record.reason == interface.Reason.CANCELED
    (partial,) = cache.partials()
    assert partial.resumable
    hub.gate = None
    assert (await _settle(m, request)).state == interface.State.PUBLISHED
    await m.close()


async def test_the_rate_limit_paces_the_download(
    cache: layout.Layout, materializers: Start
) -> None:
    hub = MemoryHub({"a.bin": os.urandom(600_000)})
    m = materializers(cache, hub, _settings(bytes_per_second=1 << 20))
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert (await _settle(m, _request(hub))).state == interface.State.PUBLISHED
    # 600 kB at 1 MiB/s with a quarter second of burst: at least about 0.3 s.
    assert loop.time() - started >= 0.3
    await m.close()
