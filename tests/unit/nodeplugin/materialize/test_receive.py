"""Parts read by worker threads (``receive``): whole after breaks, retried from the exact byte,
held back at the frontier, aborted on cancel; and the materializer end to end on that path."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import os
import pathlib
import threading
from collections.abc import AsyncIterator, Iterator

import pytest

from hub import errors as hub_errors
from nodeplugin.cache import layout
from nodeplugin.materialize import checkpoint, download, interface, limits, ranges, receive
from tests.unit.nodeplugin.materialize import test_download as memory

FAST = ranges.Policy(stall_seconds=0.5, max_failures=3, retry_base_seconds=0.0)


class Body:
    """A range of ``data`` handed out ``step`` bytes per ``readinto``, with one fault."""

    def __init__(self, data: bytes, start: int, end: int, fault: str, step: int) -> None:
        self.view = memoryview(data)[start : end + 1]
        self.fault = fault
        self.step = step
        self.sent = 0
        self.closed = False
        self.aborted = threading.Event()

    def readinto(self, buffer: memoryview) -> int:
        if self.fault == "dead":
            raise hub_errors.HubError("SourceUnavailable", "network error (ConnectionRefused)")
        if self.sent >= 2500 and self.fault == "reset":
            raise hub_errors.HubError("SourceUnavailable", "network error (ConnectionReset)")
        if self.sent >= 2500 and self.fault == "stall":
            raise TimeoutError("timed out")
        if self.sent >= 2500 and self.fault == "hold":
            self.aborted.wait(30)
            raise hub_errors.HubError("SourceUnavailable", "network error (aborted)")
        chunk = self.view[self.sent : self.sent + min(self.step, len(buffer))]
        buffer[: len(chunk)] = chunk
        self.sent += len(chunk)
        return len(chunk)

    def abort(self) -> None:
        self.aborted.set()

    def close(self) -> None:
        self.closed = True


class Server:
    def __init__(self, data: bytes, faults: list[str], step: int = 1000) -> None:
        self.data = data
        self.faults = faults
        self.step = step
        self.requests: list[tuple[int, int, float]] = []
        self.bodies: list[Body] = []

    def open(self, start: int, end: int, stall: float) -> Body:
        self.requests.append((start, end, stall))
        body = Body(self.data, start, end, self.faults.pop(0) if self.faults else "", self.step)
        self.bodies.append(body)
        return body


@pytest.fixture
def executor() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        yield pool


async def _fetch(server: Server, part: ranges.Part,
                 executor: concurrent.futures.Executor, pool: receive.BufferPool) -> None:
    await receive.fetch(part, server.open, limits.RequestLimiter(2), limits.RateLimiter(0), FAST,
                        what="f", executor=executor, pool=pool)


def _joined(part: ranges.Part) -> bytes:
    return b"".join(bytes(c) for c in part.take(1 << 30, 1 << 30))


@pytest.mark.parametrize("fault", ["reset", "stall"])
async def test_a_broken_request_is_retried_from_the_exact_byte(
    fault: str, executor: concurrent.futures.Executor
) -> None:
    data = os.urandom(10_000)
    server = Server(data, [fault])
    part = ranges.Part(0, 1000, 9000)
    part.reserved = True
    await _fetch(server, part, executor, receive.BufferPool(4096))
    assert _joined(part) == data[1000:9000]
    # The first request broke after three 1000-byte reads: the second starts right after them.
    assert [(s, e) for s, e, _ in server.requests] == [(1000, 8999), (4000, 8999)]
    assert server.requests[0][2] == FAST.stall_seconds  # the stall timeout is the read timeout
    assert all(b.closed for b in server.bodies)


async def test_failures_without_progress_end_the_part(executor: concurrent.futures.Executor
                                                      ) -> None:
    server = Server(os.urandom(5000), ["reset", "dead", "dead", "dead"], step=100)
    part = ranges.Part(0, 0, 5000)
    with pytest.raises(hub_errors.HubError):
        await _fetch(server, part, executor, receive.BufferPool(1024))
    # The reset made progress (its failure counts as the first since then); two more without
    # any reach the limit and the error stands. Every byte received before it was kept.
    assert len(server.requests) == FAST.max_failures
    assert part.received == server.bodies[0].sent
    assert {start for start, _, _ in server.requests[1:]} == {server.bodies[0].sent}


async def test_cancelling_aborts_the_request_and_waits_for_its_thread(
    executor: concurrent.futures.Executor,
) -> None:
    server = Server(os.urandom(10_000), ["hold"])
    part = ranges.Part(0, 0, 10_000)
    task = asyncio.create_task(_fetch(server, part, executor, receive.BufferPool(1000)))
    async with asyncio.timeout(10):
        while part.received < 2500:
            await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (body,) = server.bodies
    assert body.aborted.is_set()
    assert body.closed  # the thread ended before the task did


async def test_the_frontier_is_held_back_until_its_consumer_takes(
    executor: concurrent.futures.Executor,
) -> None:
    size = 3 * receive.FRONTIER_BACKLOG
    data = os.urandom(size)
    server = Server(data, [], step=64 << 10)
    part = ranges.Part(0, 0, size)  # not reserved: the file's frontier
    pool = receive.BufferPool(256 << 10)
    task = asyncio.create_task(_fetch(server, part, executor, pool))
    async with asyncio.timeout(10):
        while part.received < receive.FRONTIER_BACKLOG:
            await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)
    assert not task.done()
    # At most the backlog plus one buffer waits; the rest stays with the sender.
    assert part.received <= receive.FRONTIER_BACKLOG + pool.size
    got = bytearray()
    async with asyncio.timeout(10):
        while not task.done() or part.queued:
            batch = part.take(1 << 30, 1 << 30)
            got += b"".join(bytes(c) for c in batch)
            pool.give_back(batch)
            await asyncio.sleep(0.005)
    await task
    assert bytes(got) == data


def test_the_pool_reuses_its_own_buffers_only() -> None:
    pool = receive.BufferPool(16, keep=2)
    a, b, c = pool.take(), pool.take(), pool.take()
    pool.give_back([a, memoryview(b)[:3], c, b"not a buffer", bytearray(8)])
    assert {id(pool.take()), id(pool.take())} <= {id(a), id(b), id(c)}
    assert len(pool.take()) == 16  # nothing left: a new one


class BlockingHub(memory.MemoryHub):
    """The in-memory hub with the blocking fast path (``hub.source.BlockingRanges``)."""

    can_open_ranges = True

    def open_range(self, repo: str, commit: str, path: str, *, start: int, end: int,
                   token: str | None, read_timeout: float | None = None) -> Body:
        self.tokens.add(token)
        data = bytearray(self.content[path])
        bad = self.corrupt.get(path)
        if bad is not None:
            data[bad] ^= 0xFF
        self.served[path] = self.served.get(path, 0) + end + 1 - start
        return Body(bytes(data), start, end, "", memory.CHUNK)


@pytest.fixture
async def materializers() -> AsyncIterator[list[download.HubMaterializer]]:
    started: list[download.HubMaterializer] = []
    yield started
    for m in started:
        await m.close()


def _start(cache: layout.Layout, hub: memory.MemoryHub, started: list[download.HubMaterializer],
           **overrides: object) -> download.HubMaterializer:
    m = download.HubMaterializer(cache, {"huggingFace": hub}, memory._settings(**overrides))
    started.append(m)
    return m


async def test_the_threaded_path_publishes_verified_bytes(
    tmp_path: pathlib.Path, materializers: list[download.HubMaterializer]
) -> None:
    hub = BlockingHub(memory._content())
    cache = layout.Layout(tmp_path / "cache")
    m = _start(cache, hub, materializers)
    request = memory._request(hub)
    assert (await memory._settle(m, request)).state == interface.State.PUBLISHED
    tree = cache.published_path(request.digest)
    for path, data in hub.content.items():
        assert (tree / path).read_bytes() == data
    assert sum(hub.served.values()) == sum(len(d) for d in hub.content.values())
    assert hub.tokens == {"hf_secret"}
    assert m.node.budget.used == 0
    assert m.node.requests.peak <= 4


async def test_the_threaded_path_refuses_a_corrupted_byte(
    tmp_path: pathlib.Path, materializers: list[download.HubMaterializer]
) -> None:
    hub = BlockingHub(memory._content())
    hub.corrupt["weights/model.safetensors"] = 2_000_000
    cache = layout.Layout(tmp_path / "cache")
    failed = await memory._settle(_start(cache, hub, materializers), memory._request(hub))
    assert failed.reason == interface.Reason.INTEGRITY_MISMATCH
    assert not cache.is_published(memory._request(hub).digest)


async def test_a_restart_in_the_same_boot_resumes_after_the_last_write(
    tmp_path: pathlib.Path, materializers: list[download.HubMaterializer]
) -> None:
    hub = memory.MemoryHub(memory._content())
    hub.gate = asyncio.Event()
    cache = layout.Layout(tmp_path / "cache")
    m = _start(cache, hub, materializers, concurrency=1)
    request = memory._request(hub)
    await m.ensure(request)
    async with asyncio.timeout(30):
        while m.running()[0].received_bytes < 1_500_000:
            hub.gate.set()
            await asyncio.sleep(0)
            hub.gate.clear()
            await asyncio.sleep(0.001)
    await m.close()
    (partial,) = cache.partials()
    ledger = checkpoint.Ledger.load(partial.path, request.digest)
    big = "weights/model.safetensors"
    point = ledger.resume_point(big)
    durable = ledger.get(big)
    assert point is not None
    # The written point never runs past the file, and never behind its durable checkpoint.
    assert (durable.offset if durable else 0) <= point.offset <= (partial.path / big).stat().st_size
    hub.gate = None
    hub.served.clear()
    restarted = _start(cache, hub, materializers)
    assert (await memory._settle(restarted, request)).state == interface.State.PUBLISHED
    assert hub.served.get(big, 0) <= len(hub.content[big]) - point.offset
    assert (cache.published_path(request.digest) / big).read_bytes() == hub.content[big]


def test_written_points_count_only_in_the_boot_that_wrote_them(tmp_path: pathlib.Path) -> None:
    digest = "sha256:" + "ab" * 32
    ledger = checkpoint.Ledger(tmp_path, digest)
    ledger.put("a.bin", checkpoint.FileCheckpoint(64, b"durable"))
    ledger.note_written("a.bin", 128, b"written")
    ledger.note_written("b.bin", 10, b"only-written")
    ledger.flush()
    again = checkpoint.Ledger.load(tmp_path, digest)
    assert again.resume_point("a.bin") == checkpoint.FileCheckpoint(128, b"written")
    assert again.resume_point("b.bin") == checkpoint.FileCheckpoint(10, b"only-written")
    assert again.held_bytes() == 64  # written points are not durable bytes
    body = (tmp_path / layout.RESUMABLE).read_text().replace(
        f'"boot": "{checkpoint.boot_id()}"', '"boot": "another-boot"'
    )
    (tmp_path / layout.RESUMABLE).write_text(body)
    rebooted = checkpoint.Ledger.load(tmp_path, digest)
    assert rebooted.resume_point("a.bin") == checkpoint.FileCheckpoint(64, b"durable")
    assert rebooted.resume_point("b.bin") == checkpoint.FileCheckpoint(0, None)  # from zero
    verified = dataclasses.replace(checkpoint.FileCheckpoint(5, None), verified=True)
    again.put("a.bin", verified)
    assert again.resume_point("a.bin") == verified
