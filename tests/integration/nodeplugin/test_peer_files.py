"""Node-to-node sync by file over real loopback TLS: peers serve stored files by their content
identity (whichever tree links them, or none yet), a node still downloading serves the files it
finished, a peer lying about a file is caught by the puller's hash and the file comes from the
hub, and cold nodes materializing one digest at the same moment split the files so that the hub
serves each about once.

Each node is an in-process ``HubMaterializer`` with its own peer port (the real
``peer.server`` app on hypercorn over TLS), tokens reviewed by the fixture control plane, the
node stores as the plugins would report them (``Stores``: Ready, holding what each test says).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import pathlib
import threading
from collections.abc import AsyncIterator

import httpx
import pytest

import kube
from devkit import fixturehub
from devkit.clock import ManualClock
from devkit.controlplane import ControlPlane
from nodeplugin import reviews, serve
from nodeplugin.cache import files, inflight, layout
from nodeplugin.materialize import download, interface, ranges, transfer
from nodeplugin.peer import admission, client, holders, server, wire
from openapi import manifest
from tests.integration.nodeplugin.test_peer_sync import (
    PLUGIN_TOKEN,
    PLUGIN_USER,
    READER_TOKEN,
    TENANT_TOKEN,
    Stores,
    _config,
    _free_port,
    _publish,
    _tree,
    admit_plugins,
)
from tests.support import hubrequest

pytestmark = pytest.mark.integration

REPO = "org/files"
MiB = 1 << 20


def _files() -> dict[str, bytes | int | fixturehub.FileSpec]:
    return {
        "config.json": b'{"architectures": ["Tiny"]}\n',
        "model-00001.safetensors": 6 * MiB + 11,
        "model-00002.safetensors": 6 * MiB + 22,
        "model-00003.safetensors": 6 * MiB + 33,
        "tokenizer.json": fixturehub.FileSpec(size=300_000, lfs=False),
    }


def _settings(stall: float = 2.0, part_bytes: int = 1 * MiB) -> download.Settings:
    return download.Settings(
        concurrency=2, memory_bytes=4 * MiB,
        tuning=transfer.Tuning(part_bytes=part_bytes, checkpoint_bytes=1 * MiB),
        policy=ranges.Policy(stall_seconds=stall, max_failures=4, retry_base_seconds=0.05),
    )


@dataclasses.dataclass
class Node:
    name: str
    cache: layout.Layout
    materializer: download.HubMaterializer
    holders: holders.Holders


@dataclasses.dataclass
class Fleet:
    hub: fixturehub.Hub
    request: interface.Request
    stores: Stores
    tmp: pathlib.Path
    ports: dict[str, int]
    reviewer: reviews.TokenReviewer
    stack: contextlib.AsyncExitStack

    def url(self, name: str) -> str:
        return f"https://127.0.0.1:{self.ports[name]}"

    async def node(self, name: str, stall: float = 2.0, part_bytes: int = 1 * MiB) -> Node:
        """A node with an empty cache, its peer port serving, pulling from every other."""
        cache = layout.Layout(self.tmp / name)
        cache.create()
        app = server.make_app(cache, admission.Admission(self.reviewer, PLUGIN_USER))
        cert, key = serve.tls_files(self.tmp / "tls", None, None, ["127.0.0.1"])
        stop = asyncio.Event()
        task = asyncio.create_task(serve.serve(
            app, serve.hypercorn_config_for("127.0.0.1", self.ports[name], cert, key), stop))

        async def stop_serving() -> None:
            stop.set()
            await task

        self.stack.push_async_callback(stop_serving)
        token_file = self.tmp / f"{name}.token"
        token_file.write_text(PLUGIN_TOKEN)
        others = {n: self.url(n) for n in self.ports if n != name}
        found = holders.Holders(self.stores, others, self_node=name, token_file=str(token_file),
                                http=client.make_client(None))
        self.stack.push_async_callback(found.aclose)
        m = download.HubMaterializer.from_config(cache, _config(self.hub),
                                                 _settings(stall, part_bytes), holders=found)
        self.stack.push_async_callback(m.close)
        return Node(name, cache, m, found)


@pytest.fixture
async def fleet(tmp_path: pathlib.Path, control_plane: ControlPlane) -> AsyncIterator[Fleet]:
    admit_plugins(control_plane)
    with fixturehub.run() as hub:
        hub.add_repo(REPO, _files())
        request = await hubrequest.request_for(hub, REPO)
        kubeconfig = control_plane.write_kubeconfig(tmp_path / "r.kubeconfig",
                                                    token=READER_TOKEN)
        async with kube.Client.from_kubeconfig(kubeconfig) as kc, \
                contextlib.AsyncExitStack() as stack:
            reviewer = reviews.TokenReviewer(kc, clock=ManualClock(), audiences=[wire.AUDIENCE])
            ports = {n: _free_port() for n in ("node-a", "node-b", "node-c")}
            stores = Stores()
            for name in ports:
                stores.items.append({
                    "metadata": {"name": name},
                    "status": {"conditions": [{"type": "Ready", "status": "True"}],
                               "models": []},
                })
            yield Fleet(hub, request, stores, tmp_path, ports, reviewer, stack)


def _size(files_: dict[str, bytes]) -> int:
    return sum(len(c) for name, c in files_.items()
               if name.split("/")[0] not in layout.RESERVED_NAMES)


def _entries(cache: layout.Layout, digest: str) -> list[manifest.Entry]:
    data = (cache.published_path(digest) / ".gpustack-manifest").read_bytes()
    return manifest.parse(data)


async def test_stored_files_are_served_by_identity_and_held_says_which(fleet: Fleet) -> None:
    a = await fleet.node("node-a")
    await _publish(a.materializer, fleet.request)
    entries = {e.path: e for e in _entries(a.cache, fleet.request.digest)}
    weights = entries["model-00001.safetensors"]
    tokenizer = entries["tokenizer.json"]
    assert tokenizer.algorithm == "gitsha1" and weights.algorithm == "sha256"
    absent = ("sha256", "ab" * 32)
    inflight.of(a.cache).claim(("sha256", "cd" * 32), lambda: 4096)
    auth = {"authorization": f"Bearer {PLUGIN_TOKEN}"}
    body = wire.held_request([files.identity(weights), files.identity(tokenizer), absent,
                              ("sha256", "cd" * 32)])
    async with httpx.AsyncClient(verify=False, base_url=fleet.url("node-a")) as http:
        held = await http.post(wire.HELD_PATH, content=body, headers=auth)
        assert held.status_code == 200
        assert held.text.splitlines() == [
            f"sha256/{weights.hexdigest} stored", f"gitsha1/{tokenizer.hexdigest} stored",
            f"sha256/{'cd' * 32} fetching 4096"]
        whole = await http.get(wire.stored_file_path(*files.identity(tokenizer)), headers=auth)
        expected = fleet.hub.content(REPO, "tokenizer.json").read()
        assert whole.status_code == 200 and whole.content == expected
        ranged = await http.get(wire.stored_file_path(*files.identity(weights)),
                                headers={**auth, "range": "bytes=100-199"})
        assert ranged.status_code == 206
        assert ranged.content == fleet.hub.content(REPO, "model-00001.safetensors").read(100, 200)
        for bad in ("sha256/" + "ab" * 32, "sha256/xyz", "md5/" + "ab" * 16,
                    "sha256/" + "AB" * 32, "gitsha1/" + "ab" * 32):
            answer = await http.get(wire.FILES_PREFIX + bad, headers=auth)
            assert answer.status_code == 404, bad
        tenant = await http.post(wire.HELD_PATH, content=body,
                                 headers={"authorization": f"Bearer {TENANT_TOKEN}"})
        assert tenant.status_code == 403
        refused = await http.get(wire.stored_file_path(*files.identity(weights)),
                                 headers={"authorization": f"Bearer {TENANT_TOKEN}"})
        assert refused.status_code == 403
        for bad_body, rule in ((b"sha256/xyz\n", "line 1"), (b"\xff\n", "ASCII"),
                               (body * (wire.MAX_HELD // 4 + 1), "at most")):
            answer = await http.post(wire.HELD_PATH, content=bad_body, headers=auth)
            assert answer.status_code == 400 and rule in answer.json()["message"], rule
            assert len(answer.text) < 1000  # never echoes the body


async def test_a_node_holding_revision_1_serves_revision_2s_unchanged_files(fleet: Fleet) -> None:
    """Node A holds revision 1 only (its store does not list revision 2); node B, cold, takes
    revision 2: every unchanged file from A by its identity, only the changed one from the
    hub."""
    a = await fleet.node("node-a")
    await _publish(a.materializer, fleet.request)
    changed = b'{"architectures": ["Tinier"]}\n'
    fleet.hub.add_revision(REPO, {**_files(), "config.json": changed})
    second = await hubrequest.request_for(fleet.hub, REPO)
    b = await fleet.node("node-b")
    before = fleet.hub.bytes_served(REPO)
    await _publish(b.materializer, second)
    assert fleet.hub.bytes_served(REPO) - before == len(changed)
    total = _size(_tree(b.cache, second.digest))
    assert b.holders.delivered_bytes == total - len(changed)
    assert b.materializer.origins.all()[second.digest] == "Peer"
    tree = _tree(b.cache, second.digest)
    for path, data in tree.items():
        if path.split("/")[0] not in layout.RESERVED_NAMES:
            assert data == fleet.hub.content(REPO, path).read(), path


async def test_a_peer_lying_about_a_file_is_caught_and_the_file_comes_from_the_hub(
        fleet: Fleet) -> None:
    a = await fleet.node("node-a")
    await _publish(a.materializer, fleet.request)
    lied = next(e for e in _entries(a.cache, fleet.request.digest)
                if e.path == "model-00002.safetensors")
    stored = files.of(a.cache).path(files.identity(lied))
    os.chmod(stored, 0o644)
    with open(stored, "r+b") as f:  # same size, other bytes: only a hash can tell
        f.seek(3 * MiB)
        f.write(b"\x00" * 4096)
    b = await fleet.node("node-b")
    before = fleet.hub.bytes_served(REPO, lied.path)
    await _publish(b.materializer, fleet.request)
    # B took the lying file from A first, its hash failed, and the whole file came from the hub
    assert b.holders.delivered_bytes >= lied.size
    assert fleet.hub.bytes_served(REPO, lied.path) - before == lied.size
    for path, data in _tree(b.cache, fleet.request.digest).items():
        if path.split("/")[0] not in layout.RESERVED_NAMES:
            assert data == fleet.hub.content(REPO, path).read(), path


async def test_a_node_still_downloading_serves_the_files_it_finished(fleet: Fleet) -> None:
    """Node A downloads while its hub pauses in one shard until B has bytes from A (no time
    limit: a loaded machine must not let A finish first); node B, started once A stored the
    others (A's tree not published, A's store listing nothing), takes every file from A: the
    finished ones at once, the paused one once A stored it (B leaves it to A, whose bytes stand
    still for less than B's stall timeout). The hub serves one copy in all."""
    slow = "model-00003.safetensors"
    pause = fleet.hub.faults(REPO, slow)
    release = threading.Event()
    pause.stall_at, pause.stall_seconds, pause.stall_times = 3 * MiB, None, 1
    pause.stall_until = release
    # A waits out the pause however long it takes, and fetches each file in one part: the
    # claims it may hold at once (workers times parts: 16 MiB) leave room for every other file
    # beside the paused one, whatever order it claims them in
    a = await fleet.node("node-a", stall=120.0, part_bytes=8 * MiB)
    b = await fleet.node("node-b", stall=60.0)
    first = await a.materializer.ensure(fleet.request)
    assert first.state is interface.State.DOWNLOADING
    size = _size({p: fleet.hub.content(REPO, p).read() for p in _files()})
    store = files.of(a.cache)
    async with asyncio.timeout(60):
        while fleet.hub.bytes_served(REPO) < size - (6 * MiB + 33) or \
                len(store.listing()) < len(_files()) - 1:
            await asyncio.sleep(0.02)
    assert not a.cache.is_published(fleet.request.digest)
    pulled = asyncio.create_task(_publish(b.materializer, fleet.request))
    async with asyncio.timeout(60):
        while b.holders.delivered_bytes == 0:
            await asyncio.sleep(0.01)
    assert not a.cache.is_published(fleet.request.digest)  # B had bytes from A before A's Ready
    release.set()
    await asyncio.wait_for(pulled, 60)
    await _publish(a.materializer, fleet.request)
    assert fleet.hub.bytes_served(REPO) == size
    assert b.holders.delivered_bytes == size
    assert _tree(b.cache, fleet.request.digest) == _tree(a.cache, fleet.request.digest)


async def test_cold_nodes_starting_together_split_the_files(fleet: Fleet) -> None:
    """Three cold nodes asked for one digest at the same moment: the hub serves each file
    once (no node fetches a file another claimed), every node's tree is the hub's bytes."""
    for path in _files():
        fleet.hub.faults(REPO, path).rate = 16 * MiB  # long enough to overlap
    nodes = [await fleet.node(n, stall=10.0) for n in ("node-a", "node-b", "node-c")]
    await asyncio.gather(*(_publish(n.materializer, fleet.request) for n in nodes))
    for path in _files():
        size = len(fleet.hub.content(REPO, path).read())
        assert fleet.hub.bytes_served(REPO, path) == size, path
    trees = [_tree(n.cache, fleet.request.digest) for n in nodes]
    assert trees[0] == trees[1] == trees[2]
    # every node took from its peers what it did not fetch itself (which node fetched which file
    # depends on who asked first: the bench cold-swarm shows the split)
    assert sum(n.holders.delivered_bytes for n in nodes) == 2 * _size(trees[0])
