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
from typing import Any, Protocol

from controllers.nodeview import index as nodeindex
from openapi import sources
from timing import clock as clocks

log = logging.getLogger(__name__)

Obj = dict[str, Any]
KIND = "ModelArtifactProgress"
API_VERSION = "worker.gpustack.ai/v1"

NOT_RESOLVED = ("The artifact is not resolved yet, so there is no content to count; progress"
                " appears once its manifest digest is known.")
CLAIM = ("The artifact's files come from its PersistentVolumeClaim, mounted from the volume and"
         " never downloaded, so there is nothing to count.")
IMAGE = ("The artifact's files come from an image that the container runtime pulls, so no node"
         " downloads it through the model store and there is nothing to count.")


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
        if holding.state == "Ready":
            counted.ready += 1
        elif holding.state == "Downloading":
            counted.downloading.append(holding)
        elif holding.state == "Failed":
            counted.failed += 1
            reason = holding.reason or "Unknown"
            counted.reasons[reason] = counted.reasons.get(reason, 0) + 1
    return counted


def percent(have: int, size: int) -> int:
    return min(100, have * 100 // size) if size > 0 else 0


def hub_digest(artifact: Obj) -> tuple[str, str]:
    """(digest, reason): the digest to count, or why there is nothing to count."""
    source = (artifact.get("spec") or {}).get("source") or {}
    if sources.CLAIM in source:
        return "", CLAIM
    if sources.IMAGE in source:
        return "", IMAGE
    digest = ((artifact.get("status") or {}).get("resolved") or {}).get("manifestDigest")
    return (str(digest), "") if digest else ("", NOT_RESOLVED)


def _head(artifact: Obj, now: datetime.datetime) -> Obj:
    metadata = artifact["metadata"]
    return {
        "kind": KIND,
        "apiVersion": API_VERSION,
        "metadata": {"name": metadata["name"], "namespace": metadata.get("namespace", "")},
        "timestamp": clocks.rfc3339(now),
    }


def compute(artifact: Obj, holdings: Sequence[nodeindex.Holding], live: dict[str, int],
            now: datetime.datetime) -> Obj:
    """The body, from the stored holdings and the live bytes read (node -> bytes)."""
    body = _head(artifact, now)
    digest, reason = hub_digest(artifact)
    if not digest:
        body.update({"ready": 0, "downloading": 0, "failed": 0, "downloadingBytes": 0,
                     "live": 0, "failureReasons": [], "reason": reason})
        return body
    resolved = (artifact.get("status") or {}).get("resolved") or {}
    size = int(resolved.get("sizeBytes") or 0)
    counted = tally(holdings)
    percents: list[int] = []
    total = 0
    for holding in counted.downloading:
        have = live.get(holding.node, holding.downloaded_bytes)
        total += have
        percents.append(percent(have, holding.size_bytes or size))
    body["manifestDigest"] = digest
    if "sizeBytes" in resolved:
        body["sizeBytes"] = resolved["sizeBytes"]
    body.update({"ready": counted.ready, "downloading": len(percents),
                 "failed": counted.failed})
    if percents:
        body["downloadingPercent"] = sum(percents) // len(percents)
    body["downloadingBytes"] = total
    body["live"] = sum(1 for h in counted.downloading if h.node in live)
    body["failureReasons"] = [
        {"reason": r, "count": c}
        for r, c in sorted(counted.reasons.items(), key=lambda item: (-item[1], item[0]))
    ]
    return body


class Progress:
    """The progress view the API server serves (``apiserver.registry.progress.View``)."""

    def __init__(self, index: nodeindex.DigestIndex, reader: LiveReader | None,
                 clock: clocks.Clock, limits: Limits = DEFAULT_LIMITS) -> None:
        self._index = index
        self._reader = reader
        self._clock = clock
        self.limits = limits

    async def read(self, artifact: Obj) -> Obj:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.budget
        digest, _ = hub_digest(artifact)
        holdings = self._index.holders(digest) if digest else []
        live: dict[str, int] = {}
        if digest and self._reader is not None:
            downloading = [h.node for h in holdings if h.state == "Downloading"]
            live = await self._read_live(digest, downloading, deadline)
        return compute(artifact, holdings, live, self._clock.now())

    async def _read_live(self, digest: str, nodes: list[str], deadline: float) -> dict[str, int]:
        reader = self._reader
        assert reader is not None
        asked = [node for node in nodes if reader.knows(node)][: self.limits.cap]
        if not asked:
            return {}
        gate = asyncio.Semaphore(self.limits.parallel)
        live: dict[str, int] = {}

        async def ask(node: str) -> None:
            async with gate:
                try:
                    async with asyncio.timeout(self.limits.per_node):
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
