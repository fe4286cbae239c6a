"""The ring's waiters: woken only by an event under their prefix (with its revision), every one
by a gap, a restart or the close (with None), and a watcher gone while waiting leaves nothing."""

from __future__ import annotations

import asyncio

from apiserver.storage import broadcast, interface


def _event(key: str, revision: int) -> interface.Event:
    return interface.Event(interface.EventType.PUT,
                           interface.Record(key, b"v", revision, revision), None)


async def _waiting(ring: broadcast.Ring, count: int) -> None:
    async with asyncio.timeout(5):
        while ring.waiting() < count:
            await asyncio.sleep(0)


async def test_a_waiter_wakes_only_under_its_prefix_with_the_revision() -> None:
    ring = broadcast.Ring(4, last=10)
    mine = asyncio.create_task(ring.wait(10, "/stores/node-1"))
    everything = asyncio.create_task(ring.wait(10, "/stores/"))
    artifacts = asyncio.create_task(ring.wait(10, "/artifacts/"))
    await _waiting(ring, 3)
    for revision in range(11, 20):  # more than the ring holds, none under node-1
        ring.publish(_event(f"/stores/other-{revision}", revision))
    assert await everything == 11
    await asyncio.sleep(0)
    assert not mine.done() and not artifacts.done() and ring.waiting() == 2
    ring.publish(_event("/stores/node-1", 20))
    assert await mine == 20  # 11-19 held nothing under its prefix
    ring.close()
    assert await artifacts is None


async def test_a_gap_or_a_restart_wakes_every_waiter_with_nothing_known() -> None:
    ring = broadcast.Ring(4, last=10)
    waiter = asyncio.create_task(ring.wait(10, "/a/"))
    await _waiting(ring, 1)
    ring.publish(_event("/b/x", 13))  # 11 and 12 never published here
    assert await waiter is None
    waiter = asyncio.create_task(ring.wait(13, "/a/"))
    await _waiting(ring, 1)
    ring.restart(40)
    assert await waiter is None
    assert await ring.wait(10, "/a/") is None  # behind already: nothing to wait for


async def test_a_watcher_gone_while_waiting_leaves_no_entry() -> None:
    ring = broadcast.Ring(4, last=0)
    waiters = [asyncio.create_task(ring.wait(0, f"/stores/node-{i}")) for i in range(3)]
    await _waiting(ring, 3)
    waiters[1].cancel()
    await asyncio.gather(waiters[1], return_exceptions=True)
    assert ring.waiting() == 2
    ring.publish(_event("/stores/node-0", 1))
    assert await waiters[0] == 1 and ring.waiting() == 1
    ring.close()
    assert await waiters[2] is None and ring.waiting() == 0
