"""``status.nodes`` of hub artifacts: how many nodes hold the digest Ready, Downloading or Failed,
and the downloading nodes' mean progress in steps of 5.

Inputs: the NodeModelStores (through ``nodeindex``) and the artifacts (indexed by digest).
Output: a status write only when a count changes or the mean crosses a step of 5, so a node
reporting every few percent does not rewrite every artifact each time; and at most one write per
artifact every ``SPACING`` seconds: what changes in between is merged into the next write. Every
artifact write reaches every node plugin's watch of the artifacts, so without the spacing a
rollout (many nodes starting, moving and finishing the same model) costs the API server one event
per node change times the nodes, which grows as the square of the fleet; with it, one event per
artifact per ``SPACING`` times the nodes (docs/performance.md, "Fleet"). Numbers only: no node is
ever named in an artifact.
"""

from __future__ import annotations

import logging

from controllers.nodeview import index as nodeindex
from controllers.nodeview import progress
from controllers.runtime import client as clients
from controllers.runtime import controller as runtime
from controllers.runtime import informer, status
from openapi import wire
from openapi.kinds import modelartifact
from timing import clock as clocks

log = logging.getLogger(__name__)

Key = tuple[str, str]
DIGEST_INDEX = "digest"
STEP = 5
SPACING = 2.0
"""Seconds between two status writes of one artifact (the aggregate lags a node by at most
this, plus the queue)."""


def digest_of(obj: wire.Obj) -> list[str]:
    digest, _ = modelartifact.hub_digest(obj)
    return [digest] if digest else []


def summary(artifact: wire.Obj, holdings: list[nodeindex.Holding]) -> modelartifact.NodeCounts:
    """The ``status.nodes`` value for these holdings."""
    size = modelartifact.size_bytes(artifact) or 0
    counted = progress.tally(holdings)
    nodes = modelartifact.NodeCounts(ready=counted.ready, downloading=len(counted.downloading),
                                     failed=counted.failed)
    if counted.downloading:
        mean = sum(progress.percent(h.downloaded_bytes, h.size_bytes or size)
                   for h in counted.downloading) // len(counted.downloading)
        nodes["downloadingPercent"] = mean // STEP * STEP
    return nodes


class Aggregator(runtime.Runs[Key]):
    name = "aggregation"

    def __init__(self, api: clients.Client, artifacts: informer.Informer,
                 index: nodeindex.DigestIndex, clock: clocks.Clock, *,
                 concurrency: int = 2, spacing: float = SPACING) -> None:
        self._api = api
        self._artifacts = artifacts
        self._index = index
        self._clock = clock
        self._spacing = spacing
        self._written: dict[Key, float] = {}
        """When each artifact's status was last written (monotonic); gone with the artifact."""
        self.writes = 0
        self.controller: runtime.Controller[Key] = runtime.Controller(
            "aggregation", self.reconcile, clock, keys=artifacts.keys, concurrency=concurrency)
        artifacts.add_index(DIGEST_INDEX, digest_of)
        artifacts.add_handler(self._artifact_changed)
        index.subscribe(self._digest_changed)

    def _artifact_changed(self, old: wire.Obj | None, new: wire.Obj | None) -> None:
        if new is not None and digest_of(new):
            self.controller.enqueue(clients.key_of(new))

    def _digest_changed(self, digest: str) -> None:
        for key in self._artifacts.index_keys(DIGEST_INDEX, digest):
            self.controller.enqueue(key)

    async def reconcile(self, key: Key) -> runtime.Result:
        obj = self._artifacts.get(*key)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            self._written.pop(key, None)
            return runtime.DONE
        digests = digest_of(obj)
        if not digests:
            return runtime.DONE
        wanted = summary(obj, self._index.holders(digests[0]))
        if modelartifact.node_counts(obj) == wanted:
            return runtime.DONE
        since = self._clock.monotonic() - self._written.get(key, -self._spacing)
        if since < self._spacing:
            return runtime.Result(requeue_after=self._spacing - since)

        def change(current: wire.Obj) -> None:
            # Only while the digest is still the one counted (the resolver owns the rest).
            if modelartifact.manifest_digest(modelartifact.of_status(current)) == digests[0]:
                current["nodes"] = wanted

        try:
            written = await status.write(self._api, clients.MODEL_ARTIFACTS, *key, change,
                                         uid=str(obj["metadata"].get("uid")), first=obj)
        except status.Gone:
            return runtime.DONE
        if written is not None:
            self.writes += 1
            self._written[key] = self._clock.monotonic()
        return runtime.DONE
