"""The plugin's Prometheus metrics, from state the running pieces already keep.

No scrape touches the cache: the figures the pieces keep anyway are read when ``/metrics`` is
scraped (bytes downloaded, mount results, the cache ``inventory``'s stored bytes, one ``statvfs``
for the capacity), and what needs every event, the publish-duration histogram and the finished
materializations by result, is fed by the materializer's completion callback
(``Materializer.add_done_callback``) into prometheus-client's own ``Histogram`` and ``Counter``.

No label carries a namespace, an artifact, a repository or a Pod: the only labels are ``source``
(``hub`` or ``peer``), ``result`` (a fixed vocabulary) and the Kubernetes client's ``resource`` (the
objects from kube-apiserver it skipped as undecodable, ``kube.decoding.UNDECODABLE``).

The node's state for an operator's dashboard and alerts (``NodeState``, read at scrape time like
the rest; ``state_sources`` adds it): the cache filesystem's used bytes and inodes (the same one
``statvfs``), the high watermark in force, whether the node's store is Ready, the references
(bind mounts, and the trees they hold), quarantined trees and quarantines, digests backing off
and backoffs started (``reason``: a failure reason that backs off), and verification failures
(``phase``: ``materialize``, fed by the completion callback, ``start`` or ``scrub``; ``reason``:
``interface.Check``). Counts are totals, never one series per digest.
"""

from __future__ import annotations

import collections
import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping

import prometheus_client
from prometheus_client import core, registry

from kube import decoding
from nodeplugin.cache import inventory, layout
from nodeplugin.materialize import capacity, interface
from nodeplugin.materialize import failures as failure_records

PREFIX = "gpustack_model_manager_"
MOUNT_RESULTS = ("hit", "materialized", "denied", "pending")
# From a small model on a fast link to a large one on a slow link.
PUBLISH_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0,
                   7200.0, 14400.0, float("inf"))
Check = interface.Check
VERIFICATIONS: dict[str, tuple[interface.Check, ...]] = {
    "materialize": (Check.MANIFEST, Check.SIZE, Check.HASH),
    "start": (Check.SIZE,),
    "scrub": (Check.SIZE, Check.HASH, Check.UNREADABLE),
}
"""Each phase's checks: every series exists from the first scrape (at 0), so a rate is defined."""
BACKOFF_REASONS = tuple(r.value for r in interface.Reason if r not in failure_records.NO_BACKOFF)


@dataclasses.dataclass(frozen=True, slots=True)
class Sources:
    """Where each scrape-time figure comes from; every callable reads memory only, except
    ``capacity_bytes`` (one statvfs)."""

    downloaded_bytes: Callable[[], int]
    mounts: Callable[[], Mapping[str, int]]
    stored_bytes: Callable[[], int]
    capacity_bytes: Callable[[], int]
    gc_removed_bytes: Callable[[], int] = lambda: 0
    peer_bytes: Callable[[], int] = lambda: 0
    """Bytes received from other nodes' plugins (node-to-node sync)."""
    state: Callable[[], NodeState] = lambda: NodeState()
    """The node's state (``state_sources``); one statvfs, the rest from memory."""


@dataclasses.dataclass(frozen=True, slots=True)
class NodeState:
    """What an operator watches besides the traffic, read at scrape time."""

    used_bytes: int = 0
    """Used space of the cache filesystem, root's reserved blocks included: what the
    watermarks measure."""
    inodes: int = 0
    used_inodes: int = 0
    high_watermark_percent: int = 0
    """The high watermark in force (after the capacity rule)."""
    store_ready: bool = True
    """The node store's ``Ready`` condition: False while the spec fails the plugin's check."""
    references: int = 0
    referenced_trees: int = 0
    quarantined_trees: int = 0
    quarantines: int = 0
    backing_off: Mapping[str, int] = dataclasses.field(default_factory=dict)
    backoffs: Mapping[str, int] = dataclasses.field(default_factory=dict)
    verification_failures: Mapping[tuple[str, str], int] = dataclasses.field(
        default_factory=dict)
    """``(phase, reason)`` of the checks after publication (``start``, ``scrub``)."""


def state_sources(
    sources: Sources,
    cache: layout.Layout,
    *,
    references: Callable[[], tuple[int, int]],
    quarantined: Callable[[], tuple[int, int]],
    failures: failure_records.Failures,
    high_watermark_percent: Callable[[], int],
    store_ready: Callable[[], bool],
    verification_failures: Callable[[], Mapping[tuple[str, str], int]],
) -> Sources:
    """``sources`` with the node's state: ``references`` answers (bind mounts, trees they
    hold) and ``quarantined`` (trees held now, quarantines by this process)."""

    def state() -> NodeState:
        st = os.statvfs(cache.root)
        mounts, trees = references()
        held, added = quarantined()
        return NodeState(
            used_bytes=(st.f_blocks - st.f_bfree) * st.f_frsize,
            inodes=st.f_files,
            used_inodes=st.f_files - st.f_ffree,
            high_watermark_percent=high_watermark_percent(),
            store_ready=store_ready(),
            references=mounts,
            referenced_trees=trees,
            quarantined_trees=held,
            quarantines=added,
            backing_off={r.value: n for r, n in failures.waiting().items()},
            backoffs={r.value: n for r, n in failures.started.items()},
            verification_failures=verification_failures(),
        )

    return dataclasses.replace(sources, state=state)


