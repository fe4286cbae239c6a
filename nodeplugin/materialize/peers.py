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

When the hub can read ranges blocking (``hub.source.BlockingRanges``, the downloader's fast
path), so does the relay: each range is opened and read by a receive thread (``receive``), from
the peer as from the hub, and the event loop only queues the filled buffers. A peer's failure
in a thread drops it just the same; the bytes are counted by source on the loop. A hub without
that path (a proxy reached over TLS, tests' in-memory hubs) keeps every source on the async
path (``stream``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Protocol

from hub import errors as hub_errors
from hub import files, source
from nodeplugin.materialize import receive
from openapi import manifest, reasons

log = logging.getLogger(__name__)

REPORT_BYTES = receive.BUFFER_BYTES
"""Bytes a body received before it tells its source's counter (one loop wake-up per buffer,
as the deliveries themselves)."""


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

    def open_range(self, digest: str, path: str, *, start: int, end: int,
                   read_timeout: float | None = None) -> receive.Body:
        """The same bytes as a body to read in a worker thread (blocking); ``HubError``,
        OSError, TimeoutError (nothing for ``read_timeout``)."""
        ...


class FilePeer(Protocol):
    """A peer by its stored files (``cache.files`` identities), whatever tree links them."""

    @property
    def node(self) -> str:
        ...

    async def held(self, idents: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int | None]:
        """Which of ``idents`` it stores (None) or is fetching from a hub (bytes so far);
        ``HubError``."""
        ...

    def stream_file(self, ident: tuple[str, str], *, start: int, end: int
                    ) -> AsyncIterator[bytes]:
        ...

    def open_file(self, ident: tuple[str, str], *, start: int, end: int,
                  read_timeout: float | None = None) -> receive.Body:
        ...


class Peers(Protocol):
    async def everyone(self, digest: str) -> Sequence[FilePeer]:
        """Other nodes whose peer port is known, to ask for files by identity (``swarm``),
        those materializing or holding ``digest`` first (may be empty; never raises)."""
        ...

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

    ``on_peer_bytes`` and ``on_hub_bytes`` are told, on the event loop, the size of what
    arrives from a peer or from the hub (the split of the attempt's bytes by source; on the
    blocking path every ``REPORT_BYTES`` and at each body's end). Listing and revisions stay
    the hub's (``hub``). Built on the attempt's event loop.
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
        self._loop = asyncio.get_running_loop()
        self._lock = threading.Lock()
        """Guards ``_peers`` and ``dropped``: receive threads drop peers too."""
        self.dropped: list[str] = []
        """The peers given up on, in order (logs, tests)."""

    @property
    def on_peer(self) -> bool:
        return bool(self._peers)

    @property
    def can_open_ranges(self) -> bool:
        """Whether ``open_range`` serves every range: the hub, the last source, has the fast
        path (the peers always have it)."""
        hub = self._hub
        return isinstance(hub, source.BlockingRanges) and hub.can_open_ranges

    def open_range(
        self, repo: str, commit: str, path: str, *, start: int, end: int, token: str | None,
        read_timeout: float | None = None,
    ) -> receive.Body:
        """``hub.source.BlockingRanges.open_range`` over the first source still alive (blocking:
        a receive thread calls it). A peer that fails to open the range, or later to deliver
        it, is dropped and the failure is ``SourceUnavailable``, so the range loop asks again
        from the last received byte, of the next source."""
        with self._lock:
            peer = self._peers[0] if self._peers else None
        if peer is None:
            hub = self._hub
            if not isinstance(hub, source.BlockingRanges):
                raise hub_errors.HubError(reasons.INVALID_REQUEST, "no blocking client configured")
            body = hub.open_range(repo, commit, path, start=start, end=end, token=token,
                                  read_timeout=read_timeout)
            return _Counted(body, end - start + 1, self._reporter(self._on_hub_bytes))
        try:
            opened = peer.open_range(self._digest, path, start=start, end=end,
                                     read_timeout=read_timeout)
        except (hub_errors.HubError, OSError, TimeoutError) as exc:
            failure = self._failed(peer, exc)
            if failure is exc:
                raise
            raise failure from exc
        return _Counted(opened, end - start + 1, self._reporter(self._on_peer_bytes),
                        on_error=lambda exc: self._failed(peer, exc),
                        on_abandoned=lambda: self._drop(peer, TimeoutError("abandoned")))

    def _reporter(self, count: Callable[[int], None]) -> Callable[[int], None]:
        """``count`` called on the event loop from any thread (an ended loop: nothing to tell)."""

        def report(size: int) -> None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(count, size)

        return report

    def _failed(self, peer: Candidate, exc: BaseException) -> BaseException:
        """Drop ``peer`` for ``exc`` and say what the range loop is to see: a stall stays a
        ``TimeoutError`` (retried from the last byte), anything else ``SourceUnavailable``."""
        self._drop(peer, exc)
        if isinstance(exc, TimeoutError):
            return exc
        return hub_errors.HubError(reasons.SOURCE_UNAVAILABLE,
                                   f"peer {peer.node} stopped serving ({exc})")

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
            raise hub_errors.HubError(reasons.INVALID_REQUEST, "a peer range needs its end")
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
                reasons.SOURCE_UNAVAILABLE, f"peer {peer.node} stopped serving ({exc})"
            ) from exc
        finally:
            # Closed before its end: the range loop gave up on it (no progress for the stall
            # timeout), which for a peer means it is gone; the next request goes elsewhere.
            if not finished:
                self._drop(peer, TimeoutError("abandoned"))
        if delivered < wanted:
            self._drop(peer, EOFError("short range"))
            raise hub_errors.HubError(reasons.SOURCE_UNAVAILABLE,
                                      f"peer {peer.node} ended the range early")

    def _drop(self, peer: Candidate, exc: BaseException) -> None:
        with self._lock:
            if not any(p is peer for p in self._peers):
                return
            self._peers = [p for p in self._peers if p is not peer]
            self.dropped.append(peer.node)
            after = self._peers[0].node if self._peers else "the hub"
        log.warning("peer %s failed serving %s (%s); the rest comes from %s",
                    peer.node, self._digest, exc, after)


class _Counted:
    """A source's body as the relay hands it to a receive thread: it counts what arrives
    (``report``, every ``REPORT_BYTES`` and at ``close``) and, for a peer, turns a failure
    into the relay's (``on_error``: the peer dropped) and a body closed before its end into
    an abandoned peer (``on_abandoned``), as the async path does when its stream is closed
    early. One thread reads it; ``abort`` may come from another."""

    def __init__(self, body: receive.Body, size: int, report: Callable[[int], None], *,
                 on_error: Callable[[BaseException], BaseException] | None = None,
                 on_abandoned: Callable[[], None] = lambda: None) -> None:
        self._body = body
        self._left = size
        self._report = report
        self._on_error = on_error
        self._on_abandoned = on_abandoned
        self._pending = 0

    def readinto(self, buffer: memoryview) -> int:
        try:
            got = self._body.readinto(buffer)
        except (hub_errors.HubError, OSError, TimeoutError) as exc:
            failure = exc if self._on_error is None else self._on_error(exc)
            if failure is exc:
                raise
            raise failure from exc
        self._left -= got
        self._pending += got
        if self._pending >= REPORT_BYTES:
            self._report(self._pending)
            self._pending = 0
        return got

    def abort(self) -> None:
        self._body.abort()

    def close(self) -> None:
        if self._pending:
            self._report(self._pending)
            self._pending = 0
        if self._left > 0:
            self._on_abandoned()
        self._body.close()
