"""The metrics: scrape-time figures from memory, and the histogram and result counts fed by the
materializer's completion callback."""

from __future__ import annotations

import pathlib

from lightkube.models.meta_v1 import ObjectMeta
from prometheus_client import exposition, parser, registry

from kube import decoding
from nodeplugin import metrics
from nodeplugin.cache import inventory, layout, publish
from nodeplugin.materialize import interface

DIGEST = "sha256:" + "ab" * 32
RUNNING = "sha256:" + "cd" * 32
IDLE = "sha256:" + "ef" * 32
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(text: str) -> Samples:
    found: Samples = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def _scrape(found: registry.CollectorRegistry) -> Samples:
    return _samples(exposition.generate_latest(found).decode())


def _sources(**overrides: object) -> metrics.Sources:
    values: dict[str, object] = {
        "downloaded_bytes": lambda: 0, "mounts": lambda: {}, "stored_bytes": lambda: 0,
        "capacity_bytes": lambda: 0,
    }
    values.update(overrides)
    return metrics.Sources(**values)  # type: ignore[arg-type]


def test_collector_reads_every_source_at_scrape_time() -> None:
    state = {"bytes": 10}
    made = metrics.Metrics(_sources(
        downloaded_bytes=lambda: state["bytes"], mounts=lambda: {"hit": 3, "denied": 1},
        stored_bytes=lambda: 4096, capacity_bytes=lambda: 1 << 30,
    ))
    first = _scrape(made.registry)
    p = metrics.PREFIX
    assert first[(p + "download_bytes_total", (("source", "hub"),))] == 10
    assert first[(p + "mounts_total", (("result", "hit"),))] == 3
    assert first[(p + "mounts_total", (("result", "materialized"),))] == 0
    assert first[(p + "mounts_total", (("result", "pending"),))] == 0
    assert first[(p + "gc_removed_bytes_total", ())] == 0
    assert first[(p + "stored_bytes", ())] == 4096
    assert first[(p + "capacity_bytes", ())] == 1 << 30
    state["bytes"] = 25
    assert _scrape(made.registry)[(p + "download_bytes_total", (("source", "hub"),))] == 25


def test_completions_feed_the_histogram_and_the_results() -> None:
    made = metrics.Metrics(_sources(), buckets=(1.0, 10.0, float("inf")))
    for seconds in (0.5, 3.0, 4.0, 100.0):
        made.completed(interface.Completion(DIGEST, "Published", seconds))
    made.completed(interface.Completion(DIGEST, "IntegrityMismatch", 2.0))
    made.completed(interface.Completion(DIGEST, interface.STOPPED, 9.0))  # shutdown: not counted
    found = _scrape(made.registry)
    name = metrics.PREFIX + "publish_duration_seconds"
    assert found[(name + "_bucket", (("le", "1.0"),))] == 1
    assert found[(name + "_bucket", (("le", "10.0"),))] == 3
    assert found[(name + "_bucket", (("le", "+Inf"),))] == 4
    assert found[(name + "_count", ())] == 4
    assert found[(name + "_sum", ())] == 107.5
    results = {labels: value for (sample, labels), value in found.items()
               if sample == metrics.PREFIX + "materializations_total"}
    assert results == {(("result", "Published"),): 4, (("result", "IntegrityMismatch"),): 1}


class _Running:
    """A materializer with one attempt in progress (``RUNNING``, 700 bytes received)."""

    downloaded_bytes = 700

    def running(self) -> list[interface.Progress]:
        return [interface.Progress(RUNNING, interface.State.DOWNLOADING, 700, 1000)]


class _Counting:
    """The inventory's measuring seam: counts every walk and sizes trees by their file bytes."""

    def __init__(self) -> None:
        self.walks = 0

    def __call__(self, top: pathlib.Path) -> int:
        self.walks += 1
        return sum(p.stat().st_size for p in top.rglob("*") if p.is_file())


def test_a_scrape_reads_the_inventory_and_never_walks_the_cache(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    staging = cache.new_partial(DIGEST).path
    (staging / "a.bin").write_bytes(b"x" * 10_000)
    publish.publish_tree(cache, staging, DIGEST)
    (cache.new_partial(IDLE).path / "b.bin").write_bytes(b"y" * 5_000)
    (cache.new_partial(RUNNING).path / "c.bin").write_bytes(b"z" * 300)
    (cache.state / "usage.json").write_bytes(b"s" * 50_000)  # state is not content
    counting = _Counting()
    stock = inventory.Inventory(cache, measure=counting)
    stock.scan()
    walks = counting.walks
    made = metrics.Metrics(metrics.sources_for(cache, _Running(), stock,  # type: ignore[arg-type]
                                               lambda: {}))
    for _ in range(100):
        found = _scrape(made.registry)
    assert counting.walks == walks  # a hundred scrapes, not one walk
    # The published tree (its file and marker) + the idle partial + what the running attempt has
    # received (the live figure replaces its partial's last measurement).
    tree = 10_000 + len(layout.marker_bytes(DIGEST))
    assert found[(metrics.PREFIX + "stored_bytes", ())] == tree + 5_000 + 700
    assert found[(metrics.PREFIX + "download_bytes_total", (("source", "hub"),))] == 700
    assert found[(metrics.PREFIX + "capacity_bytes", ())] > 0


def test_objects_the_kubernetes_client_skipped_are_scraped() -> None:
    made = metrics.Metrics(_sources())
    name = "gpustack_model_manager_kube_client_undecodable_objects_total"
    labels = (("resource", "widgets.example.com"),)
    before = _scrape(made.registry).get((name, labels), 0.0)
    decoding.skipped(decoding.Undecodable("widgets.example.com", "", "w", "Expected `array`",
                                          ObjectMeta()))
    assert _scrape(made.registry)[(name, labels)] == before + 1
    assert _scrape(metrics.Metrics(_sources()).registry)[(name, labels)] == before + 1

