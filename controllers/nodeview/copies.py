"""ModelArtifactCopies: computed per request, never written; one row per node.

The rows are the NodeModelStores listing the artifact's digest (``nodeindex``, O(those nodes))
and the target nodes the artifact's prefetches report (``status.nodes``; a target that has not
started has no store entry yet: Pending). A downloading node's bytes are read live from its
plugin (``GET /model/downloads``) within the progress view's bounds (``progress.Limits``: the
same cap, parallelism, per-node and whole-answer budgets, the same reader), so a row and the
progress total agree; a node not read live carries the bytes it last stored and says so
(``live: false``).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence

from controllers.nodeview import index as nodeindex
from controllers.nodeview import progress
from openapi import resources, states, wire
from openapi.kinds import copies, modelartifact, modelprefetch
from timing import clock as clocks


def _row(holding: nodeindex.Holding, live: dict[str, int], size: int) -> copies.NodeCopy:
    phase: states.Phase = (states.READY if holding.state == states.READY else
                           states.FAILED if holding.state == states.FAILED else
                           states.DOWNLOADING)
    have = live.get(holding.node, holding.downloaded_bytes)
    total = holding.size_bytes or size
    if phase == states.READY:
        have = total or have
    row = copies.NodeCopy(node=holding.node, phase=phase, downloadedBytes=have,
                          live=holding.node in live, referenced=holding.referenced,
                          pinned=holding.pinned)
    if total:
        row["sizeBytes"] = total
        row["percent"] = progress.percent(have, total)
    if holding.source in states.ORIGINS:
        row["source"] = holding.source
    for key, value in (("reason", holding.reason), ("message", holding.message),
                       ("retryTime", holding.retry_time), ("lastUsedTime", holding.last_used)):
        if value:
            row[key] = value  # type: ignore[literal-required]
    return row


Targets = Callable[[wire.Obj], list[str]]
"""A prefetch's target nodes, as the prefetch controllers compute them."""


def _targets(prefetches: Sequence[wire.Readable], digest: str,
             targets: Targets | None = None) -> dict[str, list[wire.Readable]]:
    """node -> an entry per prefetch warming ``digest`` (or not yet saying which digest it
    warms) that targets the node, with the prefetch's name: the target nodes ``targets``
    computes (a prefetch's status names no node) and the ``status.nodes`` entries of a prefetch
    stored before the pool layer."""
    found: dict[str, list[wire.Readable]] = {}
    for prefetch in prefetches:
        warms = modelprefetch.manifest_digest(prefetch)
        if warms and warms != digest:
            continue
        name = wire.text(prefetch, "metadata", "name")
        seen: set[str] = set()
        for entry in modelprefetch.node_entries(prefetch):
            node = wire.text(entry, "name")
            if node:
                seen.add(node)
                found.setdefault(node, []).append({**entry, "prefetch": name})
        for node in targets(dict(prefetch)) if targets is not None else ():
            if node not in seen:
                found.setdefault(node, []).append({"name": node, "prefetch": name})
    return found


def compute(artifact: wire.Obj, holdings: Sequence[nodeindex.Holding],
            prefetches: Sequence[wire.Readable], live: dict[str, int],
            now: datetime.datetime, targets: Targets | None = None
            ) -> copies.ModelArtifactCopies:
    metadata = artifact["metadata"]
    body = copies.ModelArtifactCopies(
        kind=copies.KIND, apiVersion=resources.GROUP_VERSION,
        metadata={"name": metadata["name"], "namespace": metadata.get("namespace", "")},
        timestamp=clocks.rfc3339(now))
    digest, reason = modelartifact.hub_digest(artifact)
    if not digest:
        body.update(copies.ModelArtifactCopies(live=0, nodes=[], reason=reason))
        return body
    size = modelartifact.size_bytes(artifact)
    body.update(copies.ModelArtifactCopies(manifestDigest=digest))
    if size is not None:
        body.update(copies.ModelArtifactCopies(sizeBytes=size))
    rows = {h.node: _row(h, live, size or 0) for h in holdings}
    for node, entries in _targets(prefetches, digest, targets).items():
        row = rows.get(node)
        if row is None:
            first = entries[0]
            row = copies.NodeCopy(node=node, phase=states.PENDING, downloadedBytes=0,
                                  live=False, referenced=False,
                                  pinned=any(modelprefetch.node_pinned(e) for e in entries))
            if size:
                row.update(copies.NodeCopy(sizeBytes=size, percent=0))  # type: ignore[typeddict-item]
            for key in ("reason", "message"):
                text = wire.text(first, key)
                if text:
                    row[key] = text
            rows[node] = row
        row["prefetches"] = sorted({wire.text(e, "prefetch") for e in entries})
    body["live"] = sum(1 for row in rows.values() if row.get("live"))
    body["nodes"] = [rows[node] for node in sorted(rows)]
    return body


class Copies:
    """The copies view the API server serves (``apiserver.registry.copies.View``)."""

    def __init__(self, index: progress.Index, reader: progress.LiveReader | None,
                 clock: clocks.Clock, limits: progress.Limits = progress.DEFAULT_LIMITS) -> None:
        self._index = index
        self._reader = reader
        self._clock = clock
        self.limits = limits
        self.targets: Targets | None = None
        """A prefetch's target nodes (set by ``assembly.build``, which has the pool layer)."""

    async def read(self, artifact: wire.Obj,
                   prefetches: Sequence[wire.Readable]) -> copies.ModelArtifactCopies:
        holdings, live = await progress.observe(self._index, self._reader, self.limits, artifact)
        return compute(artifact, holdings, prefetches, live, self._clock.now(), self.targets)
