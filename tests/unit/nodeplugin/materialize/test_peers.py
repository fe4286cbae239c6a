"""Binding a peer's listing to the digest, and the relay's fallback to the hub."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

import pytest

from hub import errors as hub_errors
from hub import files
from nodeplugin.materialize import peers
from openapi import manifest

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
