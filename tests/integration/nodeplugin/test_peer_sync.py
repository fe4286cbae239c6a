"""Node-to-node sync over real loopback TLS: node A downloads from the fixture hub, node B pulls
the same artifact from A's peer port (hub bytes unchanged, B's tree byte-identical, source
Peer); A dying mid-transfer leaves B to finish from the hub without re-fetching what it
verified; a tenant's token is refused by the peer port; with sync off B uses the hub.

Each node is an in-process ``HubMaterializer`` (the CSI path drives the same code); A's peer
port is the real ``peer.server`` app on hypercorn over TLS, its tokens reviewed by the fixture
control plane. "Killing A" cuts a TCP relay in front of its port after a number of bytes, so B
sees connections reset mid-file exactly as when the process dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
import socket
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx
import pytest

import kube
from devkit import fixturehub
from devkit.clock import ManualClock
from devkit.controlplane import ControlPlane, Rule, service_account
from hub import config as hub_config
from nodeplugin import reviews, serve
from nodeplugin.cache import layout
from nodeplugin.materialize import download, interface, ranges, transfer
from nodeplugin.nodestore import status as statuses
from nodeplugin.peer import admission, client, holders, server, wire
from tests.support import hubrequest

pytestmark = pytest.mark.integration

REPO = "org/model"
MiB = 1 << 20
PLUGIN_USER = "system:serviceaccount:gpustack-system:model-manager-node"
PLUGIN_TOKEN = "peer-token-of-node-b"
TENANT_TOKEN = "tenant-token"
READER_TOKEN = "reader-token"


def _files() -> dict[str, bytes | int | fixturehub.FileSpec]:
    return {
        "config.json": b'{"architectures": ["Tiny"]}\n',
        "model-00001.safetensors": 12 * MiB + 77,
        "tokenizer.json": fixturehub.FileSpec(size=300_000, lfs=False),
        "sub/README.md": b"# tiny\n",
    }


def _settings() -> download.Settings:
    return download.Settings(
        concurrency=2, memory_bytes=4 * MiB,
        tuning=transfer.Tuning(part_bytes=1 * MiB, checkpoint_bytes=1 * MiB),
        policy=ranges.Policy(stall_seconds=2.0, max_failures=4, retry_base_seconds=0.05),
    )


def _config(hub: fixturehub.Hub) -> hub_config.HubConfig:
    return hub_config.HubConfig(huggingface_endpoint=hub.endpoint, read_timeout=5.0)


class Stores:
    """The node stores as the plugins would report them: A Ready with the digest."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def hold(self, node: str, digest: str) -> None:
        self.items.append({
            "metadata": {"name": node},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "models": [{"digest": digest, "state": "Ready"}]},
        })

    async def stores(self) -> Sequence[Mapping[str, Any]]:
        return self.items


