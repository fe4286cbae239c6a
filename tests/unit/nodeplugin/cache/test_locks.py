from __future__ import annotations

import asyncio

from nodeplugin.cache import locks


async def test_shared_holders_overlap_and_exclusive_waits_for_them() -> None:
    table = locks.DigestLocks()
    events: list[str] = []
    release = asyncio.Event()

    async def reader(name: str) -> None:
        async with table.shared("d"):
            events.append(f"{name}+")
            await release.wait()
            events.append(f"{name}-")

    async def writer() -> None:
        async with table.exclusive("d"):
            events.append("w")

    readers = [asyncio.create_task(reader(n)) for n in ("r1", "r2")]
    await asyncio.sleep(0)
    w = asyncio.create_task(writer())
    await asyncio.sleep(0)
    assert events == ["r1+", "r2+"]  # both readers in at once, the writer waits
    release.set()
    await asyncio.gather(*readers, w)
    assert events[-1] == "w"
    assert len(table) == 0


async def test_a_waiting_writer_holds_off_new_readers() -> None:
    table = locks.DigestLocks()
    order: list[str] = []
    first = asyncio.Event()

    async def reader(name: str, gate: asyncio.Event | None) -> None:
        async with table.shared("d"):
            order.append(name)
            if gate is not None:
                await gate.wait()

    async def writer() -> None:
        async with table.exclusive("d"):
            order.append("w")

    r1 = asyncio.create_task(reader("r1", first))
    await asyncio.sleep(0)
    w = asyncio.create_task(writer())
    await asyncio.sleep(0)
    r2 = asyncio.create_task(reader("r2", None))
    await asyncio.sleep(0)
    first.set()
    await asyncio.gather(r1, w, r2)
    assert order == ["r1", "w", "r2"]


async def test_keyed_lock_serializes_one_key_and_forgets_idle_keys() -> None:
    table = locks.KeyedLock()
    inside = 0
    peak = 0

    async def job() -> None:
        nonlocal inside, peak
        async with table.hold("/t"):
            inside += 1
            peak = max(peak, inside)
            await asyncio.sleep(0)
            inside -= 1

    await asyncio.gather(*(job() for _ in range(5)))
    assert peak == 1
    assert len(table) == 0
