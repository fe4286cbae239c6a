"""A file another node is still fetching from the hub, followed as it arrives (``peer/growing.py``,
``swarm``'s ``follow``) over real loopback TLS: the hub serves a one-file model once for two
cold nodes, a peer lying in the bytes it had not verified yet is caught by the puller's own hash
and the file comes from the hub, and a fetcher that gives up hands the puller to the hub from
its last received byte.

Node A fetches the file in one range from a hub that pauses at ``PAUSE`` until the test
releases it; node B starts once A has bytes, so it finds A fetching the file and follows it.
Every wait is on an event or a count (the pause ends only when the test says so); the nodes'
stall timeouts are far beyond any step of the tests.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading

import httpx
import pytest

from nodeplugin.cache import files, inflight
from nodeplugin.materialize import interface
from nodeplugin.peer import wire
from tests.integration.nodeplugin import test_peer_files
from tests.integration.nodeplugin.test_peer_files import Fleet, MiB, Node
from tests.integration.nodeplugin.test_peer_sync import PLUGIN_TOKEN, _publish, _tree
from tests.support import hubrequest

pytestmark = pytest.mark.integration
fleet = test_peer_files.fleet  # the same three nodes, hub and control plane

ONE = "org/one"
NAME = "model.gguf"
SIZE = 12 * MiB + 5
PAUSE = 3 * MiB


async def _paused(fleet: Fleet) -> tuple[interface.Request, threading.Event, files.Identity]:
    fleet.hub.add_repo(ONE, {NAME: SIZE})
    request = await hubrequest.request_for(fleet.hub, ONE)
    release = threading.Event()
    pause = fleet.hub.faults(ONE, NAME)
    pause.stall_at, pause.stall_seconds, pause.stall_times = PAUSE, None, 1
    pause.stall_until = release
    digest = hashlib.sha256(fleet.hub.content(ONE, NAME).read()).hexdigest()
    return request, release, ("sha256", digest)


async def _fetching(fleet: Fleet, request: interface.Request, ident: files.Identity
                    ) -> tuple[Node, inflight.InFlight]:
    """Node A started, its file claimed and at least 1 MiB received (it pauses at ``PAUSE``)."""
    a = await fleet.node("node-a", stall=120.0, part_bytes=16 * MiB)
    assert (await a.materializer.ensure(request)).state is interface.State.DOWNLOADING
    registry = inflight.of(a.cache)
    async with asyncio.timeout(60):
        while (registry.received(ident) or 0) < MiB:
            await asyncio.sleep(0.02)
    return a, registry


async def _following(fleet: Fleet, request: interface.Request
                     ) -> tuple[Node, asyncio.Task[None]]:
    """Node B started, pulling, and holding bytes from A (A has not passed its pause)."""
    b = await fleet.node("node-b", stall=120.0)
    pulled = asyncio.create_task(_publish(b.materializer, request))
    async with asyncio.timeout(60):
        while b.holders.delivered_bytes == 0:
            await asyncio.sleep(0.01)
    return b, pulled


async def test_a_file_still_arriving_is_followed_and_the_hub_serves_it_once(
        fleet: Fleet) -> None:
    request, release, ident = await _paused(fleet)
    a, registry = await _fetching(fleet, request, ident)
    b, pulled = await _following(fleet, request)
    # B has bytes of the file from A while A has not stored it (nor passed the pause)
    assert not os.path.exists(files.of(a.cache).path(ident))
    received = registry.received(ident)
    assert received is not None and received <= PAUSE
    auth = {"authorization": f"Bearer {PLUGIN_TOKEN}"}
    async with httpx.AsyncClient(verify=False, base_url=fleet.url("node-a")) as http:
        for asked in ({}, {"range": "bytes=0-"}, {"range": "bytes=0-1,4-5"}):
            # the size is not known yet on A: only a range with its end is served
            answer = await http.get(wire.stored_file_path(*ident), headers={**auth, **asked})
            assert answer.status_code == 416, asked
        head = await http.get(wire.stored_file_path(*ident),
                              headers={**auth, "range": "bytes=0-99"})
        assert head.status_code == 206 and head.headers["content-range"] == "bytes 0-99/*"
        assert head.content == fleet.hub.content(ONE, NAME).read(0, 100)
    release.set()
    await asyncio.wait_for(pulled, 60)
    assert fleet.hub.bytes_served(ONE) == SIZE  # A's one copy; B's every byte came from A
    assert b.holders.delivered_bytes == SIZE
    assert b.materializer.origins.all()[request.digest] == "Peer"
    assert _tree(b.cache, request.digest)[NAME] == fleet.hub.content(ONE, NAME).read()


async def test_a_peer_lying_in_bytes_still_arriving_is_caught_and_the_file_comes_from_the_hub(
        fleet: Fleet) -> None:
    request, release, ident = await _paused(fleet)
    _, registry = await _fetching(fleet, request, ident)
    growing = registry.fetching(ident)
    assert growing is not None and growing.path is not None
    with open(growing.path, "r+b") as f:  # A's own hash saw the hub's bytes: only B's can tell
        f.write(b"\x00" * 4096)
    b, pulled = await _following(fleet, request)
    release.set()
    await asyncio.wait_for(pulled, 60)
    # B took the file from A, its hash failed, and the whole file came from the hub for B
    assert b.holders.delivered_bytes == SIZE
    assert fleet.hub.bytes_served(ONE) == 2 * SIZE
    assert _tree(b.cache, request.digest)[NAME] == fleet.hub.content(ONE, NAME).read()


async def test_a_fetcher_that_gives_up_hands_the_puller_to_the_hub_from_its_last_byte(
        fleet: Fleet) -> None:
    request, release, ident = await _paused(fleet)
    a, _ = await _fetching(fleet, request, ident)
    b, pulled = await _following(fleet, request)
    # A stops (its claim given back, the file unstored): its answer to B ends short, and B takes
    # the rest from the hub, from the last byte it received, long before its stall timeout
    await a.materializer.close()
    await asyncio.wait_for(pulled, 60)
    taken = b.holders.delivered_bytes
    assert 0 < taken <= PAUSE
    assert fleet.hub.bytes_served(ONE) == PAUSE + SIZE - taken
    assert _tree(b.cache, request.digest)[NAME] == fleet.hub.content(ONE, NAME).read()
    release.set()
    assert not os.path.exists(files.of(a.cache).path(ident))
