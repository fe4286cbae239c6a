"""The plugin's Prometheus metrics, read from the running pieces when ``/metrics`` is scraped.

The collector asks the materializer, the Node service and the cache filesystem for their numbers
at scrape time instead of threading metric objects through their code. The one exception is the
publish-duration histogram: a histogram needs each observation, so ``TimedMaterializer`` (a thin
wrapper the Node service calls through) times every attempt from its start to its publication.

No label carries a namespace, an artifact, a repository or a Pod: the only labels are ``source``
(always ``hub``) and ``result`` (a fixed vocabulary).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import core, registry

from nodeplugin.cache import layout
from nodeplugin.materialize import capacity, interface

log = logging.getLogger(__name__)

PREFIX = "gpustack_model_manager_"
MOUNT_RESULTS = ("hit", "materialized", "denied", "pending")
# From a small model on a fast link to a large one on a slow link.
PUBLISH_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0,
                   7200.0, 14400.0, float("inf"))
WATCH_SECONDS = 0.5


@dataclasses.dataclass(frozen=True, slots=True)
class Sources:
    """Where each figure comes from; every callable is cheap except ``stored_bytes``."""

    downloaded_bytes: Callable[[], int]
    results: Callable[[], Mapping[str, int]]
    """Finished attempts by result (``Published`` or a failure reason)."""
    mounts: Callable[[], Mapping[str, int]]
    stored_bytes: Callable[[], int]
    capacity_bytes: Callable[[], int]
    gc_removed_bytes: Callable[[], int] = lambda: 0


def sources_for(
    cache: layout.Layout,
    materializer: interface.Materializer,
    mounts: Callable[[], Mapping[str, int]],
) -> Sources:
    """Sources over a plugin's cache and materializer (the hub downloader counts bytes and
    results; an importer that does not simply reports zero)."""

    def downloaded() -> int:
        return int(getattr(materializer, "downloaded_bytes", 0))

    def results() -> Mapping[str, int]:
        found = getattr(materializer, "results", None)
        return dict(found) if isinstance(found, Mapping) else {}

    return Sources(
        downloaded_bytes=downloaded,
        results=results,
        mounts=mounts,
        stored_bytes=lambda: stored_bytes(cache),
        capacity_bytes=lambda: capacity.statvfs_usage(cache.root).total_bytes,
    )


def stored_bytes(cache: layout.Layout) -> int:
    """Disk space of published trees and partial downloads (allocated blocks, so sparse partial
    files count what they hold, not their final size)."""
    total = 0
    for top in (cache.objects, cache.partial):
        for directory, _, files in os.walk(top):
            for name in files:
                with contextlib.suppress(FileNotFoundError):
                    total += os.lstat(os.path.join(directory, name)).st_blocks * 512
    return total


class Collector(registry.Collector):
    """Builds the metric families from ``Sources`` on every scrape."""

    def __init__(self, sources: Sources) -> None:
        self._sources = sources

    def describe(self) -> list[core.Metric]:
        # Describing without collecting keeps registration from touching the disk.
        return []

    def collect(self) -> Iterator[core.Metric]:
        s = self._sources
        downloaded = core.CounterMetricFamily(
            PREFIX + "download_bytes", "Bytes received from the source.", labels=["source"]
        )
        downloaded.add_metric(["hub"], s.downloaded_bytes())
        yield downloaded
        mounts = core.CounterMetricFamily(
            PREFIX + "mounts", "NodePublishVolume calls by result.", labels=["result"]
        )
        counted = s.mounts()
        for result in MOUNT_RESULTS:
            mounts.add_metric([result], counted.get(result, 0))
        yield mounts
        finished = core.CounterMetricFamily(
            PREFIX + "materializations", "Finished materialization attempts by result.",
            labels=["result"],
        )
        for result, count in sorted(s.results().items()):
            finished.add_metric([result], count)
        yield finished
        yield core.CounterMetricFamily(
            PREFIX + "gc_removed_bytes", "Bytes removed by cache collection.",
            value=s.gc_removed_bytes(),
        )
        yield core.GaugeMetricFamily(
            PREFIX + "stored_bytes", "Disk space of published trees and partial downloads.",
            value=s.stored_bytes(),
        )
        yield core.GaugeMetricFamily(
            PREFIX + "capacity_bytes", "Size of the cache filesystem.", value=s.capacity_bytes()
        )


class PublishDurations(registry.Collector):
    """The histogram of seconds from an attempt's start to its publication."""

    def __init__(self, buckets: tuple[float, ...] = PUBLISH_BUCKETS) -> None:
        self._bounds = buckets
        self._counts = [0] * len(buckets)
        self._sum = 0.0

    def observe(self, seconds: float) -> None:
        self._sum += seconds
        for i, bound in enumerate(self._bounds):
            if seconds <= bound:
                self._counts[i] += 1
                break

    @property
    def count(self) -> int:
        return sum(self._counts)

    def describe(self) -> list[core.Metric]:
        return []

    def collect(self) -> Iterator[core.Metric]:
        cumulative: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip(self._bounds, self._counts, strict=True):
            running += count
            cumulative.append(("+Inf" if bound == float("inf") else repr(bound), running))
        yield core.HistogramMetricFamily(
            PREFIX + "publish_duration_seconds",
            "Seconds from an attempt's start to its publication.",
            buckets=cumulative,
            sum_value=self._sum,
        )


class TimedMaterializer:
    """Passes calls through to a Materializer and times each attempt it starts until the digest
    is published (``running()`` no longer lists it and the tree is on disk)."""

    def __init__(
        self,
        inner: interface.Materializer,
        cache: layout.Layout,
        durations: PublishDurations,
        *,
        interval: float = WATCH_SECONDS,
    ) -> None:
        self.inner = inner
        self._cache = cache
        self._durations = durations
        self._interval = interval
        self._watches: dict[str, asyncio.Task[None]] = {}

    async def ensure(self, request: interface.Request) -> interface.Progress:
        progress = await self.inner.ensure(request)
        digest = request.digest
        if progress.state is interface.State.DOWNLOADING and digest not in self._watches:
            self._watches[digest] = asyncio.create_task(
                self._watch(digest, time.monotonic()), name=f"time {digest}"
            )
        return progress

    def running(self) -> list[interface.Progress]:
        return self.inner.running()

    def timing(self) -> int:
        """Attempts being timed now."""
        return len(self._watches)

    async def close(self) -> None:
        tasks = list(self._watches.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.inner.close()

    async def _watch(self, digest: str, began: float) -> None:
        try:
            while any(p.digest == digest for p in self.inner.running()):
                await asyncio.sleep(self._interval)
            if await asyncio.to_thread(self._cache.is_published, digest):
                self._durations.observe(time.monotonic() - began)
        finally:
            self._watches.pop(digest, None)


def make_registry(sources: Sources, durations: PublishDurations) -> registry.CollectorRegistry:
    """A registry of the plugin's own (no process or platform collectors)."""
    found = registry.CollectorRegistry(auto_describe=False)
    found.register(Collector(sources))
    found.register(durations)
    return found
