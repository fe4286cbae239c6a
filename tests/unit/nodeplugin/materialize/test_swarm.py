"""The rounds of ``swarm.Swarm`` with fake peers: what comes from a peer, what this node claims
from the hub, what it leaves to another node, and when it stops waiting for that node."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator, Sequence
from typing import cast

from hub import source
from nodeplugin.cache import files, inflight, layout
from nodeplugin.materialize import checkpoint, limits, peers, receive, swarm, transfer
from openapi import manifest

Ident = tuple[str, str]


class FakePeer:
    def __init__(self, name: str, held: dict[Ident, int | None]) -> None:
        self.node = name
        self.answers = held
        self.asked = 0

    async def held(self, idents: Sequence[Ident]) -> dict[Ident, int | None]:
        self.asked += 1
        return {i: self.answers[i] for i in idents if i in self.answers}

    def stream_file(self, ident: Ident, *, start: int, end: int) -> AsyncIterator[bytes]:
        raise AssertionError("not read in these tests")

    def open_file(self, ident: Ident, *, start: int, end: int,
                  read_timeout: float | None = None) -> receive.Body:
        raise AssertionError("not read in these tests")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _files(tmp: pathlib.Path, count: int, part_bytes: int = 4 << 20
           ) -> list[transfer.FileTransfer]:
    cache = layout.Layout(tmp)
    cache.create()
    writer = transfer.LedgerWriter(checkpoint.Ledger.load(tmp, "sha256:" + "0" * 64))
    found = []
    for i in range(count):
        entry = manifest.Entry(f"f{i}", "sha256", f"{i:064x}", 10)
        found.append(transfer.FileTransfer(
            entry, tmp, writer, limits.Budget(1 << 20), transfer.Tuning(part_bytes=part_bytes),
            lambda n: None,
            store=files.of(cache)))
    return found


class Run:
    """Hooks that 'fetch' a batch by marking it complete, remembering each file's source."""

    def __init__(self, clock: Clock) -> None:
        self.sources: dict[str, str] = {}
        self.batches: list[list[str]] = []
        self.clock = clock

    async def fetch(self, batch: list[transfer.FileTransfer]) -> None:
        self.batches.append([f.entry.path for f in batch])
        for f in batch:
            f.complete = True

    def route(self, f: transfer.FileTransfer, relay: source.Source | None) -> None:
        self.sources[f.entry.path] = "hub" if relay is None else "peer"

    async def renew(self, left: list[transfer.FileTransfer]) -> list[transfer.FileTransfer]:
        return left

    def relay(self, candidates: Sequence[peers.Candidate]) -> source.Source:
        assert all(isinstance(c, swarm.ByIdentity) for c in candidates)
        return cast(source.Source, object())  # never read: fetch is this fake's


def _swarm(run: Run, everyone: list[FakePeer], registry: inflight.InFlight,
           clock: Clock) -> swarm.Swarm:
    hooks = swarm.Hooks(fetch=run.fetch, route=run.route, renew=run.renew,
                        relay=run.relay)
    return swarm.Swarm("sha256:" + "0" * 64, everyone, hooks, registry, stall_seconds=5.0,
                       claim_bytes=10, clock=clock)


async def test_stored_files_come_from_peers_and_the_rest_is_claimed_one_round_at_a_time(
        tmp_path: pathlib.Path) -> None:
    todo = _files(tmp_path, 3)
    peer = FakePeer("b", {files.identity(todo[0].entry): None})
    clock = Clock()
    run = Run(clock)
    registry = inflight.InFlight()
    s = _swarm(run, [peer], registry, clock)
    await s.run(todo)
    assert run.sources == {"f0": "peer", "f1": "hub", "f2": "hub"}
    # claim_bytes is one file: the hub's files came one a round, f0 with the first
    assert len(run.batches) == 2 and "f0" in run.batches[0]
    assert s.claimed == 2 and s.from_peers == 1
    assert all(registry.received(files.identity(f.entry)) is None for f in todo)


async def test_a_file_another_node_fetches_is_left_to_it_until_its_bytes_stop(
        tmp_path: pathlib.Path) -> None:
    todo = _files(tmp_path, 1)
    ident = files.identity(todo[0].entry)
    peer = FakePeer("b", {ident: 4})
    clock = Clock()
    run = Run(clock)
    s = _swarm(run, [peer], inflight.InFlight(), clock)
    task = asyncio.create_task(s.run(todo))
    while peer.asked < 3:
        await asyncio.sleep(0.01)
    assert run.batches == []  # left to the node fetching it
    peer.answers[ident] = 8  # its bytes moved: still left to it
    clock.now += 4.0
    asked = peer.asked
    while peer.asked < asked + 2:
        await asyncio.sleep(0.01)
    assert run.batches == []
    clock.now += 5.0  # stood still for the stall timeout: claimed here, from the hub
    await asyncio.wait_for(task, 5)
    assert run.sources == {"f0": "hub"}


