"""The status reporter's thresholds, on a manual clock with fake downloads: what is written at
once, what waits, how often progress is written per download and per minute, and that a quiet
node writes nothing."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import random
from collections.abc import Mapping
from typing import Any

import kube
from devkit import clock as clocks
from nodeplugin.nodestore import reporter
from nodeplugin.nodestore import status as statuses

TICK = reporter.TICK_SECONDS


@dataclasses.dataclass
class Download:
    digest: str
    size: int
    received: int = 0
    state: str = "Downloading"


class FakeNode:
    """Composes a status from fake downloads, as the real composer does from the node."""

    def __init__(self, downloads: list[Download]) -> None:
        self.downloads = {d.digest: d for d in downloads}
        self.referenced: set[str] = set()
        self.used_percent = 40

    async def compose(self) -> Mapping[str, Any]:
        models = []
        for d in sorted(self.downloads.values(), key=lambda d: d.digest):
            entry: dict[str, Any] = {"digest": d.digest, "state": d.state, "sizeBytes": d.size,
                                     "referenced": d.digest in self.referenced}
            if d.state == "Downloading":
                entry["downloadedBytes"] = d.received
            models.append(entry)
        stored = sum(d.received for d in self.downloads.values())
        return {
            "observedGeneration": 1,
            "capacity": {"totalBytes": 10**12, "storedBytes": stored,
                         "usedPercent": self.used_percent},
            "models": models,
            "conditions": [{"type": "Ready", "status": "True", "reason": "Serving"}],
        }


class Writes:
    def __init__(self, clock: clocks.ManualClock) -> None:
        self.clock = clock
        self.bodies: list[Mapping[str, Any]] = []
        self.times: list[float] = []
        self.fail: BaseException | None = None

    async def __call__(self, status: Mapping[str, Any]) -> None:
        if self.fail is not None:
            raise self.fail
        self.bodies.append(status)
        self.times.append(self.clock.monotonic())


def _digest(i: int) -> str:
    return "sha256:" + f"{i:064x}"


def _reporter(node: FakeNode, clock: clocks.ManualClock) -> tuple[reporter.Reporter, Writes]:
    writes = Writes(clock)
    return reporter.Reporter(node.compose, writes, clock=clock), writes


def _progress_writes(writes: Writes, digest: str) -> list[tuple[float, int]]:
    """(time, downloadedBytes) of each write that listed ``digest`` downloading."""
    found = []
    for when, body in zip(writes.times, writes.bodies, strict=True):
        for m in body["models"]:
            if m["digest"] == digest and m["state"] == "Downloading":
                found.append((when, m["downloadedBytes"]))
    return found


async def test_the_first_report_writes_and_a_quiet_node_writes_nothing_for_five_minutes() -> None:
    clock = clocks.ManualClock()
    node = FakeNode([Download(_digest(1), 1000, 1000, state="Ready")])
    report, writes = _reporter(node, clock)
    assert await report.report() is True
    for _ in range(int(300 / TICK)):
        clock.advance(TICK)
        assert await report.report() is False
    assert len(writes.bodies) == 1 and report.writes == 1


async def test_progress_waits_for_thirty_seconds_and_five_percent() -> None:
    clock = clocks.ManualClock()
    download = Download(_digest(1), 100_000)
    node = FakeNode([download])
    report, writes = _reporter(node, clock)
    await report.report()
    # 0.5% per tick: 5% takes 50 s, so progress is written every 50 s (the 5% rule binds).
    while download.received < download.size:
        clock.advance(TICK)
        download.received = min(download.size, download.received + 500)
        await report.report()
    seen = _progress_writes(writes, download.digest)
    assert len(seen) >= 15  # it did report progress along the way
    for (t0, b0), (t1, b1) in itertools.pairwise(seen):
        assert t1 - t0 >= reporter.PROGRESS_INTERVAL
        assert b1 - b0 >= reporter.PROGRESS_STEP * download.size
    assert len(seen) - 1 <= reporter.PER_DOWNLOAD  # the first write is not a progress write


async def test_a_fast_download_is_written_every_thirty_seconds_at_most() -> None:
    clock = clocks.ManualClock()
    download = Download(_digest(1), 1_000_000)
    node = FakeNode([download])
    report, writes = _reporter(node, clock)
    await report.report()
    for _ in range(18):  # 90 s at 1% per second
        clock.advance(TICK)
        download.received += 50_000
        await report.report()
    seen = _progress_writes(writes, download.digest)
    gaps = [t1 - t0 for (t0, _), (t1, _) in itertools.pairwise(seen)]
    assert gaps and all(gap >= reporter.PROGRESS_INTERVAL for gap in gaps)
    assert report.progress_writes == 3  # at 30 s, 60 s and 90 s


async def test_no_more_than_twenty_progress_writes_per_download() -> None:
    clock = clocks.ManualClock()
    # Its size says 1000 bytes, yet it keeps moving by more than 5% of that: the count caps.
    download = Download(_digest(1), 1000)
    node = FakeNode([download])
    report, _ = _reporter(node, clock)
    await report.report()
    for _ in range(200):
        clock.advance(TICK)
        download.received += 100
        await report.report()
    assert report.progress_writes == reporter.PER_DOWNLOAD


async def test_other_changes_are_written_at_once_with_the_current_progress() -> None:
    clock = clocks.ManualClock()
    slow, other = Download(_digest(1), 100_000), Download(_digest(2), 10, 10, state="Ready")
    node = FakeNode([slow, other])
    report, writes = _reporter(node, clock)
    await report.report()
    clock.advance(1)
    slow.received = 1_000  # progress alone: not yet
    assert await report.report() is False
    node.referenced.add(other.digest)  # referenced flips: at once, 1 s after the last write
    assert await report.report() is True
    assert writes.bodies[-1]["models"][0]["downloadedBytes"] == 1_000
    clock.advance(1)
    slow.state = "Ready"  # the download ended
    assert await report.report() is True
    clock.advance(1)
    node.used_percent = 45
    assert await report.report() is True
    assert report.progress_writes == 0 and report.writes == 4


async def test_fifty_downloads_write_progress_at_most_twice_a_minute() -> None:
    clock = clocks.ManualClock()
    rng = random.Random(7)
    downloads = [Download(_digest(i), rng.randrange(10**9, 10**11)) for i in range(50)]
    rates = {d.digest: d.size / rng.randrange(120, 3000) for d in downloads}
    node = FakeNode(downloads)
    report, writes = _reporter(node, clock)
    await report.report()
    for _ in range(int(600 / TICK)):
        clock.advance(TICK)
        for d in downloads:
            d.received = min(d.size, int(d.received + rates[d.digest] * TICK))
            if d.received == d.size:
                d.state = "Ready"
        await report.report()
    assert report.progress_writes > 0
    # Any 60 s window holds at most two progress writes.
    stamps = [when for when, _, _ in _progress_only(writes)]
    assert len(stamps) == report.progress_writes
    for i, start in enumerate(stamps):
        assert len([t for t in stamps[i:] if t - start < 60.0]) <= reporter.PER_MINUTE
    # A progress write is some download's: one that moved by 5% since the write before. No
    # download has more than twenty.
    for d in downloads:
        own = [1 for _, prev, body in _progress_only(writes)
               if _received(body, d.digest) - _received(prev, d.digest) >= 0.05 * d.size]
        assert len(own) <= reporter.PER_DOWNLOAD


def _received(body: Mapping[str, Any], digest: str) -> int:
    for m in body["models"]:
        if m["digest"] == digest:
            return int(m.get("downloadedBytes", m["sizeBytes"]))
    return 0


def _progress_only(writes: Writes) -> list[tuple[float, Mapping[str, Any], Mapping[str, Any]]]:
    """(time, previous body, body) of the writes whose only change was progress."""
    found = []
    for i in range(1, len(writes.bodies)):
        prev, body = writes.bodies[i - 1], writes.bodies[i]
        if statuses.without_progress(prev) == statuses.without_progress(body):
            found.append((writes.times[i], prev, body))
    return found


async def test_a_write_that_finds_no_object_writes_everything_next_time() -> None:
    clock = clocks.ManualClock()
    node = FakeNode([Download(_digest(1), 10, 10, state="Ready")])
    report, writes = _reporter(node, clock)
    writes.fail = kube.NotFound(404, "NotFound", "gone")
    assert await report.report() is False
    writes.fail = None
    assert await report.report() is True  # unchanged, but the object is new
    writes.fail = kube.ServerError(503, "ServiceUnavailable", "later")
    node.used_percent = 50
    assert await report.report() is False
    writes.fail = None
    assert await report.report() is True  # the failed change is retried at the next report


async def test_run_reports_when_told_and_on_its_tick() -> None:
    clock = clocks.ManualClock()
    node = FakeNode([Download(_digest(1), 10, 10, state="Ready")])
    report, writes = _reporter(node, clock)
    task = asyncio.create_task(report.run())
    try:
        report.changed()
        await _until(lambda: len(writes.bodies) == 1)
        node.used_percent = 60  # nobody says so: the tick finds it
        await _settle()
        assert len(writes.bodies) == 1
        clock.advance(TICK)
        await _until(lambda: len(writes.bodies) == 2)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _until(predicate: Any) -> None:
    async with asyncio.timeout(10):
        while not predicate():
            await asyncio.sleep(0)


async def _settle(rounds: int = 20) -> None:
    """Let the event loop run what became ready (no wall-clock waiting)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
