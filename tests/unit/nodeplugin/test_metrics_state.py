"""The node-state metrics an operator's dashboard and alerts read: the cache filesystem's bytes
and inodes, the high watermark in force, the store's Ready, references, quarantines, backoffs
and verification failures; all from memory (and one statvfs), no label naming a digest."""

from __future__ import annotations

import datetime
import os
import pathlib

from prometheus_client import exposition, parser

from nodeplugin import metrics
from nodeplugin.cache import layout, quarantine
from nodeplugin.materialize import failures as failure_records
from nodeplugin.materialize import interface

A = "sha256:" + "ab" * 32
B = "sha256:" + "cd" * 32
C = "sha256:" + "ef" * 32
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
P = metrics.PREFIX
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
BOUNDED_LABELS = {"source", "result", "resource", "phase", "reason", "le"}


def _scrape(made: metrics.Metrics) -> Samples:
    text = exposition.generate_latest(made.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in parser.text_string_to_metric_families(text) for s in family.samples}


def _sources() -> metrics.Sources:
    return metrics.Sources(downloaded_bytes=lambda: 0, mounts=lambda: {}, stored_bytes=lambda: 0,
                           capacity_bytes=lambda: 0)


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime.datetime:
        return self.now


def test_the_node_state_is_read_at_scrape_time(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    clock = _Clock()
    failures = failure_records.Failures(cache, clock=clock)
    held = quarantine.Quarantine(cache)
    state = {"refs": (3, 2), "high": 80, "ready": True, "scrubbed": {("scrub", "hash"): 1}}
    made = metrics.Metrics(metrics.state_sources(
        _sources(), cache,
        references=lambda: state["refs"],  # type: ignore[arg-type,return-value]
        quarantined=lambda: (len(held.all()), held.added), failures=failures,
        high_watermark_percent=lambda: state["high"],  # type: ignore[arg-type,return-value]
        store_ready=lambda: state["ready"],  # type: ignore[arg-type,return-value]
        verification_failures=lambda: state["scrubbed"],  # type: ignore[arg-type,return-value]
    ))  # fmt: skip
    found = _scrape(made)
    st = os.statvfs(tmp_path)
    assert found[(P + "capacity_inodes", ())] == st.f_files
    assert 0 < found[(P + "used_inodes", ())] <= st.f_files
    assert 0 < found[(P + "used_bytes", ())] <= st.f_blocks * st.f_frsize
    assert found[(P + "high_watermark_ratio", ())] == 0.8
    assert found[(P + "node_store_ready", ())] == 1
    assert found[(P + "references", ())] == 3
    assert found[(P + "referenced_trees", ())] == 2
    assert found[(P + "quarantined_trees", ())] == 0
    assert found[(P + "quarantines_total", ())] == 0
    for reason in metrics.BACKOFF_REASONS:  # every series from the first scrape
        assert found[(P + "backoff_digests", (("reason", reason),))] == 0
        assert found[(P + "backoffs_total", (("reason", reason),))] == 0
    assert found[(P + "verification_failures_total",
                  (("phase", "scrub"), ("reason", "hash")))] == 1
    assert found[(P + "verification_failures_total",
                  (("phase", "materialize"), ("reason", "manifest")))] == 0

    failures.record(A, interface.Reason.SOURCE_UNAVAILABLE, "503")
    failures.record(B, interface.Reason.SOURCE_UNAVAILABLE, "503")
    failures.record(C, interface.Reason.INVALID_REQUEST, "bad")  # never backs off
    held.add(A, "hash", T0)
    held.add(A, "hash", T0)  # already held: one quarantine
    state.update(refs=(0, 0), high=75, ready=False)
    found = _scrape(made)
    assert found[(P + "high_watermark_ratio", ())] == 0.75
    assert found[(P + "node_store_ready", ())] == 0
    assert found[(P + "references", ())] == 0
    assert found[(P + "quarantined_trees", ())] == 1
    assert found[(P + "quarantines_total", ())] == 1
    assert found[(P + "backoff_digests", (("reason", "SourceUnavailable"),))] == 2
    assert found[(P + "backoffs_total", (("reason", "SourceUnavailable"),))] == 2
    assert (P + "backoff_digests", (("reason", "InvalidRequest"),)) not in found

    clock.now = T0 + datetime.timedelta(hours=2)  # the backoffs are over, the counts stay
    failures.clear(B)
    found = _scrape(made)
    assert found[(P + "backoff_digests", (("reason", "SourceUnavailable"),))] == 0
    assert found[(P + "backoffs_total", (("reason", "SourceUnavailable"),))] == 2


def test_completions_count_the_verification_that_failed() -> None:
    made = metrics.Metrics(_sources())
    mismatch = interface.Reason.INTEGRITY_MISMATCH.value
    made.completed(interface.Completion(A, mismatch, 1.0, interface.Check.HASH))
    made.completed(interface.Completion(A, mismatch, 1.0, interface.Check.HASH))
    made.completed(interface.Completion(B, mismatch, 1.0, interface.Check.MANIFEST))
    made.completed(interface.Completion(C, "SourceUnavailable", 1.0))
    found = _scrape(made)
    failures = {labels: value for (name, labels), value in found.items()
                if name == P + "verification_failures_total"}
    assert failures[(("phase", "materialize"), ("reason", "hash"))] == 2
    assert failures[(("phase", "materialize"), ("reason", "manifest"))] == 1
    assert failures[(("phase", "materialize"), ("reason", "size"))] == 0
    assert failures[(("phase", "start"), ("reason", "size"))] == 0
    assert failures[(("phase", "scrub"), ("reason", "unreadable"))] == 0
    assert len(failures) == sum(len(checks) for checks in metrics.VERIFICATIONS.values())


def test_every_label_is_a_bounded_vocabulary(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    failures = failure_records.Failures(cache)
    for digest in (A, B, C):
        failures.record(digest, interface.Reason.ACCESS_DENIED, "no")
    made = metrics.Metrics(metrics.state_sources(
        _sources(), cache, references=lambda: (3, 3), quarantined=lambda: (1, 1),
        failures=failures, high_watermark_percent=lambda: 80, store_ready=lambda: True,
        verification_failures=lambda: {},
    ))  # fmt: skip
    made.completed(interface.Completion(A, "IntegrityMismatch", 1.0, interface.Check.SIZE))
    text = exposition.generate_latest(made.registry).decode()
    for digest in (A, B, C):
        assert layout.hex_of(digest) not in text
    labels = {name for family in parser.text_string_to_metric_families(text)
              for sample in family.samples for name in sample.labels}
    assert labels <= BOUNDED_LABELS
