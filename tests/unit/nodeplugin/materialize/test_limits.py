"""The node-wide request limit, byte-rate bucket and look-ahead budget."""

from __future__ import annotations

import asyncio

from nodeplugin.materialize import limits


async def test_request_limiter_never_exceeds_its_limit() -> None:
    limiter = limits.RequestLimiter(3)
    inside = 0
    seen = 0

    async def one() -> None:
        nonlocal inside, seen
        async with limiter.slot():
            inside += 1
            seen = max(seen, inside)
            await asyncio.sleep(0.001)
            inside -= 1

    await asyncio.gather(*(one() for _ in range(30)))
    assert seen == 3
    assert limiter.peak == 3
    assert limiter.open == 0


async def test_request_limiter_gives_back_a_cancelled_slot() -> None:
    limiter = limits.RequestLimiter(1)
    started = asyncio.Event()

    async def hold() -> None:
        async with limiter.slot():
            started.set()
            await asyncio.sleep(10)

    task = asyncio.create_task(hold())
    await started.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert limiter.open == 0
    async with asyncio.timeout(1), limiter.slot():
        pass


async def test_request_limiter_can_grow_while_waiting() -> None:
    limiter = limits.RequestLimiter(1)
    async with limiter.slot():
        waiter = asyncio.create_task(_enter(limiter))
        await asyncio.sleep(0.01)
        assert not waiter.done()
        await limiter.set_limit(2)
        async with asyncio.timeout(1):
            await waiter


async def _enter(limiter: limits.RequestLimiter) -> None:
    async with limiter.slot():
        pass


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


async def test_rate_limiter_converges_on_the_rate() -> None:
    fake = FakeTime()
    bucket = limits.RateLimiter(1000, clock=fake.clock, sleep=fake.sleep)
    for _ in range(100):
        await bucket.consume(300)
    # 30,000 bytes at 1000 B/s: 30 s, minus the initial quarter-second burst at most.
    assert 29.7 <= fake.now <= 30.0


async def test_rate_limiter_zero_is_unlimited() -> None:
    fake = FakeTime()
    bucket = limits.RateLimiter(0, clock=fake.clock, sleep=fake.sleep)
    await bucket.consume(10**12)
    assert fake.slept == []


async def test_rate_limiter_refills_with_idle_time_up_to_the_burst() -> None:
    fake = FakeTime()
    bucket = limits.RateLimiter(1000, clock=fake.clock, sleep=fake.sleep)
    fake.now += 100  # a long pause earns only a quarter second of burst
    await bucket.consume(250)
    assert fake.slept == []
    await bucket.consume(500)
    assert fake.slept == [0.5]


async def test_budget_blocks_until_released_and_bypasses_the_frontier() -> None:
    budget = limits.Budget(100)
    assert await budget.acquire(60, lambda: False) == 60
    frontier = False
    waiter = asyncio.create_task(budget.acquire(60, lambda: frontier))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    frontier = True
    budget.wake()
    assert await asyncio.wait_for(waiter, 1) == 0
    second = asyncio.create_task(budget.acquire(60, lambda: False))
    await asyncio.sleep(0.01)
    assert not second.done()
    budget.release(60)
    assert await asyncio.wait_for(second, 1) == 60
    assert budget.peak == 60


async def test_budget_admits_an_oversized_part_when_empty() -> None:
    budget = limits.Budget(10)
    assert await budget.acquire(50, lambda: False) == 50


async def test_charged_frontier_bytes_hold_back_look_ahead_until_released() -> None:
    budget = limits.Budget(100)
    budget.charge(80)  # a frontier part received faster than its file is hashed
    assert budget.used == 80 and budget.peak == 80
    ahead = asyncio.create_task(budget.acquire(40, lambda: False))
    await asyncio.sleep(0.01)
    assert not ahead.done()
    budget.release(80)
    assert await asyncio.wait_for(ahead, 1) == 40
    budget.charge(0)
    assert budget.used == 40
