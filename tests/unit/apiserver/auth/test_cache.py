"""The answer cache: TTL by outcome, a hard size bound, one computation per key."""

from __future__ import annotations

import asyncio

import pytest

from apiserver.auth import cache


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_entries_expire_after_their_ttl() -> None:
    clock = Clock()
    found: cache.ExpiringCache[str, int] = cache.ExpiringCache(10, clock=clock)
    found.set("a", 1, 10.0)
    clock.now += 9.9
    assert found.get("a") == 1
    clock.now += 0.2
    assert found.get("a") is None
    assert len(found) == 0


async def test_zero_ttl_caches_nothing() -> None:
    found: cache.ExpiringCache[str, int] = cache.ExpiringCache(10)
    found.set("a", 1, 0.0)
    assert found.get("a") is None


async def test_size_is_bounded_least_recently_used_first() -> None:
    found: cache.ExpiringCache[int, int] = cache.ExpiringCache(3)
    for key in range(3):
        found.set(key, key, 60)
    assert found.get(0) == 0  # 0 is now the most recently used
    found.set(3, 3, 60)
    assert len(found) == 3
    assert found.get(1) is None and found.get(0) == 0 and found.get(3) == 3
    for key in range(10_000):
        found.set(key, key, 60)
    assert len(found) == 3


async def test_concurrent_misses_share_one_computation() -> None:
    found: cache.ExpiringCache[str, int] = cache.ExpiringCache(10)
    release = asyncio.Event()
    calls = 0

    async def compute() -> int:
        nonlocal calls
        calls += 1
        await release.wait()
        return 7

    waiters = [asyncio.ensure_future(found.get_or_compute("k", compute, lambda v: 10))
               for _ in range(50)]
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(*waiters) == [7] * 50
    assert calls == 1
    assert await found.get_or_compute("k", compute, lambda v: 10) == 7
    assert calls == 1


async def test_failures_reach_every_waiter_and_are_not_cached() -> None:
    found: cache.ExpiringCache[str, int] = cache.ExpiringCache(10)
    calls = 0

    async def compute() -> int:
        nonlocal calls
        calls += 1
        raise RuntimeError("boom")

    for _ in range(2):
        with pytest.raises(RuntimeError):
            await found.get_or_compute("k", compute, lambda v: 10)
    assert calls == 2


async def test_one_waiter_cancelled_does_not_cancel_the_others() -> None:
    found: cache.ExpiringCache[str, int] = cache.ExpiringCache(10)
    release = asyncio.Event()

    async def compute() -> int:
        await release.wait()
        return 1

    first = asyncio.ensure_future(found.get_or_compute("k", compute, lambda v: 10))
    second = asyncio.ensure_future(found.get_or_compute("k", compute, lambda v: 10))
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.sleep(0)
    release.set()
    assert await second == 1
    with pytest.raises(asyncio.CancelledError):
        await first
