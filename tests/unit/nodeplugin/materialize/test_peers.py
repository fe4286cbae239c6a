"""Binding a peer's listing to the digest, and the relay's fallback to the hub, on the async
path and on the fast path (ranges read by receive threads)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator

import pytest

from hub import errors as hub_errors
from hub import files
from nodeplugin.materialize import limits, peers, ranges, receive
from nodeplugin.materialize.peers import Candidate
from openapi import manifest
from tests.unit.nodeplugin.materialize import test_receive as threaded

ENTRIES = [manifest.Entry("a.bin", "sha256", "0" * 64, 4)]
GOOD = manifest.canonical_bytes(ENTRIES)
DIGEST = manifest.digest_of_bytes(GOOD)


class Peer:
    def __init__(self, node: str, listing: bytes, data: bytes = b"abcd",
                 die_after: int | None = None) -> None:
        self.node = node
        self._listing = listing
        self._data = data
        self._die_after = die_after

    async def manifest(self, digest: str) -> bytes:
        return self._listing

    async def stream(self, digest: str, path: str, *, start: int, end: int
                     ) -> AsyncIterator[bytes]:
        for i in range(start, end + 1):
            if self._die_after is not None and i >= self._die_after:
                raise ConnectionResetError("gone")
            yield self._data[i:i + 1]


class Hub:
    def __init__(self) -> None:
        self.asked: list[tuple[int, int | None]] = []

    async def resolve_revision(self, repo: str, revision: str, *, token: str | None) -> str:
        return revision

    async def list_files(self, repo: str, commit: str, *, token: str | None
                         ) -> list[files.RemoteFile]:
        return []

    async def stream(self, repo: str, commit: str, path: str, *, start: int = 0,
                     end: int | None = None, token: str | None) -> AsyncGenerator[bytes, None]:
        self.asked.append((start, end))
        yield b"abcd"[start:(end or 3) + 1]


async def test_a_forged_or_truncated_listing_is_refused_and_the_next_tried() -> None:
    forged = manifest.canonical_bytes([manifest.Entry("a.bin", "sha256", "1" * 64, 4)])
    truncated = GOOD[:-3]
    entries, held = await peers.bound(
        DIGEST, [Peer("x", forged), Peer("y", truncated), Peer("z", GOOD)])
    assert entries == ENTRIES and [p.node for p in held] == ["z"]
    assert await peers.bound(DIGEST, [Peer("x", forged)]) == ([], [])


async def _read(relay: peers.Relay, start: int, end: int) -> bytes:
    out = b""
    async for chunk in relay.stream("r/r", "c" * 40, "a.bin", start=start, end=end, token=None):
        out += chunk
    return out


async def test_a_dying_peer_is_dropped_and_the_rest_comes_from_the_hub() -> None:
    hub = Hub()
    counted: dict[str, int] = {"peer": 0, "hub": 0}
    relay = peers.Relay(DIGEST, [Peer("x", GOOD, die_after=2)], hub,
                        on_peer_bytes=lambda n: counted.__setitem__("peer", counted["peer"] + n),
                        on_hub_bytes=lambda n: counted.__setitem__("hub", counted["hub"] + n))
    got = b""
    with pytest.raises(hub_errors.HubError):
        async for chunk in relay.stream("r/r", "c" * 40, "a.bin", start=0, end=3, token=None):
            got += chunk
    assert got == b"ab" and relay.dropped == ["x"] and not relay.on_peer
    assert await _read(relay, 2, 3) == b"cd"  # the range loop asks again from byte 2
    assert hub.asked == [(2, 3)] and counted == {"peer": 2, "hub": 2}


# The fast path: ranges opened and read by receive threads, from the peer as from the hub.

class BlockingPeer(Peer):
    """A peer with ``open_range``: ``fault`` for its bodies (``test_receive.Body``), or
    ``refuse`` to answer every range 403."""

    def __init__(self, node: str, data: bytes, fault: str = "", refuse: bool = False) -> None:
        super().__init__(node, GOOD, data)
        self.fault = fault
        self.refuse = refuse
        self.opened: list[tuple[int, int, float | None]] = []
        self.bodies: list[threaded.Body] = []

    def open_range(self, digest: str, path: str, *, start: int, end: int,
                   read_timeout: float | None = None) -> receive.Body:
        self.opened.append((start, end, read_timeout))
        if self.refuse:
            raise hub_errors.HubError("AccessDenied", "the peer refused the token", status=403)
        self.bodies.append(threaded.Body(self._data, start, end, self.fault, 1000))
        return self.bodies[-1]


class BlockingHub(Hub):
    can_open_ranges = True

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self.data = data

    def open_range(self, repo: str, commit: str, path: str, *, start: int, end: int,
                   token: str | None, read_timeout: float | None = None) -> receive.Body:
        self.asked.append((start, end))
        return threaded.Body(self.data, start, end, "", 1000)


class Counts:
    """The relay's byte callbacks, and the threads they ran on."""

    def __init__(self) -> None:
        self.bytes = {"peer": 0, "hub": 0}
        self.threads: set[int] = set()

    def counter(self, source: str) -> Callable[[int], None]:
        def count(size: int) -> None:
            self.bytes[source] += size
            self.threads.add(threading.get_ident())
        return count


