"""ModelArtifactProgress: computed per request, never written, naming no node.

The stored part comes from the NodeModelStores listing the artifact's digest (``nodeindex``,
O(those nodes)); the live part asks each downloading node's plugin for its running downloads
(``GET /model/downloads``): at most ``cap`` (64) nodes, ``parallel`` (16) at a time, ``per_node``
(2 s) each, the whole answer within ``budget`` (13 s) of the request. A node not read live (past
the cap, no known plugin, no answer in time, not listing the digest) contributes the bytes it
last wrote and is not counted in ``live``. Deadlines are the event loop's: they bound real
network waits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
from collections.abc import Sequence
from typing import Protocol

from controllers.nodeview import index as nodeindex
from openapi import resources, states, wire
from openapi.kinds import modelartifact, progress
from timing import clock as clocks

log = logging.getLogger(__name__)


class LiveReader(Protocol):
    def knows(self, node: str) -> bool:
        """Whether this node's plugin can be asked at all."""
        ...

    async def downloads(self, node: str) -> dict[str, int]:
        """digest -> downloadedBytes of the node's running downloads; raises on any failure."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    cap: int = 64
    parallel: int = 16
    per_node: float = 2.0
    budget: float = 13.0


DEFAULT_LIMITS = Limits()


@dataclasses.dataclass
class Tally:
    ready: int = 0
    failed: int = 0
    reasons: dict[str, int] = dataclasses.field(default_factory=dict)
    downloading: list[nodeindex.Holding] = dataclasses.field(default_factory=list)


def tally(holdings: Sequence[nodeindex.Holding]) -> Tally:
    counted = Tally()
    for holding in holdings:
        if holding.state == states.READY:
            counted.ready += 1
        elif holding.state == states.DOWNLOADING:
            counted.downloading.append(holding)
        elif holding.state == states.FAILED:
            counted.failed += 1
            reason = holding.reason or "Unknown"
            counted.reasons[reason] = counted.reasons.get(reason, 0) + 1
    return counted


def percent(have: int, size: int) -> int:
    return min(100, have * 100 // size) if size > 0 else 0


def _head(artifact: wire.Obj, now: datetime.datetime) -> progress.ModelArtifactProgress:
    metadata = artifact["metadata"]
    return progress.ModelArtifactProgress(
        kind=progress.KIND,
        apiVersion=resources.GROUP_VERSION,
        metadata={"name": metadata["name"], "namespace": metadata.get("namespace", "")},
        timestamp=clocks.rfc3339(now),
    )


def compute(artifact: wire.Obj, holdings: Sequence[nodeindex.Holding], live: dict[str, int],
            now: datetime.datetime) -> progress.ModelArtifactProgress:
    """The body, from the stored holdings and the live bytes read (node -> bytes)."""
    body = _head(artifact, now)
    digest, reason = modelartifact.hub_digest(artifact)
    if not digest:
        body.update(progress.ModelArtifactProgress(
            ready=0, downloading=0, failed=0, downloadingBytes=0, live=0, failureReasons=[],
            reason=reason))
        return body
    known = modelartifact.size_bytes(artifact)
    size = known or 0
    counted = tally(holdings)
    percents: list[int] = []
    total = 0
    for holding in counted.downloading:
        have = live.get(holding.node, holding.downloaded_bytes)
        total += have
        percents.append(percent(have, holding.size_bytes or size))
    body.update(progress.ModelArtifactProgress(manifestDigest=digest))
    if known is not None:
        body["sizeBytes"] = known
    body.update(progress.ModelArtifactProgress(
        ready=counted.ready, downloading=len(percents), failed=counted.failed))
    if percents:
        body["downloadingPercent"] = sum(percents) // len(percents)
    body["downloadingBytes"] = total
    body["live"] = sum(1 for h in counted.downloading if h.node in live)
    body["failureReasons"] = [
        {"reason": r, "count": c}  # type: ignore[typeddict-item]
        for r, c in sorted(counted.reasons.items(), key=lambda item: (-item[1], item[0]))
    ]
    return body


class Progress:
    """The progress view the API server serves (``apiserver.registry.progress.View``)."""

    def __init__(self, index: Index, reader: LiveReader | None,
                 clock: clocks.Clock, limits: Limits = DEFAULT_LIMITS) -> None:
        self._index = index
        self._reader = reader
        self._clock = clock
        self.limits = limits

    async def read(self, artifact: wire.Obj) -> progress.ModelArtifactProgress:
        holdings, live = await observe(self._index, self._reader, self.limits, artifact)
        return compute(artifact, holdings, live, self._clock.now())


class Index(Protocol):
    def holders(self, digest: str) -> list[nodeindex.Holding]: ...


async def observe(index: Index, reader: LiveReader | None, limits: Limits,
                  artifact: wire.Readable) -> tuple[list[nodeindex.Holding], dict[str, int]]:
    """The nodes listing the artifact's digest, and the live bytes of those downloading it
    (``read_live``, within ``limits.budget`` of now)."""
    deadline = asyncio.get_running_loop().time() + limits.budget
    digest, _ = modelartifact.hub_digest(artifact)
    holdings = index.holders(digest) if digest else []
    if not digest or reader is None:
        return holdings, {}
    downloading = [h.node for h in holdings if h.state == states.DOWNLOADING]
    return holdings, await read_live(reader, limits, digest, downloading, deadline)


async def read_live(reader: LiveReader, limits: Limits, digest: str, nodes: list[str],
                    deadline: float) -> dict[str, int]:
    """node -> the live bytes of ``digest`` of those of ``nodes`` whose plugin answered in time
    (at most ``limits.cap`` asked, ``limits.parallel`` at a time, each within
    ``limits.per_node``, all by ``deadline``, the event loop's time)."""
    asked = [node for node in nodes if reader.knows(node)][: limits.cap]
    if not asked:
        return {}
    gate = asyncio.Semaphore(limits.parallel)
    live: dict[str, int] = {}

    async def ask(node: str) -> None:
        async with gate:
            try:
                async with asyncio.timeout(limits.per_node):
                    running = await reader.downloads(node)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a plugin that does not answer well is not counted
                log.debug("live progress from node %s: %s", node, type(exc).__name__)
                return
        if digest in running:
            live[node] = running[digest]

    tasks = [asyncio.create_task(ask(node)) for node in asked]
    remaining = deadline - asyncio.get_running_loop().time()
    _, pending = await asyncio.wait(tasks, timeout=max(0.0, remaining))
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return live
