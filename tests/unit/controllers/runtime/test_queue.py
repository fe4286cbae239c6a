"""The work queue: one key in flight, dedupe, delayed adds (earliest wins), backoff, shutdown."""

from __future__ import annotations

import asyncio

from controllers.runtime import queue
from devkit import clock as manual
from timing import backoff as backoffs


async def test_a_key_is_queued_once_and_never_handed_out_twice() -> None:
    q: queue.WorkQueue[str] = queue.WorkQueue(manual.ManualClock())
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 2
    first = await q.get()
    assert first == "a"
    q.add("a")  # changed while in flight: held back until done
    assert await q.get() == "b"
    assert len(q) == 0
    q.done("a")
    assert await q.get() == "a"


async def test_delayed_adds_fire_on_the_clock_and_the_earliest_wins() -> None:
    clock = manual.ManualClock()
    q: queue.WorkQueue[str] = queue.WorkQueue(clock)
    q.add_after("a", 60)
    q.add_after("a", 10)
    q.add_after("a", 30)
    assert clock.pending() == [10] and len(q) == 0  # the later ones were cancelled
    clock.advance(9)
    assert len(q) == 0
    clock.advance(1)
    assert len(q) == 1 and clock.pending() == []
    clock.advance(100)
    assert len(q) == 1  # the later timers were replaced, not kept


async def test_rate_limited_requeues_back_off_until_forgotten() -> None:
    clock = manual.ManualClock()
    q: queue.WorkQueue[str] = queue.WorkQueue(clock, backoffs.Backoff(1, 5))
    assert [q.add_rate_limited("a") for _ in range(5)] == [1, 2, 4, 5, 5]
    q.forget("a")
    assert q.add_rate_limited("a") == 1


async def test_shutdown_wakes_waiting_workers_and_drops_timers() -> None:
    clock = manual.ManualClock()
    q: queue.WorkQueue[str] = queue.WorkQueue(clock)
    waiter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add_after("a", 5)
    q.shutdown()
    assert await waiter is None
    clock.advance(10)
    q.add("b")
    assert len(q) == 0 and await q.get() is None