class Relay:
    """A TCP relay in front of a port; ``cut_after`` bytes downstream, then every connection
    is reset and new ones are refused: the peer process died."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.passed = 0
        self.cut_after: int | None = None
        self.dead = False
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.dead:
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        self._writers += [writer, up_writer]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, down: bool) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await src.read(65536):
                    if self.dead:
                        break
                    dst.write(data)
                    await dst.drain()
                    if down:
                        self.passed += len(data)
                        if self.cut_after is not None and self.passed >= self.cut_after:
                            self.kill()
                            return
            dst.transport.abort()

        await asyncio.gather(pump(reader, up_writer, False), pump(up_reader, writer, True))

    def kill(self) -> None:
        self.dead = True
        for w in self._writers:
            w.transport.abort()

    async def close(self) -> None:
        self.kill()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@dataclasses.dataclass
class World:
    hub: fixturehub.Hub
    plane: ControlPlane
    request: interface.Request
    seed: download.HubMaterializer
    seed_cache: layout.Layout
    port: int
    stores: Stores
    tmp: pathlib.Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def admit_plugins(control_plane: ControlPlane) -> None:
    """The plugins' peer token, a tenant's and a token for the API server; the plugins may
    review tokens."""
    control_plane.add_token(PLUGIN_TOKEN, service_account(
        "gpustack-system", "model-manager-node", uid="plugin-uid"), audiences=[wire.AUDIENCE])
    control_plane.add_token(TENANT_TOKEN, service_account("team-a", "default", uid="t-uid"),
                            audiences=[wire.AUDIENCE])
    control_plane.add_token(READER_TOKEN, service_account(
        "gpustack-system", "model-manager-node", uid="plugin-uid"))
    control_plane.policy.grant("system:serviceaccount:gpustack-system:model-manager-node",
                               Rule(("create",), ("authentication.k8s.io",), ("tokenreviews",)))


@pytest.fixture
async def world(tmp_path: pathlib.Path, control_plane: ControlPlane) -> AsyncIterator[World]:
    admit_plugins(control_plane)
    with fixturehub.run() as hub:
        hub.add_repo(REPO, _files())
        request = await hubrequest.request_for(hub, REPO)
        seed_cache = layout.Layout(tmp_path / "a")
        seed = download.HubMaterializer.from_config(seed_cache, _config(hub), _settings())
        kubeconfig = control_plane.write_kubeconfig(tmp_path / "a.kubeconfig",
                                                    token=READER_TOKEN)
        async with kube.Client.from_kubeconfig(kubeconfig) as kc:
            reviewer = reviews.TokenReviewer(kc, clock=ManualClock(), audiences=[wire.AUDIENCE])
            app = server.make_app(seed_cache, admission.Admission(reviewer, PLUGIN_USER))
            cert, key = serve.tls_files(tmp_path / "tls", None, None, ["127.0.0.1"])
            port = _free_port()
            stop = asyncio.Event()
            task = asyncio.create_task(serve.serve(
                app, serve.hypercorn_config_for("127.0.0.1", port, cert, key), stop))
            try:
                yield World(hub, control_plane, request, seed, seed_cache, port, Stores(),
                            tmp_path)
            finally:
                stop.set()
                await task
                await seed.close()


async def _publish(m: download.HubMaterializer, request: interface.Request) -> None:
    async with asyncio.timeout(60):
        while (await m.ensure(request)).state is not interface.State.PUBLISHED:
            progress = await m.ensure(request)
            assert progress.state is not interface.State.FAILED, progress.message
            await asyncio.sleep(0.02)
        while m.running():  # the attempt records the tree's origin as it ends
            await asyncio.sleep(0.01)


def _tree(cache: layout.Layout, digest: str) -> dict[str, bytes]:
    root = cache.published_path(digest)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _cold(world: World, name: str, port: int | None, *, sync: bool = True
          ) -> tuple[download.HubMaterializer, holders.Holders | None, layout.Layout]:
    token_file = world.tmp / f"{name}.token"
    token_file.write_text(PLUGIN_TOKEN)
    found = None
    if sync:
        found = holders.Holders(
            world.stores, {"node-a": f"https://127.0.0.1:{port}"}, self_node=name,
            token_file=str(token_file), http=client.make_client(None))
    cache = layout.Layout(world.tmp / name)
    m = download.HubMaterializer.from_config(cache, _config(world.hub), _settings(),
                                             holders=found)
    return m, found, cache


async def _seeded(world: World) -> int:
    await _publish(world.seed, world.request)
    world.stores.hold("node-a", world.request.digest)
    served = world.hub.bytes_served(REPO)
    assert served >= 12 * MiB  # the seed's tree came from the hub
    return served


async def test_a_cold_node_pulls_from_its_peer_not_the_hub(world: World) -> None:
    hub_bytes = await _seeded(world)
    b, found, cache = _cold(world, "node-b", world.port)
    assert found is not None
    try:
        await _publish(b, world.request)
    finally:
        await b.close()
        await found.aclose()
    assert world.hub.bytes_served(REPO) == hub_bytes  # not one more byte from the hub
    assert _tree(cache, world.request.digest) == _tree(world.seed_cache, world.request.digest)
    assert b.downloaded_bytes == 0 and found.delivered_bytes > 12 * MiB
    assert b.origins.all()[world.request.digest] == "Peer"
    facts_entry = statuses.models(statuses.Facts(
        published=[world.request.digest], sizes={}, running=[], failures=[], quarantined={},
        referenced=frozenset(), usage={}, total_bytes=1, used_bytes=0, stored_bytes=0,
        origins=b.origins.all()))[0][0]
    assert facts_entry["source"] == "Peer"


async def test_a_node_holding_revision_1_takes_only_the_changed_file_from_its_peer(
        world: World) -> None:
    """The node's file store under node-to-node sync: node B holds revision 1; revision 2
    changes config.json and node A holds it. B fetches that one file, from A: no hub byte, the
    peer's bytes counted as the peer's, the tree's source Peer, the other files B's own."""
    b, _, cache = _cold(world, "node-b", None, sync=False)
    try:
        await _publish(b, world.request)
    finally:
        await b.close()
    changed = b'{"architectures": ["Tinier"]}\n'
    world.hub.add_revision(REPO, {**_files(), "config.json": changed})
    second = await hubrequest.request_for(world.hub, REPO)
    await _publish(world.seed, second)
    world.stores.hold("node-a", second.digest)
    hub_bytes = world.hub.bytes_served(REPO)
    b, found, cache = _cold(world, "node-b", world.port)
    assert found is not None
    try:
        await _publish(b, second)
    finally:
        await b.close()
        await found.aclose()
    assert world.hub.bytes_served(REPO) == hub_bytes
    assert b.downloaded_bytes == 0 and found.delivered_bytes == len(changed)
    assert b.origins.all()[second.digest] == "Peer"
    assert _tree(cache, second.digest) == _tree(world.seed_cache, second.digest)
    first_tree = cache.published_path(world.request.digest)
    second_tree = cache.published_path(second.digest)
    assert (first_tree / "model-00001.safetensors").stat().st_ino == \
        (second_tree / "model-00001.safetensors").stat().st_ino


async def _dying_peer(world: World) -> tuple[Relay, int]:
    """A relay in front of node A's peer port that cuts every connection after 5 MiB, as a
    process dying mid-file does; the relay and its port."""
    relay = Relay(world.port)
    relay.cut_after = 5 * MiB
    return relay, await relay.start()


async def test_the_peer_dying_mid_file_leaves_the_rest_to_the_hub(world: World) -> None:
    hub_bytes = await _seeded(world)
    relay, port = await _dying_peer(world)
    b, found, cache = _cold(world, "node-b", port)
    assert found is not None
    try:
        await _publish(b, world.request)
    finally:
        await b.close()
        await found.aclose()
        await relay.close()
    assert relay.dead
    total = sum(len(c) for name, c in _tree(world.seed_cache, world.request.digest).items()
                if name.split("/")[0] not in layout.RESERVED_NAMES)
    from_hub = world.hub.bytes_served(REPO) - hub_bytes
    # the hub served what the peer did not deliver, never the verified bytes again (the bytes
    # of a range in flight at the cut are the only overlap, at most a part per worker)
    assert from_hub <= total - found.delivered_bytes + 2 * MiB
    assert found.delivered_bytes + from_hub >= total
    assert 0 < found.delivered_bytes < total
    assert _tree(cache, world.request.digest) == _tree(world.seed_cache, world.request.digest)


async def test_a_tenant_token_is_refused_by_the_peer_port(world: World) -> None:
    await _seeded(world)
    hexd = layout.hex_of(world.request.digest)
    url = f"https://127.0.0.1:{world.port}"
    async with httpx.AsyncClient(verify=False, base_url=url) as http:
        def auth(token: str) -> dict[str, str]:
            return {"authorization": f"Bearer {token}"}

        tenant = await http.get(wire.tree_path(hexd), headers=auth(TENANT_TOKEN))
        assert tenant.status_code == 403 and "node plugins only" in tenant.text
        api_token = await http.get(wire.tree_path(hexd), headers=auth(READER_TOKEN))
        assert api_token.status_code == 401  # a token for the API server, not the peer audience
        assert (await http.get(wire.tree_path(hexd))).status_code == 401
        ok = await http.get(wire.tree_path(hexd), headers=auth(PLUGIN_TOKEN))
        assert ok.status_code == 200
        ranged = await http.get(wire.file_path(hexd, "config.json"),
                                headers={**auth(PLUGIN_TOKEN), "range": "bytes=2-5"})
        assert ranged.status_code == 206 and ranged.content == b'{"architectures": ["Tiny"]}\n'[2:6]
        for bad in ("etc/passwd", ".gpustack-digest", ".gpustack-manifest", "sub"):
            answer = await http.get(wire.file_path(hexd, bad), headers=auth(PLUGIN_TOKEN))
            assert answer.status_code == 404, bad
        unknown = await http.get(wire.tree_path("ab" * 32), headers=auth(PLUGIN_TOKEN))
        assert unknown.status_code == 404


async def test_with_sync_off_the_cold_node_uses_the_hub(world: World) -> None:
    hub_bytes = await _seeded(world)
    b, _found, cache = _cold(world, "node-b", world.port, sync=False)
    try:
        await _publish(b, world.request)
    finally:
        await b.close()
    assert world.hub.bytes_served(REPO) - hub_bytes >= 12 * MiB
    assert b.origins.all()[world.request.digest] == "Hub"
    assert _tree(cache, world.request.digest) == _tree(world.seed_cache, world.request.digest)


def _anchored(request: interface.Request) -> interface.Request:
    """The request of an artifact resolved from its expectedDigest while the hub was down
    (``digestSource: Expected``): the same digest, no commit."""
    return dataclasses.replace(request, source=dataclasses.replace(request.source, revision=""))


async def _anchored_failure(world: World, port: int) -> interface.Progress:
    """A cold node-b asked for the anchored request, pulling from ``port``: its progress once
    the attempt failed (it must not publish)."""
    b, found, _cache = _cold(world, "node-b", port)
    assert found is not None
    request = _anchored(world.request)
    try:
        async with asyncio.timeout(60):
            progress = await b.ensure(request)
            while progress.state is not interface.State.FAILED:
                assert progress.state is not interface.State.PUBLISHED
                await asyncio.sleep(0.02)
                progress = await b.ensure(request)
    finally:
        await b.close()
        await found.aclose()
    return progress


async def test_an_artifact_resolved_without_the_hub_comes_from_a_peer(world: World) -> None:
    hub_bytes = await _seeded(world)
    asked = world.hub.total_requests()
    b, found, cache = _cold(world, "node-b", world.port)
    assert found is not None
    try:
        await _publish(b, _anchored(world.request))
    finally:
        await b.close()
        await found.aclose()
    # the manifest and every byte from node A: the hub was not asked anything
    assert world.hub.total_requests() == asked and world.hub.bytes_served(REPO) == hub_bytes
    assert _tree(cache, world.request.digest) == _tree(world.seed_cache, world.request.digest)
    assert b.origins.all()[world.request.digest] == "Peer"


async def test_an_artifact_resolved_without_the_hub_and_no_holder_waits_for_one(
    world: World,
) -> None:
    asked = world.hub.total_requests()  # the fixture's listing, to learn the digest
    progress = await _anchored_failure(world, world.port)  # no node holds the digest yet
    assert progress.reason is interface.Reason.SOURCE_UNAVAILABLE, progress
    assert "no Ready node holds it yet" in progress.message
    assert "expected digest" in progress.message
    assert progress.retry_time is not None  # backs off like an unreachable hub, then tries again
    assert world.hub.total_requests() == asked


async def test_an_artifact_resolved_without_the_hub_never_falls_back_to_it(world: World) -> None:
    """The peer dies mid-file: with no commit there is no hub to finish from, so the attempt
    fails (its verified bytes kept) rather than asking the hub for a commit it cannot name."""
    await _seeded(world)
    asked = world.hub.total_requests()
    relay, port = await _dying_peer(world)
    try:
        progress = await _anchored_failure(world, port)
    finally:
        await relay.close()
    assert relay.dead
    assert progress.reason is interface.Reason.SOURCE_UNAVAILABLE, progress
    assert world.hub.total_requests() == asked
