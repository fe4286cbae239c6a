"""The plugin's Prometheus metrics, from state the running pieces already keep.

No scrape touches the cache: the figures the pieces keep anyway are read when ``/metrics`` is
scraped (bytes downloaded, mount results, the cache ``inventory``'s stored bytes, one ``statvfs``
for the capacity), and what needs every event, the publish-duration histogram and the finished
materializations by result, is fed by the materializer's completion callback
(``Materializer.add_done_callback``) into prometheus-client's own ``Histogram`` and ``Counter``.

No label carries a namespace, an artifact, a repository or a Pod: the only labels are ``source``
(always ``hub``), ``result`` (a fixed vocabulary) and the Kubernetes client's ``resource`` (the
objects from kube-apiserver it skipped as undecodable, ``kube.decoding.UNDECODABLE``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping

import prometheus_client
from prometheus_client import core, registry

from kube import decoding
from nodeplugin.cache import inventory, layout
from nodeplugin.materialize import capacity, interface

PREFIX = "gpustack_model_manager_"
MOUNT_RESULTS = ("hit", "materialized", "denied", "pending")
# From a small model on a fast link to a large one on a slow link.
PUBLISH_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0,
                   7200.0, 14400.0, float("inf"))


@dataclasses.dataclass(frozen=True, slots=True)
class Sources:
    """Where each scrape-time figure comes from; every callable reads memory only, except
    ``capacity_bytes`` (one statvfs)."""

    downloaded_bytes: Callable[[], int]
    mounts: Callable[[], Mapping[str, int]]
    stored_bytes: Callable[[], int]
    capacity_bytes: Callable[[], int]
    gc_removed_bytes: Callable[[], int] = lambda: 0


def sources_for(
    cache: layout.Layout,
    materializer: interface.Materializer,
    stock: inventory.Inventory,
    mounts: Callable[[], Mapping[str, int]],
    gc_removed_bytes: Callable[[], int] = lambda: 0,
) -> Sources:
    """Sources over a plugin's materializer, cache inventory, Node service and collection."""

    def stored() -> int:
        return stock.stored_bytes((p.digest, p.received_bytes) for p in materializer.running())

    return Sources(
        downloaded_bytes=lambda: materializer.downloaded_bytes,
        mounts=mounts,
        stored_bytes=stored,
        capacity_bytes=lambda: capacity.statvfs_usage(cache.root).total_bytes,
        gc_removed_bytes=gc_removed_bytes,
    )


class Collector(registry.Collector):
    """Builds the scrape-time metric families from ``Sources``."""

    def __init__(self, sources: Sources) -> None:
        self._sources = sources

    def describe(self) -> list[core.Metric]:
        # Describing without collecting keeps registration from reading anything.
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


class Metrics:
    """The plugin's registry (no process or platform collectors) and the event-fed metrics."""

    def __init__(self, sources: Sources, *, buckets: tuple[float, ...] = PUBLISH_BUCKETS) -> None:
        self.registry = registry.CollectorRegistry(auto_describe=False)
        self.registry.register(Collector(sources))
        self.registry.register(decoding.UNDECODABLE)  # the process's kube.Client, all of them
        self.publish_durations = prometheus_client.Histogram(
            PREFIX + "publish_duration_seconds",
            "Seconds from an attempt's start to its publication.",
            buckets=buckets,
            registry=self.registry,
        )
        self.materializations = prometheus_client.Counter(
            PREFIX + "materializations",
            "Finished materialization attempts by result.",
            ["result"],
            registry=self.registry,
        )

    def completed(self, done: interface.Completion) -> None:
        """The materializer's completion callback."""
        if done.result == interface.STOPPED:
            return  # the plugin is stopping: not a finished materialization
        self.materializations.labels(done.result).inc()
        if done.published:
            self.publish_durations.observe(done.seconds)
