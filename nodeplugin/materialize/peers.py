"""Peers as another byte source of an attempt: the seam the peer package implements, and the relay.

A ``Peers`` answers the nodes that hold a digest, best first, each as a ``Candidate`` that can
hand over the tree's stored manifest and byte ranges of its files. The attempt binds a
candidate's manifest to the digest before any file byte is fetched (``bound``); from then on the
``Relay`` stands where the hub client stood: every range request goes to the first source still
alive (the bound peers in order, then the hub). A peer that fails a request is dropped for the
rest of the attempt and the request fails like a dropped hub range, so the range loop
(``ranges.fetch_with``) asks again from its last received byte, which then goes to the next
source. The bytes already hashed and checkpointed are never fetched again; the hub serves only
what the peer did not deliver.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Protocol

from hub import errors as hub_errors
from hub import files, source
from openapi import manifest

log = logging.getLogger(__name__)


class Candidate(Protocol):
    @property
    def node(self) -> str:
        """The node's name (logs only)."""
        ...

    async def manifest(self, digest: str) -> bytes:
        """The canonical manifest the peer stored with its published tree; ``HubError``."""
        ...

    def stream(self, digest: str, path: str, *, start: int, end: int) -> AsyncIterator[bytes]:
        """Bytes ``start``..``end`` (inclusive) of one file of the tree; ``HubError``/OSError."""
        ...


class Peers(Protocol):
    async def candidates(self, digest: str) -> Sequence[Candidate]:
        """The Ready nodes other than this one that hold ``digest``, best first (may be
        empty; never raises: a discovery failure is an empty answer and a log line)."""
        ...

    def delivered(self, size: int) -> None:
        """``size`` bytes arrived from a peer (the node's peer byte counter)."""
        ...


async def bound(
    digest: str, candidates: Sequence[Candidate]
) -> tuple[list[manifest.Entry], list[Candidate]]:
    """The manifest of the first candidate whose listing hashes to ``digest``, and the candidates
    that listed it (the first, then every later one whose listing is the same bytes).

    A listing that fails, does not parse as a canonical manifest or hashes to another digest
    (forged, truncated, another tree) is refused and the next candidate asked. ``([], [])``
    when none binds.
    """
    entries: list[manifest.Entry] = []
    held: list[Candidate] = []
    for candidate in candidates:
        try:
            data = await candidate.manifest(digest)
        except (hub_errors.HubError, OSError) as exc:
            log.info("peer %s: no listing of %s (%s)", candidate.node, digest, exc)
            continue
        if manifest.digest_of_bytes(data) != digest:
            log.warning("peer %s: its listing of %s hashes to another digest; refused",
                        candidate.node, digest)
            continue
        try:
            parsed = manifest.parse(data)
        except manifest.ManifestError as exc:
            log.warning("peer %s: its listing of %s is not canonical (%s); refused",
                        candidate.node, digest, exc)
            continue
        if not held:
            entries = parsed
        held.append(candidate)
        # One bound listing is enough to start: later holders are asked only as fallbacks.
        break
    return entries, held


class Relay:
    """A ``hub.source.Source`` for file ranges: the bound peers in order, then the hub.

    ``on_peer_bytes`` and ``on_hub_bytes`` are told the size of every chunk as it arrives from a
    peer or from the hub (the split of the attempt's bytes by source). Listing and revisions
    stay the hub's (``hub``).
    """

    def __init__(
        self,
        digest: str,
        peers: Sequence[Candidate],
        hub: source.Source,
        *,
        on_peer_bytes: Callable[[int], None] = lambda n: None,
        on_hub_bytes: Callable[[int], None] = lambda n: None,
    ) -> None:
        self._digest = digest
        self._peers = list(peers)
        self._hub = hub
        self._on_peer_bytes = on_peer_bytes
        self._on_hub_bytes = on_hub_bytes
        self.dropped: list[str] = []
        """The peers given up on, in order (logs, tests)."""

    @property
    def on_peer(self) -> bool:
        return bool(self._peers)

    async def resolve_revision(self, repo: str, revision: str, *, token: str | None) -> str:
        return await self._hub.resolve_revision(repo, revision, token=token)

    async def list_files(
        self, repo: str, commit: str, *, token: str | None
    ) -> list[files.RemoteFile]:
        return await self._hub.list_files(repo, commit, token=token)

    async def stream(
        self,
        repo: str,
        commit: str,
        path: str,
        *,
        start: int = 0,
        end: int | None = None,
        token: str | None,
    ) -> AsyncGenerator[bytes, None]:
        if not self._peers:
            async for chunk in self._hub.stream(repo, commit, path, start=start, end=end,
                                                token=token):
                self._on_hub_bytes(len(chunk))
                yield chunk
            return
        peer = self._peers[0]
        if end is None:
            raise hub_errors.HubError("InvalidRequest", "a peer range needs its end")
        wanted = end - start + 1
        delivered = 0
        finished = False
        try:
            async for chunk in peer.stream(self._digest, path, start=start, end=end):
                delivered += len(chunk)
                self._on_peer_bytes(len(chunk))
                yield chunk
            finished = True
        except (hub_errors.HubError, OSError, TimeoutError, EOFError) as exc:
            self._drop(peer, exc)
            raise hub_errors.HubError(
                "SourceUnavailable", f"peer {peer.node} stopped serving ({exc})"
            ) from exc
        finally:
            # Closed before its end: the range loop gave up on it (no progress for the stall
            # timeout), which for a peer means it is gone; the next request goes elsewhere.
            if not finished:
                self._drop(peer, TimeoutError("abandoned"))
        if delivered < wanted:
            self._drop(peer, EOFError("short range"))
            raise hub_errors.HubError("SourceUnavailable",
                                      f"peer {peer.node} ended the range early")

    def _drop(self, peer: Candidate, exc: BaseException) -> None:
        if any(p is peer for p in self._peers):
            self._peers = [p for p in self._peers if p is not peer]
            self.dropped.append(peer.node)
            log.warning("peer %s failed serving %s (%s); the rest comes from %s",
                        peer.node, self._digest, exc,
                        self._peers[0].node if self._peers else "the hub")
