from __future__ import annotations

import asyncio
import datetime
import json
import pathlib
import stat

from nodeplugin.cache import usage

T0 = datetime.datetime(2026, 9, 25, 6, 17, 3, tzinfo=datetime.UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime.datetime:
        return self.now


async def test_marks_write_only_on_change_and_survive_reload(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "usage.json"
    clock = Clock()
    store = usage.UsageStore(path, clock=clock)
    await store.mark("d1", referenced=True)
    first = path.stat().st_mtime_ns
    clock.now = T0 + datetime.timedelta(minutes=30)
    await store.mark("d1", referenced=True)
    assert path.stat().st_mtime_ns == first  # same hour, same flag: no write
    clock.now = T0 + datetime.timedelta(hours=1)
    await store.mark("d1", referenced=False)
    body = json.loads(path.read_text())
    assert body["digests"]["d1"] == {"lastUsedTime": "2026-09-25T07:00:00Z", "referenced": False}
    again = usage.UsageStore(path, clock=clock)
    again.load()
    assert again.get("d1") == usage.Usage(usage.hour_of(clock.now), False)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # the plugin's own state: owner only


async def test_reconcile_takes_flags_from_live_mounts(tmp_path: pathlib.Path) -> None:
    clock = Clock()
    store = usage.UsageStore(tmp_path / "usage.json", clock=clock)
    await store.mark("stale-ref", referenced=True)
    await store.mark("old", referenced=False)
    clock.now = T0 + datetime.timedelta(hours=5)
    await store.reconcile(referenced={"live"}, known={"old", "stale-ref", "new"})
    now = usage.hour_of(clock.now)
    assert store.get("live") == usage.Usage(now, True)
    assert store.get("stale-ref") == usage.Usage(now, False)
    assert store.get("new") == usage.Usage(now, False)
    assert store.get("old") == usage.Usage(usage.hour_of(T0), False)  # kept: its age matters


async def test_a_corrupt_file_starts_empty(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "usage.json"
    path.write_text("{not json")
    store = usage.UsageStore(path)
    store.load()
    assert store.all() == {}


async def test_opposite_marks_in_flight_end_with_the_last_one(tmp_path: pathlib.Path) -> None:
    store = usage.UsageStore(tmp_path / "usage.json", clock=Clock())
    await store.mark("d", referenced=True)
    # The last reference goes (write queued), then a new one arrives before that write lands.
    await asyncio.gather(store.mark("d", referenced=False), store.mark("d", referenced=True))
    assert store.get("d") is not None and store.get("d").referenced  # type: ignore[union-attr]
    reloaded = usage.UsageStore(tmp_path / "usage.json")
    reloaded.load()
    assert reloaded.get("d").referenced  # type: ignore[union-attr]


async def test_touch_moves_the_hour_and_keeps_the_reference_flag(tmp_path: pathlib.Path) -> None:
    clock = Clock()
    store = usage.UsageStore(tmp_path / "usage.json", clock=clock)
    await store.mark("d1", referenced=True)
    clock.now = T0 + datetime.timedelta(hours=3)
    await store.touch("d1")
    await store.touch("d2")
    assert store.get("d1") == usage.Usage(usage.hour_of(clock.now), True)
    assert store.get("d2") == usage.Usage(usage.hour_of(clock.now), False)


async def test_is_current_only_when_nothing_would_change_or_is_queued(
    tmp_path: pathlib.Path,
) -> None:
    clock = Clock()
    store = usage.UsageStore(tmp_path / "usage.json", clock=clock)
    assert not store.is_current("d1", referenced=True)
    await store.mark("d1", referenced=True)
    assert store.is_current("d1", referenced=True)
    assert not store.is_current("d1", referenced=False)
    clock.now = T0 + datetime.timedelta(hours=1)
    assert not store.is_current("d1", referenced=True)  # a new hour is a change
    await store.mark("d1", referenced=True)
    # While a change is being written, nothing counts as current (it may be the opposite one).
    pending = asyncio.create_task(store.mark("d2", referenced=True))
    await asyncio.sleep(0)
    assert not store.is_current("d1", referenced=True)
    await pending
    assert store.is_current("d1", referenced=True)


async def test_is_current_follows_the_clock_across_hours_both_ways(
    tmp_path: pathlib.Path,
) -> None:
    clock = Clock()
    store = usage.UsageStore(tmp_path / "usage.json", clock=clock)
    await store.mark("d1", referenced=True)
    clock.now = T0.replace(minute=59, second=59, microsecond=999999)
    assert store.is_current("d1", referenced=True)  # the same hour to its last microsecond
    clock.now = T0.replace(minute=0, second=0, microsecond=0) + datetime.timedelta(hours=1)
    assert not store.is_current("d1", referenced=True)  # the next hour, exactly
    clock.now = T0 - datetime.timedelta(minutes=30)  # the clock stepped back an hour
    assert not store.is_current("d1", referenced=True)
    clock.now = T0
    assert store.is_current("d1", referenced=True)
