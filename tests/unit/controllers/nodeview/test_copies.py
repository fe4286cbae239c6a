"""ModelArtifactCopies: one row per node from the holdings of a digest and the prefetches'
targets, with live bytes where a plugin answered and the stored ones (said so) elsewhere."""

from __future__ import annotations

import asyncio
from typing import Any

from controllers.nodeview import copies, progress
from controllers.nodeview import index as nodeindex
from devkit import clock as manual
from openapi.kinds import copies as view
from openapi.kinds import modelartifact

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
NOW = manual.START


def _artifact(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "qwen", "namespace": "a"},
            "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2-0.5B"}}},
            "status": status}


def _resolved() -> dict[str, Any]:
    return _artifact(resolved={"manifestDigest": DIGEST, "sizeBytes": 1000})


def _prefetch(name: str, nodes: list[dict[str, Any]], digest: str = DIGEST) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "a"},
            "spec": {"artifactRef": {"name": "qwen"}, "targets": {}},
            "status": {"manifestDigest": digest, "nodes": nodes}}


def _rows(body: view.ModelArtifactCopies) -> dict[str, Any]:
    return {view.node_name(row): row for row in view.nodes(body)}


def test_one_row_per_holder_and_pending_targets() -> None:
    holdings = [
        nodeindex.Holding("n1", "Ready", 1000, 1000, "", source="Peer", referenced=True,
                          last_used="2026-01-01T00:00:00Z", pinned=True),
        nodeindex.Holding("n2", "Downloading", 1000, 250, "", source="Hub"),
        nodeindex.Holding("n3", "Failed", 1000, 100, "SourceUnavailable",
                          message="the hub answered 503", retry_time="2026-01-01T00:05:00Z"),
    ]
    prefetches = [
        _prefetch("warm", [{"name": "n2", "phase": "Downloading", "pinned": True},
                           {"name": "n4", "phase": "Pending", "reason": "NoNodeStore",
                            "message": "no plugin there", "pinned": False}]),
        _prefetch("stale", [{"name": "n5", "phase": "Ready"}], digest=OTHER),
    ]
    body = copies.compute(_resolved(), holdings, prefetches, {"n2": 600}, NOW)
    assert body["kind"] == "ModelArtifactCopies" and body["manifestDigest"] == DIGEST
    rows = _rows(body)
    assert list(rows) == ["n1", "n2", "n3", "n4"]  # by name; n5 warms another digest
    assert rows["n1"] == {"node": "n1", "phase": "Ready", "downloadedBytes": 1000,
                          "live": False, "sizeBytes": 1000, "percent": 100, "source": "Peer",
                          "referenced": True, "pinned": True,
                          "lastUsedTime": "2026-01-01T00:00:00Z"}
    assert (view.node_downloaded(rows["n2"]), view.node_live(rows["n2"])) == (600, True)
    assert view.node_percent(rows["n2"]) == 60 and view.node_prefetches(rows["n2"]) == ["warm"]
    assert view.node_phase(rows["n3"]) == "Failed"
    assert view.node_reason(rows["n3"]) == "SourceUnavailable"
    assert view.node_retry_time(rows["n3"]) == "2026-01-01T00:05:00Z"
    assert (view.node_downloaded(rows["n3"]), view.node_live(rows["n3"])) == (100, False)
    assert rows["n4"]["phase"] == "Pending" and rows["n4"]["reason"] == "NoNodeStore"
    assert view.node_downloaded(rows["n4"]) == 0 and not view.node_pinned(rows["n4"])
    assert body["live"] == 1


def test_nothing_to_list_says_why() -> None:
    body = copies.compute(_artifact(), [], [_prefetch("warm", [{"name": "n1",
                                                                 "phase": "Pending"}])], {}, NOW)
    assert body["nodes"] == [] and view.reason(body) == modelartifact.NOT_RESOLVED


class _Index:
    def __init__(self, holdings: list[nodeindex.Holding]) -> None:
        self._holdings = holdings

    def holders(self, digest: str) -> list[nodeindex.Holding]:
        return self._holdings if digest == DIGEST else []


class _Reader:
    def __init__(self, table: dict[str, int], hang: frozenset[str] = frozenset()) -> None:
        self.table, self.hang, self.asked = table, hang, list[str]()

    def knows(self, node: str) -> bool:
        return True

    async def downloads(self, node: str) -> dict[str, int]:
        self.asked.append(node)
        if node in self.hang:
            await asyncio.Event().wait()
        return {DIGEST: self.table[node]} if node in self.table else {}


async def test_live_reads_share_the_progress_bounds_and_agree_with_it() -> None:
    holdings = [nodeindex.Holding("slow", "Downloading", 1000, 300, "")]
    holdings += [nodeindex.Holding(f"n{i:03d}", "Downloading", 1000, 100, "") for i in range(70)]
    reader = _Reader({h.node: 700 for h in holdings}, hang=frozenset({"slow"}))
    limits = progress.Limits(per_node=0.05)
    index: Any = _Index(holdings)
    body = await copies.Copies(index, reader, manual.ManualClock(), limits).read(_resolved(), [])
    assert len(reader.asked) == limits.cap  # never more plugins asked than progress would ask
    rows = view.nodes(body)
    assert sum(1 for row in rows if view.node_live(row)) == body["live"] == limits.cap - 1
    total = await progress.Progress(index, reader, manual.ManualClock(), limits).read(_resolved())
    assert sum(view.node_downloaded(row) for row in rows) == total["downloadingBytes"]
