"""ModelArtifactProgress: the stored counts from the holdings of a digest, and the live fan-out
to the plugins (cap, parallelism, per-node and whole-answer budgets)."""

from __future__ import annotations

import asyncio
from typing import Any

from controllers.nodeview import index as nodeindex
from controllers.nodeview import progress
from devkit import clock as manual
from openapi.kinds import modelartifact

DIGEST = "sha256:" + "ab" * 32
NOW = manual.START


def _artifact(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "qwen", "namespace": "a"},
            "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2-0.5B"}}},
            "status": status}


def _resolved() -> dict[str, Any]:
    return _artifact(resolved={"manifestDigest": DIGEST, "sizeBytes": 1000})


def _hold(node: str, state: str, have: int = 0, size: int = 1000,
          reason: str = "") -> nodeindex.Holding:
    return nodeindex.Holding(node, state, size, have, reason)


def test_counts_mean_and_failure_reasons() -> None:
    holdings = [
        _hold("n1", "Ready", 1000),
        _hold("n2", "Downloading", 250),
        _hold("n3", "Downloading", 500),
        _hold("n4", "Failed", reason="SourceUnavailable"),
        _hold("n5", "Failed", reason="SourceUnavailable"),
        _hold("n6", "Failed", reason="AccessDenied"),
    ]
    body = progress.compute(_resolved(), holdings, {}, NOW)
    assert body["kind"] == "ModelArtifactProgress"
    assert body["metadata"] == {"name": "qwen", "namespace": "a"}
    assert (body["ready"], body["downloading"], body["failed"]) == (1, 2, 3)
    assert body["downloadingPercent"] == 37  # mean of 25 and 50, whole percent
    assert body["downloadingBytes"] == 750
    assert body["live"] == 0 and body["sizeBytes"] == 1000 and body["manifestDigest"] == DIGEST
    assert body["failureReasons"] == [{"reason": "SourceUnavailable", "count": 2},
                                      {"reason": "AccessDenied", "count": 1}]
    assert body["timestamp"] == "2026-01-01T00:00:00Z"
    assert "reason" not in body
    assert "n1" not in str(body) and "node" not in str(body).lower()


def test_live_bytes_replace_stored_ones_and_count_in_live() -> None:
    holdings = [_hold("n2", "Downloading", 250), _hold("n3", "Downloading", 500)]
    body = progress.compute(_resolved(), holdings, {"n2": 900}, NOW)
    assert body["downloadingBytes"] == 1400 and body["live"] == 1
    assert body["downloadingPercent"] == (90 + 50) // 2


def test_percent_absent_when_nothing_downloads() -> None:
    body = progress.compute(_resolved(), [_hold("n1", "Ready")], {}, NOW)
    assert "downloadingPercent" not in body and body["ready"] == 1


def test_reasons_when_there_is_nothing_to_count() -> None:
    assert progress.compute(_artifact(), [], {}, NOW)["reason"] == modelartifact.NOT_RESOLVED
    claim = _artifact()
    claim["spec"] = {"source": {"persistentVolumeClaim": {"claimName": "c"}}}
    assert progress.compute(claim, [], {}, NOW)["reason"] == modelartifact.CLAIM_COUNTS_NOTHING
    image = _artifact()
    image["spec"] = {"source": {"image": {"reference": "r@sha256:" + "0" * 64}}}
    body = progress.compute(image, [], {}, NOW)
    assert body["reason"] == modelartifact.IMAGE_COUNTS_NOTHING and body["ready"] == 0


class FakeIndex:
    def __init__(self, holdings: list[nodeindex.Holding]) -> None:
        self._holdings = holdings

    def holders(self, digest: str) -> list[nodeindex.Holding]:
        return self._holdings if digest == DIGEST else []


class FakeReader:
    """Plugins answering from a table; ``hang`` never answer; tracks concurrency."""

    def __init__(self, bytes_by_node: dict[str, int], *, hang: set[str] = frozenset(),
                 unknown: set[str] = frozenset()) -> None:
        self.table = bytes_by_node
        self.hang = hang
        self.unknown = unknown
        self.asked: list[str] = []
        self.open = 0
        self.max_open = 0
        self.release = asyncio.Event()

    def knows(self, node: str) -> bool:
        return node not in self.unknown

    async def downloads(self, node: str) -> dict[str, int]:
        self.asked.append(node)
        self.open += 1
        self.max_open = max(self.max_open, self.open)
        try:
            if node in self.hang:
                await asyncio.Event().wait()
            await asyncio.sleep(0)
            return {DIGEST: self.table[node]} if node in self.table else {}
        finally:
            self.open -= 1


def _view(holdings: list[nodeindex.Holding], reader: FakeReader,
          limits: progress.Limits = progress.DEFAULT_LIMITS) -> progress.Progress:
    return progress.Progress(FakeIndex(holdings), reader,  # type: ignore[arg-type]
                             manual.ManualClock(), limits)


async def test_fan_out_is_capped_and_bounded_in_parallel() -> None:
    nodes = [f"n{i:03d}" for i in range(100)]
    holdings = [_hold(n, "Downloading", 100) for n in nodes]
    reader = FakeReader({n: 600 for n in nodes})
    body = await _view(holdings, reader).read(_resolved())
    assert len(reader.asked) == 64 and reader.max_open <= 16
    assert body["live"] == 64 and body["downloading"] == 100
    assert body["downloadingBytes"] == 64 * 600 + 36 * 100


async def test_nodes_without_answer_or_digest_contribute_stored_bytes() -> None:
    holdings = [_hold("slow", "Downloading", 100), _hold("done", "Downloading", 200),
                _hold("far", "Downloading", 300), _hold("ok", "Downloading", 400),
                _hold("ready", "Ready", 1000)]
    reader = FakeReader({"ok": 700}, hang={"slow"}, unknown={"far"})
    limits = progress.Limits(per_node=0.05, budget=5.0)
    body = await _view(holdings, reader, limits).read(_resolved())
    assert sorted(reader.asked) == ["done", "ok", "slow"]  # never the node with no plugin
    assert body["live"] == 1
    assert body["downloadingBytes"] == 100 + 200 + 300 + 700


async def test_the_whole_answer_is_cut_at_the_budget() -> None:
    holdings = [_hold("a", "Downloading", 100), _hold("b", "Downloading", 200)]
    reader = FakeReader({"a": 500}, hang={"b"})
    limits = progress.Limits(per_node=60.0, budget=0.1)
    body = await _view(holdings, reader, limits).read(_resolved())
    assert body["live"] == 1 and body["downloadingBytes"] == 500 + 200
