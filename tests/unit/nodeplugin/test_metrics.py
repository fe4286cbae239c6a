"""The metrics collector, the publish-duration histogram and the timing wrapper."""

from __future__ import annotations

import asyncio
import pathlib

from prometheus_client import exposition, parser, registry

from nodeplugin import metrics
from nodeplugin.cache import layout
from nodeplugin.materialize import interface

DIGEST = "sha256:" + "ab" * 32


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def _scrape(found: registry.CollectorRegistry) -> dict[
        tuple[str, tuple[tuple[str, str], ...]], float]:
    return _samples(exposition.generate_latest(found).decode())


def test_collector_reads_every_source_at_scrape_time() -> None:
    state = {"bytes": 10, "results": {"Published": 2, "IntegrityMismatch": 1},
             "mounts": {"hit": 3, "denied": 1}}
    sources = metrics.Sources(
        downloaded_bytes=lambda: int(str(state["bytes"])),
        results=lambda: state["results"],  # type: ignore[return-value,arg-type]
        mounts=lambda: state["mounts"],  # type: ignore[return-value,arg-type]
        stored_bytes=lambda: 4096,
        capacity_bytes=lambda: 1 << 30,
    )
    made = metrics.make_registry(sources, metrics.PublishDurations())
    first = _scrape(made)
    p = metrics.PREFIX
    assert first[(p + "download_bytes_total", (("source", "hub"),))] == 10
    assert first[(p + "mounts_total", (("result", "hit"),))] == 3
    assert first[(p + "mounts_total", (("result", "materialized"),))] == 0
    assert first[(p + "mounts_total", (("result", "pending"),))] == 0
    assert first[(p + "materializations_total", (("result", "IntegrityMismatch"),))] == 1
    assert first[(p + "gc_removed_bytes_total", ())] == 0
    assert first[(p + "stored_bytes", ())] == 4096
    assert first[(p + "capacity_bytes", ())] == 1 << 30
    state["bytes"] = 25
    assert _scrape(made)[(p + "download_bytes_total", (("source", "hub"),))] == 25


def test_publish_durations_are_a_cumulative_histogram() -> None:
    durations = metrics.PublishDurations((1.0, 10.0, float("inf")))
    for seconds in (0.5, 3.0, 4.0, 100.0):
        durations.observe(seconds)
    alone = registry.CollectorRegistry()
    alone.register(durations)
    found = _scrape(alone)
    name = metrics.PREFIX + "publish_duration_seconds"
    assert found[(name + "_bucket", (("le", "1.0"),))] == 1
    assert found[(name + "_bucket", (("le", "10.0"),))] == 3
    assert found[(name + "_bucket", (("le", "+Inf"),))] == 4
    assert found[(name + "_count", ())] == 4
    assert found[(name + "_sum", ())] == 107.5


def test_stored_bytes_counts_objects_and_partials(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    assert metrics.stored_bytes(cache) == 0
    tree = cache.objects / "sha256" / ("cd" * 32)
    tree.mkdir(parents=True)
    (tree / "a.bin").write_bytes(b"x" * 10000)
    partial = cache.new_partial(DIGEST)
    (partial.path / "b.bin").write_bytes(b"y" * 5000)
    (cache.state / "usage.json").write_bytes(b"z" * 50000)  # state is not content
    assert 15000 <= metrics.stored_bytes(cache) < 50000


def test_sources_for_an_importer_without_counters(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    sources = metrics.sources_for(cache, _Fake(), lambda: {})
    assert sources.downloaded_bytes() == 0
    assert sources.results() == {}
    assert sources.capacity_bytes() > 0


class _Fake:
    """Downloads until ``finish``; then the digest is published (a marker on disk)."""

    def __init__(self, cache: layout.Layout | None = None) -> None:
        self.cache = cache
        self.active = False
        self.closed = False

    async def ensure(self, request: interface.Request) -> interface.Progress:
        self.active = True
        return interface.Progress(request.digest, interface.State.DOWNLOADING, 5, 10)

    def running(self) -> list[interface.Progress]:
        return [interface.Progress(DIGEST, interface.State.DOWNLOADING, 5, 10)] if self.active \
            else []

    def finish(self) -> None:
        assert self.cache is not None
        tree = self.cache.published_path(DIGEST)
        tree.mkdir(parents=True)
        (tree / layout.MARKER).write_bytes(layout.marker_bytes(DIGEST))
        self.active = False

    async def close(self) -> None:
        self.closed = True


async def test_timed_materializer_observes_start_to_publication(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    inner = _Fake(cache)
    durations = metrics.PublishDurations()
    timed = metrics.TimedMaterializer(inner, cache, durations, interval=0.01)
    request = interface.Request(DIGEST, interface.Source("huggingFace", "org/m", "c" * 40))
    progress = await timed.ensure(request)
    assert progress.state is interface.State.DOWNLOADING
    await timed.ensure(request)  # a second mount joins; one timing
    assert timed.running() == inner.running()
    inner.finish()
    async with asyncio.timeout(5):
        while durations.count == 0:
            await asyncio.sleep(0.01)
    assert durations.count == 1
    await timed.close()
    assert inner.closed


async def test_timed_materializer_does_not_observe_an_attempt_that_failed(
    tmp_path: pathlib.Path,
) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    inner = _Fake(cache)
    durations = metrics.PublishDurations()
    timed = metrics.TimedMaterializer(inner, cache, durations, interval=0.01)
    await timed.ensure(interface.Request(DIGEST, interface.Source("modelScope", "o/m", "c")))
    inner.active = False  # ended without a tree
    async with asyncio.timeout(5):
        while timed.timing():
            await asyncio.sleep(0.01)
    assert durations.count == 0
    await timed.close()
