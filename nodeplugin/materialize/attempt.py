"""One attempt at one digest: list, check the digest, reserve, fetch and verify, publish.

Only the files the node lacks are fetched: a file the node's file store holds (``cache.files``)
is linked into the staging directory instead, and the capacity reservation counts only what is
still to come. Each fetched file is stored as soon as it verifies. The files' parts are fetched
by ``workers``, each from the source this attempt routes its file to: the hub client, the relay
over a peer holding the whole tree, or, under ``swarm``, a file's own relay.

The attempt runs as a background task of ``download.HubMaterializer``. It ends by publishing the
tree or by raising ``Failed`` with a reason from the API's vocabulary and a message safe to show.
Its token lives only in this object, for this artifact's repository, and is never logged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import errno
import functools
import logging
import pathlib
import time
from collections.abc import Callable, Sequence

from hub import errors as hub_errors
from hub import listing, source
from nodeplugin.cache import files as stored_files
from nodeplugin.cache import fsutil, inflight, layout, publish
from nodeplugin.materialize import anchored as anchored_source
from nodeplugin.materialize import (
    capacity,
    checkpoint,
    interface,
    limits,
    peers,
    ranges,
    receive,
    swarm,
    transfer,
    workers,
)
from openapi import columns, manifest, reasons, states

log = logging.getLogger(__name__)


class Failed(interface.AttemptError):
    """The attempt's end when it does not publish (``interface.AttemptError`` says what each
    part may name)."""


_MEANING: dict[interface.Reason, str] = {
    interface.Reason.INVALID_REQUEST: "the hub configuration or request cannot be executed",
    interface.Reason.ACCESS_DENIED: "the hub refused the credential",
    interface.Reason.SOURCE_UNAVAILABLE: "the hub is unreachable or failing",
    interface.Reason.INTEGRITY_MISMATCH: "a file's size or hash does not match the manifest",
}


def _from_hub(exc: hub_errors.HubError) -> Failed:
    reason = _HUB_REASONS.get(exc.reason, interface.Reason.SOURCE_UNAVAILABLE)
    message = _MEANING[reason]
    if exc.status is not None:
        message += f" (HTTP {exc.status})"
    elif reason is interface.Reason.SOURCE_UNAVAILABLE:
        message += " (network error)"
    return Failed(reason, message, exc.message)


@dataclasses.dataclass(frozen=True, slots=True)
class Node:
    """What every attempt on the node shares."""

    cache: layout.Layout
    requests: limits.RequestLimiter
    rate: limits.RateLimiter
    budget: limits.Budget
    capacity: capacity.Capacity
    tuning: transfer.Tuning
    policy: ranges.Policy
    workers: int
    executor: concurrent.futures.Executor
    """The threads that read ranges from sources that can read them blocking."""
    buffers: receive.BufferPool
    store: stored_files.FileStore
    """The node's file store (``cache.files``): what it holds is linked, not fetched."""
    follow: bool = False
    """A file another node is fetching is followed, not waited for (``swarm.Swarm``)."""


_HUB_REASONS: dict[str, interface.Reason] = {
    reasons.ACCESS_DENIED: interface.Reason.ACCESS_DENIED,
    reasons.INVALID_REQUEST: interface.Reason.INVALID_REQUEST,
    reasons.SOURCE_UNAVAILABLE: interface.Reason.SOURCE_UNAVAILABLE,
    reasons.REVISION_NOT_FOUND: interface.Reason.SOURCE_UNAVAILABLE,
    reasons.ENTRY_NOT_FOUND: interface.Reason.SOURCE_UNAVAILABLE,
}


