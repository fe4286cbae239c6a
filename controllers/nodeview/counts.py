"""``status.nodes`` of hub artifacts, computed when an artifact is read: how many nodes hold its
digest Ready, Downloading or Failed, and the downloading nodes' mean progress in steps of 5 (the
exact bytes are ``progress``'s). Never stored: a node's change rewrites no artifact, so it
reaches no watcher of the artifacts (docs/fleet.md). Numbers only: no node is ever named.

The API server's registry asks ``counts`` for every artifact it hands out
(``apiserver/registry/nodecounts.py``) and ``version`` whether its cached answer still holds.
"""

from __future__ import annotations

from controllers.nodeview import index as nodeindex
from controllers.nodeview import progress
from openapi import wire
from openapi.kinds import modelartifact

STEP = 5


def summary(artifact: wire.Readable,
            holdings: list[nodeindex.Holding]) -> modelartifact.NodeCounts:
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


class Counts:
    def __init__(self, index: nodeindex.DigestIndex) -> None:
        self._index = index

    def digest(self, artifact: wire.Readable) -> str:
        """The digest whose holders are counted; ``""``: nothing to count (a claim, an image,
        not resolved yet)."""
        digest, _ = modelartifact.hub_digest(artifact)
        return digest

    def counts(self, artifact: wire.Readable) -> modelartifact.NodeCounts | None:
        digest = self.digest(artifact)
        return summary(artifact, self._index.holders(digest)) if digest else None

    def version(self, digest: str) -> int:
        return self._index.version(digest)