async def test_a_file_both_nodes_claim_at_once_is_left_by_the_one_that_sees_the_other(
        tmp_path: pathlib.Path) -> None:
    todo = _files(tmp_path, 1)
    ident = files.identity(todo[0].entry)

    class Racing(FakePeer):
        async def held(self, idents: Sequence[Ident]) -> dict[Ident, int | None]:
            # the other node claims the file between this node's first question and its check
            found = await super().held(idents)
            if self.asked == 1:
                self.answers[ident] = 0
            elif self.asked >= 4:
                self.answers[ident] = None  # ... and stores it
            return found

    peer = Racing("b", {})
    clock = Clock()
    run = Run(clock)
    s = _swarm(run, [peer], inflight.InFlight(), clock)
    await asyncio.wait_for(s.run(todo), 5)
    assert run.sources == {"f0": "peer"} and s.claimed == 0


async def test_with_follow_a_file_another_node_fetches_is_taken_from_it_in_one_range(
        tmp_path: pathlib.Path) -> None:
    todo = _files(tmp_path, 2, part_bytes=4)
    for f in todo:
        f.prepare()
    first, second = (files.identity(f.entry) for f in todo)
    behind, ahead = FakePeer("b", {first: 2}), FakePeer("c", {first: 6})
    checking = FakePeer("d", {first: 0})  # no byte yet: may still leave it
    clock = Clock()
    run = Run(clock)
    followed: dict[str, list[str]] = {}

    def relay(candidates: Sequence[peers.Candidate]) -> source.Source:
        followed[str(len(followed))] = [c.node for c in candidates]
        return run.relay(candidates)

    hooks = swarm.Hooks(fetch=run.fetch, route=run.route, renew=run.renew, relay=relay)
    registry = inflight.InFlight()
    s = swarm.Swarm("sha256:" + "0" * 64, [behind, checking, ahead], hooks, registry,
                    stall_seconds=5.0,
                    claim_bytes=10, clock=clock, follow=True)
    assert [len(f.parts) for f in todo] == [3, 3]  # 10 bytes in parts of 4
    await asyncio.wait_for(s.run(todo), 5)
    assert run.sources == {"f0": "peer", "f1": "hub"}  # f1: nobody has it, claimed
    assert followed == {"0": ["c", "b"]}  # the furthest fetcher first
    assert s.followed == 1 and s.from_peers == 1 and s.claimed == 1
    assert len(todo[0].parts) == 1 and todo[0].parts[0].start == 0
    assert todo[0].parts[0].end == todo[0].entry.size
    assert len(todo[1].parts) == 3  # a claimed file keeps its parts
    assert registry.received(second) is None  # its claim given back


async def test_with_follow_a_claim_left_to_another_node_is_followed_a_round_later_only(
        tmp_path: pathlib.Path) -> None:
    """Two nodes that claimed one file at once and both see the other's claim both leave it:
    following at that moment would have each follow the other; a later round follows a node
    still fetching it once it has bytes (its claim checked)."""
    todo = _files(tmp_path, 1)
    ident = files.identity(todo[0].entry)

    class Racing(FakePeer):
        async def held(self, idents: Sequence[Ident]) -> dict[Ident, int | None]:
            found = await super().held(idents)
            if self.asked == 1:
                self.answers[ident] = 0  # claimed by the other node just after this answer
            elif self.asked == 2:
                self.answers[ident] = 4  # ... kept after its own check: it has bytes now
            return found

    peer = Racing("b", {})
    clock = Clock()
    run = Run(clock)
    asks_at_fetch: list[int] = []
    fetch = run.fetch

    async def counted(batch: list[transfer.FileTransfer]) -> None:
        asks_at_fetch.append(peer.asked)
        await fetch(batch)

    hooks = swarm.Hooks(fetch=counted, route=run.route, renew=run.renew, relay=run.relay)
    s = swarm.Swarm("sha256:" + "0" * 64, [peer], hooks, inflight.InFlight(), stall_seconds=5.0,
                    claim_bytes=10, clock=clock, follow=True)
    await asyncio.wait_for(s.run(todo), 5)
    assert run.sources == {"f0": "peer"} and s.claimed == 0 and s.followed == 1
    assert asks_at_fetch == [3]  # survey, the claim's check (left), then the round that follows