def _relay(found: list[Candidate], hub: Hub, counts: Counts) -> peers.Relay:
    return peers.Relay(DIGEST, found, hub, on_peer_bytes=counts.counter("peer"),
                       on_hub_bytes=counts.counter("hub"))


async def _fetch(relay: peers.Relay, part: ranges.Part, executor: concurrent.futures.Executor
                 ) -> None:
    def open_body(start: int, end: int, stall: float) -> receive.Body:
        return relay.open_range("r/r", "c" * 40, "a.bin", start=start, end=end, token=None,
                                read_timeout=stall)

    part.reserved = True
    await receive.fetch(part, open_body, limits.RequestLimiter(2), limits.RateLimiter(0),
                        threaded.FAST, what="a.bin", executor=executor,
                        pool=receive.BufferPool(4096))
    await asyncio.sleep(0)  # the last counts, queued by the thread, run on the loop


def _joined(part: ranges.Part) -> bytes:
    return b"".join(bytes(c) for c in part.take(1 << 30, 1 << 30))


async def test_the_relay_reads_blocking_only_when_its_hub_can() -> None:
    assert not _relay([], Hub(), Counts()).can_open_ranges
    assert _relay([], BlockingHub(b""), Counts()).can_open_ranges


@pytest.mark.parametrize("fault", ["reset", "stall"])
async def test_on_the_fast_path_a_peer_failing_mid_range_leaves_the_rest_to_the_hub(
    fault: str, executor: concurrent.futures.Executor
) -> None:
    data = os.urandom(10_000)
    hub, counts = BlockingHub(data), Counts()
    peer = BlockingPeer("x", data, fault=fault)
    relay = _relay([peer], hub, counts)
    part = ranges.Part(0, 0, 10_000)
    await _fetch(relay, part, executor)
    assert _joined(part) == data
    # Three 1000-byte reads from the peer before it broke; the hub from the next byte on.
    assert peer.opened == [(0, 9999, threaded.FAST.stall_seconds)]
    assert hub.asked == [(3000, 9999)] and relay.dropped == ["x"] and not relay.on_peer
    assert counts.bytes == {"peer": 3000, "hub": 7000}
    assert counts.threads == {threading.get_ident()}  # told on the loop, not in the threads


async def test_on_the_fast_path_a_refusing_peer_is_passed_over_for_the_next(
    executor: concurrent.futures.Executor,
) -> None:
    data = os.urandom(6000)
    hub, counts = BlockingHub(data), Counts()
    refusing, good = BlockingPeer("x", data, refuse=True), BlockingPeer("y", data)
    relay = _relay([refusing, good], hub, counts)
    part = ranges.Part(0, 0, 6000)
    await _fetch(relay, part, executor)
    # The refusal is the peer's, not the attempt's: dropped, and the range asked of the next.
    assert _joined(part) == data and relay.dropped == ["x"] and relay.on_peer
    assert [o[:2] for o in good.opened] == [(0, 5999)] and hub.asked == []
    assert counts.bytes == {"peer": 6000, "hub": 0}


async def test_a_peer_body_failure_is_source_unavailable_naming_the_peer() -> None:
    data = os.urandom(4000)
    relay = _relay([BlockingPeer("x", data, fault="dead")], BlockingHub(data), Counts())
    body = await asyncio.to_thread(relay.open_range, "r/r", "c" * 40, "a.bin", start=0,
                                   end=3999, token=None)
    with pytest.raises(hub_errors.HubError) as raised:
        body.readinto(memoryview(bytearray(100)))
    assert raised.value.reason == "SourceUnavailable" and "peer x" in raised.value.message
    body.close()
    assert relay.dropped == ["x"]


async def test_on_the_fast_path_a_range_abandoned_before_its_end_drops_the_peer(
    executor: concurrent.futures.Executor,
) -> None:
    data = os.urandom(10_000)
    peer = BlockingPeer("x", data, fault="hold")
    relay = _relay([peer], BlockingHub(data), Counts())
    part = ranges.Part(0, 0, 10_000)
    task = asyncio.create_task(_fetch(relay, part, executor))
    async with asyncio.timeout(10):
        while not peer.bodies or peer.bodies[0].sent < 2500:  # its thread waits on the peer
            await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert peer.bodies[0].aborted.is_set() and peer.bodies[0].closed
    assert relay.dropped == ["x"]  # as the async path drops a stream closed early


@pytest.fixture
def executor() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        yield pool


async def test_a_peer_body_closed_before_its_end_is_counted_and_drops_the_peer() -> None:
    data = os.urandom(4000)
    counts = Counts()
    relay = _relay([BlockingPeer("x", data)], BlockingHub(data), counts)
    body = await asyncio.to_thread(relay.open_range, "r/r", "c" * 40, "a.bin", start=0,
                                   end=3999, token=None)
    assert body.readinto(memoryview(bytearray(100))) == 100
    body.close()
    await asyncio.sleep(0)
    assert relay.dropped == ["x"] and counts.bytes == {"peer": 100, "hub": 0}
