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


async def test_exclusive_sections_are_counted_once_each_holds_its_lock() -> None:
    table = locks.DigestLocks()
    release = asyncio.Event()

    async def reader() -> None:
        async with table.shared("d"):
            await release.wait()

    async def writer() -> None:
        async with table.exclusive("d"):
            pass

    r = asyncio.create_task(reader())
    await asyncio.sleep(0)
    w = asyncio.create_task(writer())
    await asyncio.sleep(0)
    assert table.exclusive_sections == 0  # waiting behind the reader: not counted yet
    release.set()
    await asyncio.gather(r, w)
    assert table.exclusive_sections == 1
    async with table.shared("d"):
        pass
    assert table.exclusive_sections == 1 and len(table) == 0


async def test_cancelled_waiters_leave_nothing_behind() -> None:
    table = locks.DigestLocks()
    targets = locks.KeyedLock()
    release = asyncio.Event()

    async def hold_both() -> None:
        async with table.exclusive("d"), targets.hold("t"):
            await release.wait()

    async def wait_shared() -> None:
        async with table.shared("d"):
            raise AssertionError("never entered")

    async def wait_hold() -> None:
        async with targets.hold("t"):
            raise AssertionError("never entered")

    holder = asyncio.create_task(hold_both())
    await asyncio.sleep(0)
    waiters = [asyncio.create_task(wait_shared()), asyncio.create_task(wait_hold())]
    await asyncio.sleep(0)
    for task in waiters:
        task.cancel()
    await asyncio.gather(*waiters, return_exceptions=True)
    release.set()
    await holder
    assert len(table) == 0 and len(targets) == 0
