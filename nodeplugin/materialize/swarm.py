"""Files from peers by content identity, and cold nodes splitting the hub's work between them.

Used by an attempt under node-to-node sync when no peer holds its whole digest (then the tree
relay of ``peers`` serves it). The files the node lacks are fetched in rounds, each round's
batch running beside the later ones (a round comes every ``POLL_SECONDS`` while files are left):

1. *Survey*: the other nodes whose peer port is known (``Peers.everyone``, listed again every
   ``REFRESH_SECONDS``: those materializing or holding the digest first, a bounded number) are
   asked which of those files they have (``FilePeer.held``: the peer port's ``POST
   /peer/v1/held``): stored (a verified file, whichever tree links it, or none yet: a
   downloading node stores each file as it verifies), or being fetched from a hub now, with
   the bytes so far.
2. A file some peer stores is fetched from those peers (``peers.Relay`` over ``ByIdentity``: the
   first holder, the next one when it fails, then the hub from the last verified byte).
3. A file nobody has is *claimed* (``cache.inflight``: this node's peer port answers it as
   fetching from now on) and fetched from the hub, while the claimed bytes still to come stay
   under ``claim_bytes`` (what the attempt's workers fetch at once, parts times workers; one
   file at least), in a random order so that nodes starting together pick different files. The
   claims are checked by asking again: a file another node turns out to fetch too is left to it
   by whoever sees the other's claim (the one that claimed second sees it at least), so the hub
   serves each file about once.
4. A file another node is fetching is left to it while its byte count moves; once it stood still
   for the stall timeout (``ranges.Policy.stall_seconds``), or that node stops answering, the
   file is free again and claimed like the others. With ``follow`` on, such a file is not
   waited for but *followed* once its fetcher has bytes of it: fetched in one range from the
   nodes fetching it that have bytes, furthest first (their peer port sends its bytes as they
   arrive, ``peer/growing.py``), then the hub from the last received byte when they stop (a
   fetch that ends unstored, or no byte for the stall timeout). A fetcher with no byte yet may
   still be checking its claim (step 3) and leave the file: it is waited for as without
   ``follow``.

Nothing a peer says is trusted beyond where to ask: every file is hashed against this node's
manifest as it arrives (a followed file's bytes are the fetching node's hub bytes, unverified
there). A file that fails its hash after coming from peers is fetched again
from the hub, and the peers that served it are asked nothing more in this attempt.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import Any

from hub import errors as hub_errors
from hub import source
from nodeplugin.cache import files, inflight
from nodeplugin.materialize import peers, receive, transfer
from openapi import reasons

log = logging.getLogger(__name__)

POLL_SECONDS = 0.2
"""How long a round with nothing to fetch waits before it asks again."""
SURVEY_TIMEOUT = 10.0
REFRESH_SECONDS = 5.0
"""How often the nodes to ask are listed again (nodes that started since come in)."""


class ByIdentity:
    """One file of one ``FilePeer`` as a ``peers.Candidate`` (the relay asks it by the tree's
    digest and the file's path; it asks the peer by the file's identity)."""

    def __init__(self, peer: peers.FilePeer, ident: files.Identity) -> None:
        self._peer = peer
        self._ident = ident

    @property
    def node(self) -> str:
        return self._peer.node

    async def manifest(self, digest: str) -> bytes:
        raise hub_errors.HubError(reasons.SOURCE_UNAVAILABLE, "a stored file has no listing")

    def stream(self, digest: str, path: str, *, start: int, end: int) -> AsyncIterator[bytes]:
        return self._peer.stream_file(self._ident, start=start, end=end)

    def open_range(self, digest: str, path: str, *, start: int, end: int,
                   read_timeout: float | None = None) -> receive.Body:
        return self._peer.open_file(self._ident, start=start, end=end, read_timeout=read_timeout)


@dataclasses.dataclass(slots=True)
class _Waiting:
    offset: int
    since: float


@dataclasses.dataclass(slots=True)
class Hooks:
    """What the swarm needs of its attempt."""

    fetch: Callable[[list[transfer.FileTransfer]], Coroutine[Any, Any, None]]
    """Fetch these files to the end (``Attempt._fetch``), each from its routed source."""
    route: Callable[[transfer.FileTransfer, source.Source | None], None]
    """Fetch this file from this source (None: the hub)."""
    renew: Callable[[list[transfer.FileTransfer]], Awaitable[list[transfer.FileTransfer]]]
    """Fresh transfers of files a failed round left behind, resumed from their checkpoints."""
    relay: Callable[[Sequence[peers.Candidate]], source.Source]
    """A relay over these candidates, then the hub, counting each source's bytes."""


