from __future__ import annotations

import datetime
import os
import pathlib

from nodeplugin.cache import layout, stale, usage

DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64
DIGEST_C = "sha256:" + "c" * 64
NOW = datetime.datetime(2026, 9, 26, 12, 30, tzinfo=datetime.UTC)


class Clock:
    def __init__(self, now: datetime.datetime) -> None:
        self.now = now

    def __call__(self) -> datetime.datetime:
        return self.now


async def test_only_partials_nobody_asked_for_in_a_day_and_not_running(
    tmp_path: pathlib.Path,
) -> None:
    cache = layout.Layout(tmp_path / "cache")
    cache.create()
    clock = Clock(NOW - datetime.timedelta(hours=30))
    store = usage.UsageStore(cache.state_file(usage.FILE_NAME), clock=clock)
    old_asked = cache.new_partial(DIGEST_A)
    recent = cache.new_partial(DIGEST_B)
    running = cache.new_partial(DIGEST_C)
    for partial in (old_asked, recent, running):
        partial.path.mkdir(parents=True, exist_ok=True)
    await store.touch(DIGEST_A)
    await store.touch(DIGEST_C)
    clock.now = NOW - datetime.timedelta(hours=2)
    await store.touch(DIGEST_B)

    found = stale.removable_partials(cache, store, running={DIGEST_C}, now=NOW)

    assert [p.digest for p in found] == [DIGEST_A]


async def test_without_a_usage_record_the_directory_age_counts(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path / "cache")
    cache.create()
    store = usage.UsageStore(cache.state_file(usage.FILE_NAME))
    partial = cache.new_partial(DIGEST_A)
    partial.path.mkdir(parents=True, exist_ok=True)
    day_and_a_bit = (NOW - datetime.timedelta(hours=25)).timestamp()
    os.utime(partial.path, (day_and_a_bit, day_and_a_bit))

    assert [p.digest for p in stale.removable_partials(cache, store, running=(), now=NOW)] == [
        DIGEST_A
    ]
    younger = NOW - datetime.timedelta(hours=23)
    assert stale.removable_partials(cache, store, running=(), now=younger) == []