def sources_for(
    cache: layout.Layout,
    materializer: interface.Materializer,
    stock: inventory.Inventory,
    mounts: Callable[[], Mapping[str, int]],
    gc_removed_bytes: Callable[[], int] = lambda: 0,
    peer_bytes: Callable[[], int] = lambda: 0,
) -> Sources:
    """Sources over a plugin's materializer, cache inventory, Node service and collection."""

    def stored() -> int:
        return stock.stored_bytes((p.digest, p.staged) for p in materializer.running())

    return Sources(
        downloaded_bytes=lambda: materializer.downloaded_bytes,
        mounts=mounts,
        stored_bytes=stored,
        capacity_bytes=lambda: capacity.statvfs_usage(cache.root).total_bytes,
        gc_removed_bytes=gc_removed_bytes,
        peer_bytes=peer_bytes,
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
        downloaded.add_metric(["peer"], s.peer_bytes())
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
            PREFIX + "stored_bytes",
            "Disk space of the stored files (each once) and of what trees and partial "
            "downloads hold of their own.",
            value=s.stored_bytes(),
        )
        yield core.GaugeMetricFamily(
            PREFIX + "capacity_bytes", "Size of the cache filesystem.", value=s.capacity_bytes()
        )


class StateCollector(registry.Collector):
    """Builds the node-state families from ``Sources.state`` and the verification failures
    the completion callback counted (``materialized``: ``(phase, reason)`` to a count)."""

    def __init__(self, sources: Sources,
                 materialized: Mapping[tuple[str, str], int]) -> None:
        self._sources = sources
        self._materialized = materialized

    def describe(self) -> list[core.Metric]:
        return []

    def collect(self) -> Iterator[core.Metric]:
        s = self._sources.state()
        for family, name, documentation, value in (
                (core.GaugeMetricFamily, "used_bytes",
                 "Used space of the cache filesystem (what the watermarks measure).",
                 s.used_bytes),
                (core.GaugeMetricFamily, "capacity_inodes",
                 "Inodes of the cache filesystem.",
                 s.inodes),
                (core.GaugeMetricFamily, "used_inodes",
                 "Inodes in use on the cache filesystem.",
                 s.used_inodes),
                (core.GaugeMetricFamily, "high_watermark_ratio",
                 "The high watermark in force (after the capacity rule), a share of the capacity.",
                 s.high_watermark_percent / 100),
                (core.GaugeMetricFamily, "node_store_ready",
                 "1 while the node's NodeModelStore is Ready (its spec passes the plugin's check).",
                 1 if s.store_ready else 0),
                (core.GaugeMetricFamily, "references",
                 "Bind mounts of published trees (references).",
                 s.references),
                (core.GaugeMetricFamily, "referenced_trees",
                 "Published trees with at least one reference.",
                 s.referenced_trees),
                (core.GaugeMetricFamily, "quarantined_trees",
                 "Published trees held in quarantine.",
                 s.quarantined_trees),
                (core.CounterMetricFamily, "quarantines",
                 "Trees quarantined after a failed integrity check.",
                 s.quarantines),
        ):
            yield family(PREFIX + name, documentation, value=value)
        waiting = core.GaugeMetricFamily(
            PREFIX + "backoff_digests", "Digests waiting for their next attempt, by reason.",
            labels=["reason"])
        started = core.CounterMetricFamily(
            PREFIX + "backoffs", "Failed attempts that started a backoff, by reason.",
            labels=["reason"])
        for reason in sorted({*BACKOFF_REASONS, *s.backing_off, *s.backoffs}):
            waiting.add_metric([reason], s.backing_off.get(reason, 0))
            started.add_metric([reason], s.backoffs.get(reason, 0))
        yield waiting
        yield started
        counted = collections.Counter(s.verification_failures)
        counted.update(self._materialized)
        keys = {(phase, check.value) for phase, checks in VERIFICATIONS.items()
                for check in checks} | set(counted)
        failures = core.CounterMetricFamily(
            PREFIX + "verification_failures",
            "Content that failed verification, by phase and the check that failed.",
            labels=["phase", "reason"])
        for phase, reason in sorted(keys):
            failures.add_metric([phase, reason], counted.get((phase, reason), 0))
        yield failures


class Metrics:
    """The plugin's registry (no process or platform collectors) and the event-fed metrics."""

    def __init__(self, sources: Sources, *, buckets: tuple[float, ...] = PUBLISH_BUCKETS) -> None:
        self.registry = registry.CollectorRegistry(auto_describe=False)
        self.registry.register(Collector(sources))
        self.verified: collections.Counter[tuple[str, str]] = collections.Counter()
        """Verification failures of finished attempts, ``("materialize", reason)``."""
        self.registry.register(StateCollector(sources, self.verified))
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
        if done.check is not None:
            self.verified["materialize", done.check.value] += 1
        if done.published:
            self.publish_durations.observe(done.seconds)