class Swarm:
    def __init__(self, digest: str, everyone: Sequence[peers.FilePeer], hooks: Hooks,
                 registry: inflight.InFlight, *, stall_seconds: float, claim_bytes: int,
                 clock: Callable[[], float] = time.monotonic,
                 find: Callable[[], Awaitable[Sequence[peers.FilePeer]]] | None = None,
                 follow: bool = False) -> None:
        """``everyone``: the nodes to ask first; ``find`` lists them again (every
        ``REFRESH_SECONDS``). ``follow``: a file another node is fetching is followed, not
        waited for."""
        self._digest = digest
        self._peers = list(everyone)
        self._find = find
        self._dropped: set[str] = set()
        self._hooks = hooks
        self._registry = registry
        self._stall = stall_seconds
        self._claim_bytes = claim_bytes
        self._clock = clock
        self._follow = follow
        self._waiting: dict[files.Identity, _Waiting] = {}
        self._hub_only: set[files.Identity] = set()
        self._served_by: dict[str, list[peers.FilePeer]] = {}
        self._listed = clock()
        self.rounds = 0
        self.from_peers = 0
        """Files routed to peers (tests, logs)."""
        self.followed = 0
        """Of those, files followed while another node fetched them."""
        self.claimed = 0
        """Files this node fetched from the hub as its share."""

    async def run(self, todo: list[transfer.FileTransfer]) -> None:
        """Fetch every file of ``todo``. Batches run side by side: while some fetch, the next
        round routes what peers stored since and claims more once the claimed bytes in flight
        are below ``claim_bytes``."""
        pending = [f for f in todo if not f.complete]
        running: dict[asyncio.Task[None], tuple[list[transfer.FileTransfer],
                                                set[files.Identity]]] = {}
        try:
            while pending or running:
                busy = {f.entry.path for batch, _ in running.values() for f in batch}
                idle = [f for f in pending if f.entry.path not in busy]
                if idle:
                    self.rounds += 1
                    await self._refresh()
                    batch, claims = await self._round(idle, self._room(running))
                    if batch:
                        task = asyncio.create_task(self._hooks.fetch(batch))
                        running[task] = (batch, claims)
                if not running:
                    await asyncio.sleep(POLL_SECONDS)
                    continue
                done, _ = await asyncio.wait(running, timeout=POLL_SECONDS,
                                             return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    batch, claims = running.pop(task)
                    for ident in claims:
                        self._registry.release(ident)
                    pending = await self._settle(task, batch, claims, pending)
                pending = [f for f in pending if not f.complete]
        finally:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            for _, claims in running.values():
                for ident in claims:
                    self._registry.release(ident)

    def _room(self, running: dict[asyncio.Task[None], tuple[list[transfer.FileTransfer],
                                                          set[files.Identity]]]) -> int:
        """Bytes that may be claimed now: ``claim_bytes`` less what claimed files still lack."""
        left = sum(f.entry.size - f.offset for batch, claims in running.values()
                   for f in batch if files.identity(f.entry) in claims and not f.complete)
        return self._claim_bytes - left

    async def _settle(self, task: asyncio.Task[None], batch: list[transfer.FileTransfer],
                      claims: set[files.Identity], pending: list[transfer.FileTransfer]
                      ) -> list[transfer.FileTransfer]:
        """A finished batch: nothing to do, or a file that failed its hash after coming from
        peers (fetched again from the hub, with fresh transfers of the batch's unfinished
        files); any other failure ends the attempt."""
        exc = task.exception()
        if exc is None:
            return pending
        if not isinstance(exc, transfer.IntegrityError):
            raise exc
        failed = next((f for f in batch if f.entry.path == exc.path), None)
        if failed is None or files.identity(failed.entry) in claims:
            raise exc  # the hub's bytes: the attempt fails as without peers
        self._liar(failed)
        renewed = await self._hooks.renew([f for f in batch if not f.complete])
        by_path = {f.entry.path: f for f in renewed}
        return [by_path.get(f.entry.path, f) for f in pending]

    def _liar(self, failed: transfer.FileTransfer) -> None:
        ident = files.identity(failed.entry)
        self._hub_only.add(ident)
        served = self._served_by.get(failed.entry.path, [])
        self._dropped.update(p.node for p in served)
        self._peers = [p for p in self._peers if p.node not in self._dropped]
        log.warning("%s of %s failed its hash from peers %s; from the hub now, and those "
                    "peers are asked nothing more", failed.entry.path, self._digest,
                    ", ".join(p.node for p in served))

    async def _refresh(self) -> None:
        if self._find is None or self._clock() - self._listed < REFRESH_SECONDS:
            return
        self._listed = self._clock()
        found = await self._find()
        self._peers = [p for p in found if p.node not in self._dropped]

    async def _round(self, pending: list[transfer.FileTransfer], room: int
                     ) -> tuple[list[transfer.FileTransfer], set[files.Identity]]:
        wanted = [files.identity(f.entry) for f in pending]
        stored, fetching, fetchers = await self._survey(wanted)
        batch: list[transfer.FileTransfer] = []
        free: list[transfer.FileTransfer] = []
        overdue: set[files.Identity] = set()
        now = self._clock()
        for f in pending:
            ident = files.identity(f.entry)
            holders = [] if ident in self._hub_only else stored.get(ident, [])
            if holders:
                self._route_to(f, holders)
                batch.append(f)
            elif ident in fetching and ident not in self._hub_only and self._follow and (
                    started := [p for offset, p in fetchers[ident] if offset > 0]):
                self._follow_from(f, started)
                batch.append(f)
            elif ident in fetching and ident not in self._hub_only:
                if not self._stalled(ident, fetching[ident], now):
                    continue
                overdue.add(ident)  # its fetcher stood still: not waited for again
                free.append(f)
            else:
                free.append(f)
        claims = self._claim(free, room) if room > 0 else set()
        if claims:
            # Asked again: a node that claimed one of these at the same moment shows now.
            stored, fetching, _ = await self._survey(list(claims))
            for f in [f for f in free if files.identity(f.entry) in claims]:
                ident = files.identity(f.entry)
                if ident in self._hub_only:
                    pass
                elif stored.get(ident):
                    self._route_to(f, stored[ident])
                elif ident in fetching and ident not in overdue:
                    self._registry.release(ident)
                    claims.discard(ident)
                    # Not followed yet, even with ``follow``: the other node may be leaving it
                    # to this one at this moment. A later round follows it once it has bytes.
                    self._waiting[ident] = _Waiting(fetching[ident], now)
                    continue
                else:
                    self._hooks.route(f, None)
                batch.append(f)
        self.claimed += len(claims)
        return batch, claims

    def _route_to(self, f: transfer.FileTransfer, holders: list[peers.FilePeer]) -> None:
        ident = files.identity(f.entry)
        self._served_by[f.entry.path] = holders
        self._hooks.route(f, self._hooks.relay([ByIdentity(p, ident) for p in holders]))
        self.from_peers += 1

    def _follow_from(self, f: transfer.FileTransfer, fetchers: list[peers.FilePeer]) -> None:
        f.in_one_part()
        self._route_to(f, fetchers)
        self.followed += 1

    def _claim(self, free: list[transfer.FileTransfer], room: int) -> set[files.Identity]:
        order = list(free)
        random.shuffle(order)
        claims: set[files.Identity] = set()
        size = 0
        for f in order:
            if claims and size + f.entry.size > room:
                continue
            ident = files.identity(f.entry)
            if self._registry.claim(ident, functools.partial(_offset, f), f.path):
                claims.add(ident)
                size += f.entry.size
        return claims

    def _stalled(self, ident: files.Identity, offset: int, now: float) -> bool:
        seen = self._waiting.get(ident)
        if seen is None or offset != seen.offset:
            self._waiting[ident] = _Waiting(offset, now)
            return False
        return now - seen.since >= self._stall

    async def _survey(self, wanted: list[files.Identity]
                      ) -> tuple[dict[files.Identity, list[peers.FilePeer]],
                                 dict[files.Identity, int],
                                 dict[files.Identity, list[tuple[int, peers.FilePeer]]]]:
        """Which peers store each file, how far the furthest fetcher of each got, and the
        fetchers of each with their bytes so far, furthest first."""
        stored: dict[files.Identity, list[peers.FilePeer]] = {}
        fetching: dict[files.Identity, int] = {}
        by_offset: dict[files.Identity, list[tuple[int, peers.FilePeer]]] = {}
        if not self._peers or not wanted:
            return stored, fetching, {}

        async def ask(peer: peers.FilePeer) -> dict[files.Identity, int | None]:
            try:
                async with asyncio.timeout(SURVEY_TIMEOUT):
                    return await peer.held(wanted)
            except (hub_errors.HubError, OSError, TimeoutError) as exc:
                log.info("peer %s: cannot say which files it holds (%s)", peer.node, exc)
                return {}

        answers = await asyncio.gather(*(ask(p) for p in self._peers))
        for peer, held in zip(self._peers, answers, strict=True):
            for ident, offset in held.items():
                if offset is None:
                    stored.setdefault(ident, []).append(peer)
                else:
                    fetching[ident] = max(offset, fetching.get(ident, 0))
                    by_offset.setdefault(ident, []).append((offset, peer))
        fetchers = {ident: sorted(found, key=lambda x: -x[0])
                    for ident, found in by_offset.items()}
        return stored, fetching, fetchers


def _offset(f: transfer.FileTransfer) -> int:
    return f.offset
