"""The peer port's stream slots: overall and per-caller bounds, turns, refusals, releases."""

from __future__ import annotations

import asyncio

import pytest

from nodeplugin.peer import slots


async def _taken(found: slots.Slot | slots.Busy) -> slots.Slot:
    assert isinstance(found, slots.Slot), found
    return found


async def test_one_caller_gets_half_the_slots_and_another_the_rest() -> None:
    port = slots.Slots(4, wait_seconds=60)
    a = [await _taken(await port.take("a")) for _ in range(2)]
    waiting = asyncio.ensure_future(port.take("a"))  # a's third waits: a holds its half
    await asyncio.sleep(0)
    assert port.running_of("a") == 2 and port.waiting == 1 and not waiting.done()
    b = [await _taken(await port.take("b")) for _ in range(2)]  # b runs at once
    assert port.running == 4
    a[0].release()
    third = await _taken(await waiting)  # a's turn came with a's own slot back
    assert port.running_of("a") == 2 and port.waiting == 0
    for slot in (a[1], third, *b):
        slot.release()
        slot.release()  # exactly once
    assert port.running == 0 and port.open_of("a") == 0 and port.open_of("b") == 0


async def test_turns_go_first_come_first_served_among_callers_allowed_to_run() -> None:
    port = slots.Slots(2, per_peer=2, wait_seconds=60)
    held = [await _taken(await port.take("a")) for _ in range(2)]
    order: list[str] = []

    async def wait(peer: str) -> None:
        slot = await _taken(await port.take(peer))
        order.append(peer)
        slot.release()

    tasks = [asyncio.ensure_future(wait(p)) for p in ("b", "c", "b")]
    await asyncio.sleep(0)
    assert port.waiting == 3
    held[0].release()
    held[1].release()
    await asyncio.gather(*tasks)
    assert order == ["b", "c", "b"]


async def test_a_wait_that_ends_is_a_503_and_a_caller_past_its_bound_a_429() -> None:
    port = slots.Slots(1, per_peer=1, per_peer_open=2, max_waiting=1, wait_seconds=0.05)
    held = await _taken(await port.take("a"))
    busy = await port.take("a")
    assert isinstance(busy, slots.Busy) and busy.code == 503 and busy.retry_after > 0
    assert port.open_of("a") == 1 and port.waiting == 0
    queued = asyncio.ensure_future(port.take("b"))
    await asyncio.sleep(0)
    full = await port.take("c")  # the one place in the queue is b's
    assert isinstance(full, slots.Busy) and full.code == 503 and "wait" in full.message
    assert isinstance(await queued, slots.Busy)
    port.per_peer_open = 1
    over = await port.take("a")
    assert isinstance(over, slots.Busy) and over.code == 429
    assert port.refused == 4
    held.release()
    assert port.running == 0 and port.open_of("a") == 0


async def test_a_cancelled_wait_gives_everything_back() -> None:
    port = slots.Slots(1, per_peer=1, wait_seconds=60)
    held = await _taken(await port.take("a"))
    waiting = asyncio.ensure_future(port.take("b"))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert port.waiting == 0 and port.open_of("b") == 0
    # granted in the same turn as the cancellation: the slot is given back, not lost
    granted = asyncio.ensure_future(port.take("b"))
    await asyncio.sleep(0)
    held.release()
    granted.cancel()
    with pytest.raises(asyncio.CancelledError):
        await granted
    assert port.running == 0 and port.open_of("b") == 0