class Attempt:
    def __init__(
        self,
        request: interface.Request,
        client: source.Source,
        node: Node,
        on_bytes: Callable[[int], None] = lambda n: None,
        *,
        holders: peers.Peers | None = None,
        on_peer_bytes: Callable[[int], None] = lambda n: None,
    ) -> None:
        """``holders``: the nodes to ask first (node-to-node sync on); the hub stays the
        fallback, and the one source without them."""
        self.digest = request.digest
        self.source = request.source
        self.token = request.token
        self._client = client
        self._node = node
        self._on_bytes = on_bytes
        self._holders = holders
        self._on_peer_bytes = on_peer_bytes
        self._bytes: source.Source = client
        """Where file ranges come from: the hub client, or a ``peers.Relay`` over it."""
        self._routes: dict[str, source.Source] = {}
        """A file's own source (``swarm``: a relay over the peers storing it), by path."""
        self._writer: transfer.LedgerWriter | None = None
        self._partial_path: pathlib.Path | None = None
        self.swarm: swarm.Swarm | None = None
        self.relay: peers.Relay | None = None
        self.received = 0
        self.held = 0
        """Of ``received``, the bytes on disk before this attempt fetched any: taken from the
        file store or resumed."""
        self.peer_received = 0
        self._files: list[transfer.FileTransfer] = []
        self.total: int | None = None
        self.last_asked = time.monotonic()
        self.task: asyncio.Task[None] | None = None
        self.idle_canceled = False
        self._reservation: capacity.Reservation | None = None

    def touch(self, token: str | None) -> None:
        """A mount asked again: it keeps the attempt alive and brings the current Secret."""
        self.last_asked = time.monotonic()
        if token is not None:
            self.token = token

    @property
    def origin(self) -> interface.Origin:
        """Where most of the bytes this attempt fetched came from so far: ``Peer`` once peers
        delivered more than half of them (and while a bound peer is the source, before the
        first byte). Bytes taken from the node's own store or resumed count for neither."""
        fetched = self.received - self.held
        if fetched > 0 and self.peer_received * 2 > fetched:
            return states.PEER
        if fetched == 0 and self.relay is not None and self.relay.on_peer:
            return states.PEER
        return states.HUB

    @property
    def staged(self) -> int:
        """Bytes of its files not in the file store yet (its partial directory's own)."""
        return sum(f.offset for f in self._files if not f.stored)

    def progress(self) -> interface.Progress:
        return interface.Progress(
            digest=self.digest,
            state=interface.State.DOWNLOADING,
            received_bytes=self.received,
            total_bytes=self.total,
            origin=self.origin,
            staged_bytes=self.staged,
            message=f"materializing {self.digest}: {columns.size_text(self.received)} of "
            f"{columns.size_text(self.total) if self.total is not None else 'unknown'} received",
        )

    async def run(self) -> None:
        try:
            await self._run()
        except Failed:
            raise
        except hub_errors.HubError as exc:
            raise _from_hub(exc) from exc
        except transfer.IntegrityError as exc:
            raise Failed(interface.Reason.INTEGRITY_MISMATCH,
                         _MEANING[interface.Reason.INTEGRITY_MISMATCH], exc.message,
                         check=exc.check) from exc
        except capacity.InsufficientCapacity as exc:
            raise Failed(interface.Reason.INSUFFICIENT_CAPACITY, exc.message) from exc
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise Failed(interface.Reason.INSUFFICIENT_CAPACITY, "the cache is full") from exc
            code = errno.errorcode.get(exc.errno or 0, "EIO")
            raise Failed(interface.Reason.SOURCE_UNAVAILABLE, f"local I/O error ({code})",
                         f"{type(exc).__name__}: {exc}") from exc
        finally:
            if self._reservation is not None:
                self._reservation.release()

    async def _run(self) -> None:
        src = self.source
        source.check_repo(src.repository)
        anchored = src.revision == ""  # resolved from the spec's digest: no commit (anchored.py)
        if not anchored:
            source.check_commit(src.revision)
        if await asyncio.to_thread(self._node.cache.is_published, self.digest):
            return  # an attempt that ended a moment ago published it
        entries = await self._from_peers(anchored_source.NoCommit() if anchored else self._client)
        if entries is None and anchored:
            raise Failed(interface.Reason.SOURCE_UNAVAILABLE,
                         f"no Ready node holds it yet: {anchored_source.MESSAGE}")
        if entries is None:
            async with self._node.requests.slot():  # listing requests count toward the limit
                _, entries, digest = await listing.manifest_for(
                    self._client, src.repository, src.revision, src.allow_patterns,
                    src.ignore_patterns, token=self.token,
                )
            if digest != self.digest:
                raise Failed(interface.Reason.INTEGRITY_MISMATCH,
                             "the listing's manifest digest differs from the artifact's",
                             check=interface.Check.MANIFEST)
        interface.refuse_reserved((e.path for e in entries), Failed)
        self.total = sum(e.size for e in entries)
        partial = await asyncio.to_thread(self._partial)
        writer = transfer.LedgerWriter(checkpoint.Ledger.load(partial.path, self.digest))
        writer.ledger.keep_only({e.path for e in entries})
        await writer.flush()
        self._writer, self._partial_path = writer, partial.path
        files: list[transfer.FileTransfer] = []
        leaders: dict[stored_files.Identity, transfer.FileTransfer] = {}
        for e in entries:
            ident = stored_files.identity(e)
            f = self._transfer(e, leaders.get(ident) if e.size else None)
            leaders.setdefault(ident, f)
            files.append(f)
        self._files = files
        held = await asyncio.to_thread(lambda: sum(f.prepare() for f in files))
        self.received = self.held = held
        followed = sum(f.entry.size for f in files if f.leader is not None and not f.complete)
        try:
            self._reservation = await self._node.capacity.admit(
                self.digest, self.total - held - followed)
        except capacity.InsufficientCapacity:
            if self.staged == 0:  # links of stored files, empty placeholders, the ledger
                await asyncio.to_thread(fsutil.remove_tree, partial.path)
            raise
        log.info("materializing %s: %d files, %d bytes, %d held (from the file store or an "
                 "earlier attempt)", self.digest, len(files), self.total, held)
        try:
            await self._fetch_leaders([f for f in files if f.leader is None])
            for f in self._files:
                if f.leader is not None and not f.complete:
                    await asyncio.to_thread(f.follow)
                    self.received += f.entry.size  # fetched once, for its leader
                    self.held += f.entry.size
        finally:
            for f in self._files:
                for part in f.parts:
                    self._node.budget.release(part.booked)
                    part.booked = 0
            try:
                await writer.settle()
            finally:
                await writer.flush()
        await asyncio.to_thread(publish.sweep, partial.path, {e.path for e in entries})
        canonical = manifest.canonical_bytes(entries)
        await asyncio.to_thread(
            publish.publish_tree, self._node.cache, partial.path, self.digest,
            manifest_bytes=canonical, store=self._node.store,
        )

    def _transfer(self, entry: manifest.Entry,
                  leader: transfer.FileTransfer | None = None) -> transfer.FileTransfer:
        assert self._writer is not None and self._partial_path is not None
        return transfer.FileTransfer(entry, self._partial_path, self._writer, self._node.budget,
                                     self._node.tuning, self._count,
                                     self._node.buffers.give_back, store=self._node.store,
                                     leader=leader)

    async def _fetch_leaders(self, todo: list[transfer.FileTransfer]) -> None:
        """Every file fetched once: from the tree's relay or the hub, or, under node-to-node
        sync with no peer holding the whole tree, file by file from the peers that store each
        one, the node's share of the rest from the hub (``swarm``)."""
        if self._holders is None or self.relay is not None or all(f.complete for f in todo):
            await self._fetch(todo)
            return
        holders = self._holders
        everyone = await holders.everyone(self.digest)
        if not everyone:
            await self._fetch(todo)
            return
        hooks = swarm.Hooks(fetch=self._fetch, route=self._route, renew=self._renew,
                            relay=self._file_relay)
        self.swarm = swarm.Swarm(self.digest, everyone, hooks, inflight.of(self._node.cache),
                                 stall_seconds=self._node.policy.stall_seconds,
                                 claim_bytes=self._node.workers * self._node.tuning.part_bytes,
                                 find=functools.partial(holders.everyone, self.digest),
                                 follow=self._node.follow)
        await self.swarm.run(todo)
        log.info("materialized %s with peers: %d files from peers, %d from the hub as this "
                 "node's share, %d rounds", self.digest, self.swarm.from_peers,
                 self.swarm.claimed, self.swarm.rounds)

    def _route(self, f: transfer.FileTransfer, relay: source.Source | None) -> None:
        if relay is None:
            self._routes.pop(f.entry.path, None)
            f.on_bytes = self._count
        else:
            self._routes[f.entry.path] = relay
            f.on_bytes = self._count_relayed

    def _file_relay(self, candidates: Sequence[peers.Candidate]) -> peers.Relay:
        return peers.Relay(self.digest, candidates, self._client,
                           on_peer_bytes=self._peer_count, on_hub_bytes=self._on_bytes)

    async def _renew(self, left: list[transfer.FileTransfer]) -> list[transfer.FileTransfer]:
        """Fresh transfers of ``left`` (a round that failed cancelled them mid-way): their
        budget given back, each resumed from its checkpoint or started again."""
        fresh: list[transfer.FileTransfer] = []
        for f in left:
            for part in f.parts:
                self._node.budget.release(part.booked)
                part.booked = 0
            self.received -= f.offset
            renewed = self._transfer(f.entry)
            fresh.append(renewed)
            self._routes.pop(f.entry.path, None)
        held = await asyncio.to_thread(lambda: sum(f.prepare() for f in fresh))
        self.received += held
        by_path = {f.entry.path: f for f in fresh}
        self._files = [by_path.get(f.entry.path, f) if f.leader is None else f
                       for f in self._files]
        return fresh

    async def _from_peers(self, hub: source.Source) -> list[manifest.Entry] | None:
        """The manifest from the first holder whose stored listing hashes to the digest, with
        the relay over it (then ``hub``) as the byte source; None when sync is off or no holder
        binds (then the hub lists, as without peers). Asks no hub, so it works while the hub is
        down."""
        if self._holders is None:
            return None
        found = await self._holders.candidates(self.digest)
        if not found:
            return None
        entries, held = await peers.bound(self.digest, found)
        if not held:
            return None
        self.relay = peers.Relay(self.digest, held, hub,
                                 on_peer_bytes=self._peer_count, on_hub_bytes=self._on_bytes)
        self._bytes = self.relay
        log.info("materializing %s from peer %s", self.digest, held[0].node)
        return entries

    def _peer_count(self, size: int) -> None:
        self.peer_received += size
        self._on_peer_bytes(size)

    def _count_relayed(self, size: int) -> None:
        """A file of a per-file relay: its sources' bytes are told by the relay."""
        self.received += size
        if self._reservation is not None:
            self._reservation.wrote(size)

    def _count(self, size: int) -> None:
        self.received += size
        if self.relay is not None:
            # The relay tells each source's bytes as they arrive (hub bytes to ``on_bytes``).
            if self._reservation is not None:
                self._reservation.wrote(size)
            return
        if self._reservation is not None:
            self._reservation.wrote(size)
        self._on_bytes(size)

    def _partial(self) -> layout.Partial:
        """The resumable staging directory of an earlier attempt, or a fresh one (blocking)."""
        cache = self._node.cache
        cache.create()
        mine = [p for p in cache.partials() if p.digest == self.digest]
        keep = next((p for p in mine if p.resumable), None)
        for other in mine:
            if other is not keep:
                fsutil.remove_tree(other.path)
        return keep if keep is not None else cache.new_partial(self.digest)

    async def _fetch(self, files: list[transfer.FileTransfer]) -> None:
        await workers.fetch(files, self._node, self._source_of, self.source.repository,
                            self.source.revision, lambda: self.token)

    def _source_of(self, path: str) -> source.Source:
        """Where a file's ranges come from: its own route (``swarm``), else the attempt's."""
        return self._routes.get(path, self._bytes)
