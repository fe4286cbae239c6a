"""Controllers and the manager: results scheduling requeues, errors backing off, one key never
reconciled twice at once, graceful stop, and leadership gating the controllers."""

from __future__ import annotations

import asyncio
from collections import Counter

from controllers.runtime import controller as runtime
from controllers.runtime import leader
from controllers.runtime import manager as managers
from devkit import clock as manual
from tests.support import waiting


async def test_results_schedule_the_next_reconcile() -> None:
    clock = manual.ManualClock()
    calls: Counter[str] = Counter()

    async def reconcile(key: str) -> runtime.Result:
        calls[key] += 1
        if key == "fails":
            raise RuntimeError("boom")
        if key == "later":
            return runtime.Result(requeue_after=30)
        return runtime.DONE

    controller: runtime.Controller[str] = runtime.Controller(
        "test", reconcile, clock, keys=lambda: ["ok", "later", "fails"])
    controller.open()  # every key queued, as when a run starts
    for _ in range(3):
        key = await controller.queue.get()
        assert key is not None
        await controller.process_one(key)
        controller.queue.done(key)
    assert len(controller.queue) == 0
    assert clock.pending() == [1.0, 30]  # "fails" backs off, "later" as asked, "ok" not again
    assert controller.queue.failures("fails") == 1
    clock.advance(1)
    assert await controller.queue.get() == "fails"


async def test_one_key_is_never_reconciled_twice_at_once_and_stop_is_graceful() -> None:
    clock = manual.ManualClock()
    running: Counter[str] = Counter()
    overlap: list[str] = []
    release = asyncio.Event()
    done: list[str] = []

    async def reconcile(key: str) -> runtime.Result:
        running[key] += 1
        if running[key] > 1:
            overlap.append(key)
        await release.wait()
        running[key] -= 1
        done.append(key)
        return runtime.DONE

    controller: runtime.Controller[str] = runtime.Controller(
        "test", reconcile, clock, keys=lambda: ["a", "b"], concurrency=4)
    task = asyncio.create_task(controller.run())
    await waiting.until(lambda: running["a"] == 1 and running["b"] == 1)
    for _ in range(5):
        controller.enqueue("a")  # changes while "a" is in flight
    release.set()
    await waiting.until(lambda: done.count("a") == 2)
    assert not overlap
    release.clear()
    controller.enqueue("b")
    await waiting.until(lambda: running["b"] == 1)
    controller.stop()
    release.set()
    await task  # the key in hand finishes, then the reconcilers end
    assert done.count("b") == 2


class FlakyLease:
    """A leadership that is granted, then lost when told."""

    def __init__(self) -> None:
        self.lost = asyncio.Event()
        self.granted = asyncio.Event()
        self.acquired = 0

    async def acquire(self) -> None:
        await self.granted.wait()
        self.acquired += 1

    async def hold(self) -> None:
        await self.lost.wait()
        self.lost.clear()
        self.granted.clear()

    async def release(self) -> None:
        return None


class Recording:
    def __init__(self) -> None:
        self.name = "recording"
        self.runs = 0
        self.stopped = asyncio.Event()
        self._stop = asyncio.Event()

    async def run(self) -> None:
        self.runs += 1
        self._stop.clear()
        await self._stop.wait()
        self.stopped.set()

    def stop(self) -> None:
        self._stop.set()


async def test_controllers_run_only_while_leading() -> None:
    lease = FlakyLease()
    recording = Recording()
    manager = managers.Manager([], [recording], lease)
    manager.start()
    await asyncio.sleep(0)
    assert recording.runs == 0 and not manager.leading.is_set()
    lease.granted.set()
    await manager.leading.wait()
    await waiting.until(lambda: recording.runs == 1)
    lease.lost.set()
    await recording.stopped.wait()
    await waiting.until(lambda: not manager.leading.is_set())
    lease.granted.set()
    await waiting.until(lambda: recording.runs == 2)
    await manager.stop()
    assert lease.acquired == 2


async def test_standalone_always_leads() -> None:
    always = leader.AlwaysLeader()
    await asyncio.wait_for(always.acquire(), 5)
