"""Failure records: doubling backoff, reasons that do not back off, persistence, reset."""

from __future__ import annotations

import datetime
import pathlib
import stat

from nodeplugin.cache import layout
from nodeplugin.materialize import failures as failure_records
from nodeplugin.materialize import interface

DIGEST = "sha256:" + "ab" * 32
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime.datetime:
        return self.now


def test_delay_doubles_from_a_minute_to_an_hour() -> None:
    waits = [failure_records.RETRY.delay(n) for n in (1, 2, 3, 6, 7, 20)]
    assert waits == [60, 120, 240, 1920, 3600, 3600]


def test_records_back_off_and_persist_across_restart(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    clock = Clock()
    book = failure_records.Failures(cache, clock=clock)
    first = book.record(DIGEST, interface.Reason.SOURCE_UNAVAILABLE, "hub answered 503")
    assert first.retry_time == T0 + datetime.timedelta(minutes=1)
    second = book.record(DIGEST, interface.Reason.ACCESS_DENIED, "refused")
    assert second.failures == 2
    assert second.retry_time == T0 + datetime.timedelta(minutes=2)
    assert book.blocking(DIGEST) == second
    (record,) = [p for p in cache.state.iterdir() if p.name != layout.FORMAT_FILE]
    assert stat.S_IMODE(record.stat().st_mode) == 0o600

    reopened = failure_records.Failures(cache, clock=clock)
    assert reopened.get(DIGEST) == second
    clock.now = T0 + datetime.timedelta(minutes=2)
    assert reopened.blocking(DIGEST) is None

    reopened.clear(DIGEST)
    assert failure_records.Failures(cache, clock=clock).get(DIGEST) is None


def test_invalid_request_and_canceled_do_not_back_off(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    book = failure_records.Failures(cache, clock=Clock())
    book.record(DIGEST, interface.Reason.INTEGRITY_MISMATCH, "bad byte")
    for reason in (interface.Reason.INVALID_REQUEST, interface.Reason.CANCELED):
        record = book.record(DIGEST, reason, "no backoff")
        assert record.retry_time is None
        assert record.failures == 1
        assert book.blocking(DIGEST) is None


def test_a_torn_record_is_ignored(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    (cache.state / ("download-failure-" + "cd" * 32 + ".json")).write_bytes(b"{not json")
    assert failure_records.Failures(cache).all() == []


def test_backoffs_started_and_waiting_are_counted_by_reason(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    clock = Clock()
    book = failure_records.Failures(cache, clock=clock)
    other = "sha256:" + "cd" * 32
    book.record(DIGEST, interface.Reason.SOURCE_UNAVAILABLE, "503")
    book.record(DIGEST, interface.Reason.SOURCE_UNAVAILABLE, "503")
    book.record(other, interface.Reason.CANCELED, "idle")  # no backoff
    assert book.started == {interface.Reason.SOURCE_UNAVAILABLE: 2}
    assert book.waiting() == {interface.Reason.SOURCE_UNAVAILABLE: 1}  # one digest waits
    clock.now = T0 + datetime.timedelta(minutes=2)
    assert book.waiting() == {}
    assert book.started == {interface.Reason.SOURCE_UNAVAILABLE: 2}
