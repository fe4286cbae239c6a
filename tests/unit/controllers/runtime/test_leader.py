"""Lease leader election on a manual clock: one holder, take-over only after the lease
duration without renewal, losing leadership before the lease can pass, release on stop."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from controllers.runtime import errors, leader
from devkit import clock as manual
from tests.support import waiting

TIMING = leader.Timing(lease_duration=15, renew_deadline=10, retry_period=2)


class MemoryLeases:
    """Leases with resourceVersion checks, as kube-apiserver does them; ``down`` fails every
    call from the named identity (a replica cut off from the API)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.version = 0
        self.down: set[str] = set()

    def view(self, identity: str) -> leader.LeaseApi:
        outer = self

        class View:
            async def get(self, namespace: str, name: str) -> dict[str, Any]:
                outer._check(identity)
                found = outer.objects.get((namespace, name))
                if found is None:
                    raise errors.NotFound("no lease")
                return copy.deepcopy(found)

            async def create(self, lease: dict[str, Any]) -> dict[str, Any]:
                outer._check(identity)
                key = (lease["metadata"]["namespace"], lease["metadata"]["name"])
                if key in outer.objects:
                    raise errors.Conflict("exists")
                return outer._store(key, lease)

            async def update(self, lease: dict[str, Any]) -> dict[str, Any]:
                outer._check(identity)
                key = (lease["metadata"]["namespace"], lease["metadata"]["name"])
                current = outer.objects.get(key)
                if current is None:
                    raise errors.NotFound("no lease")
                if current["metadata"]["resourceVersion"] != lease["metadata"]["resourceVersion"]:
                    raise errors.Conflict("changed")
                return outer._store(key, lease)

        return View()

    def _check(self, identity: str) -> None:
        if identity in self.down:
            raise errors.ApiError("connection refused", code=503)

    def _store(self, key: tuple[str, str], lease: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        stored = copy.deepcopy(lease)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.objects[key] = stored
        return copy.deepcopy(stored)

    def holder(self) -> str:
        return str(self.objects[("ns", "lease")]["spec"]["holderIdentity"])


def _elector(leases: MemoryLeases, clock: manual.ManualClock, name: str) -> leader.LeaseElector:
    return leader.LeaseElector(leases.view(name), clock, namespace="ns", name="lease",
                               identity=name, timing=TIMING)


async def _tick(clock: manual.ManualClock, seconds: float) -> None:
    """Advance in retry-period steps, letting the electors run between them."""
    steps = int(seconds // TIMING.retry_period)
    for _ in range(steps):
        clock.advance(TIMING.retry_period)
        for _ in range(5):
            await asyncio.sleep(0)


async def test_one_leader_and_a_take_over_after_the_lease_expires() -> None:
    clock, leases = manual.ManualClock(), MemoryLeases()
    a, b = _elector(leases, clock, "a"), _elector(leases, clock, "b")
    await a.acquire()
    assert leases.holder() == "a"
    holding = asyncio.create_task(a.hold())
    b_acquire = asyncio.create_task(b.acquire())
    await _tick(clock, 60)
    assert not b_acquire.done() and leases.holder() == "a"  # renewed: never expires
    leases.down.add("a")  # a is cut off: it cannot renew
    await _tick(clock, 10)
    await waiting.until(holding.done)  # a gives up at the renew deadline...
    assert not a.leading and not b_acquire.done()  # ...before b may take the lease
    await _tick(clock, 8)
    await waiting.until(b_acquire.done)
    assert leases.holder() == "b" and b.leading
    assert leases.objects[("ns", "lease")]["spec"]["leaseTransitions"] == 1


async def test_release_hands_over_without_waiting() -> None:
    clock, leases = manual.ManualClock(), MemoryLeases()
    a, b = _elector(leases, clock, "a"), _elector(leases, clock, "b")
    await a.acquire()
    b_acquire = asyncio.create_task(b.acquire())
    await _tick(clock, 4)
    await a.release()
    assert leases.objects[("ns", "lease")]["spec"]["holderIdentity"] == ""
    await _tick(clock, 2)
    await waiting.until(b_acquire.done)
    assert leases.holder() == "b"


def test_the_renew_deadline_must_be_shorter_than_the_lease() -> None:
    try:
        leader.LeaseElector(MemoryLeases().view("a"), manual.ManualClock(), namespace="n",
                            name="l", identity="a",
                            timing=leader.Timing(lease_duration=10, renew_deadline=10))
    except ValueError:
        return
    raise AssertionError("accepted a renew deadline equal to the lease duration")
