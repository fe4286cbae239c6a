"""Node-to-node sync between plugin processes (root): the issue's proof with real
``python -m nodeplugin`` processes in cluster mode (``devkit.harness.peernodes``: the fixture
control plane reviewing their tokens, the API server behind it, the fixture hub), each node asked
to hold the artifact as the worker asks it (``POST /model/prefetches``, the prefetch delivery).

node-a is warmed from the hub (hub bytes = the model's size); node-b then pulls it from node-a,
found through node-a's store (hub bytes unchanged, node-b's tree equal to the hub's files, source
``Peer``, its download bytes all under ``source="peer"``); node-c, its download slowed by its
spec, is pulling from node-a when node-a's process is killed (SIGKILL) and finishes from the hub
without the hub serving again what node-c had verified; a tenant's token for the peer audience
is refused by node-c's peer port; node-d, with sync off, takes every byte from the hub.

``test_peer_sync.py`` has the same cases in one process, with a relay that cuts mid-file at a
chosen byte; here the peer is a process that dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import time
from collections.abc import Iterator

import httpx
import pytest

from devkit import fixturehub
from devkit.controlplane import service_account
from devkit.harness import peernodes
from nodeplugin.cache import layout
from nodeplugin.peer import wire
from tests.support import hubrequest

if os.geteuid() != 0:  # the plugin's read-only view of its cache is a bind mount
    pytest.skip("the plugin processes need root (bind mounts)", allow_module_level=True)

pytestmark = pytest.mark.integration

REPO = "org/peer-model"
MiB = 1 << 20
FILES: dict[str, bytes | int | fixturehub.FileSpec] = {
    "config.json": b'{"architectures": ["Peer"]}\n',
    "model-00001.safetensors": 24 * MiB + 13,
    "tokenizer.json": fixturehub.FileSpec(size=250_000, lfs=False),
}
SLOW = 4 * MiB
"""node-c's spec.download.bytesPerSecond: six seconds for the model, time to kill node-a."""


@pytest.fixture
def world(mount_guard: pathlib.Path) -> Iterator[tuple[fixturehub.Hub, peernodes.Cluster]]:
    with fixturehub.run() as hub, contextlib.ExitStack() as stack:
        hub.add_repo(REPO, FILES)
        spec = {"hub": {"huggingFaceEndpoint": hub.endpoint}}
        cluster = peernodes.Cluster(stack, mount_guard, {
            "node-a": spec, "node-b": spec, "node-d": spec,
            "node-c": {**spec, "download": {"bytesPerSecond": SLOW}}})
        yield hub, cluster


def _size(hub: fixturehub.Hub) -> int:
    return sum(hub.content(REPO, path).size for path in FILES)


def _tree_is_the_hub_s(hub: fixturehub.Hub, node: peernodes.Node, digest: str) -> None:
    tree = node.tree(digest)
    for path in FILES:
        assert (tree / path).read_bytes() == hub.content(REPO, path).read(), path


def test_nodes_pull_from_a_peer_process_and_fall_back_to_the_hub_when_it_dies(
    world: tuple[fixturehub.Hub, peernodes.Cluster],
) -> None:
    hub, cluster = world
    resolved = asyncio.run(hubrequest.request_for(hub, REPO))
    digest = resolved.digest
    size = _size(hub)
    cluster.resolve("peer-model", REPO, revision=resolved.source.revision, digest=digest,
                    file_count=len(FILES), size=size)
    nodes: list[peernodes.Node] = []
    try:
        a, b, c = (peernodes.Node(cluster, name, hub.endpoint, peer=True)
                   for name in ("node-a", "node-b", "node-c"))
        nodes += [a, b, c]
        for node in nodes:
            node.wait_serving()

        # 1. the prefetch delivery warms node-a from the hub: one copy's bytes
        peernodes.publish([a], timeout=60)
        assert hub.bytes_served(REPO) == size
        assert a.source() == "Hub"  # and node-a's store lists the digest Ready

        # 2. node-b pulls it from node-a: not one byte more from the hub
        peernodes.publish([b], timeout=60)
        assert hub.bytes_served(REPO) == size
        _tree_is_the_hub_s(hub, b, digest)
        assert b.source() == "Peer"
        by_source = b.downloaded()
        assert by_source.get("hub", 0) == 0 and by_source["peer"] >= size - 300_000
        b.stop()  # its store's peer URL is cleared: node-c's only holder is node-a
        nodes.remove(b)

        # 3. node-a dies while node-c pulls from it: node-c finishes from the hub, which
        # serves only what node-c had not verified from node-a
        assert c.ask()["state"] == "Downloading"
        deadline = time.monotonic() + 30
        while c.downloaded().get("peer", 0) < size // 4:
            assert time.monotonic() < deadline, "node-c never pulled from node-a"
            time.sleep(0.05)
        a.kill()
        peernodes.publish([c], timeout=90)
        from_peer = c.downloaded().get("peer", 0)
        from_hub = hub.bytes_served(REPO) - size
        assert size // 4 <= from_peer < size
        # a part in flight at the kill (1-16 MiB ranges, a few at once) is the only overlap
        assert from_hub <= size - from_peer + 8 * MiB, (from_hub, from_peer, size)
        assert from_hub > 0
        _tree_is_the_hub_s(hub, c, digest)

        # 4. a tenant's token for the peer audience is refused by node-c's peer port
        tenant_user = service_account("team-a", "default", uid="tenant-uid")
        cluster.cp.add_token("tenant-peer-token", tenant_user,
                             audiences=[peernodes.PEER_AUDIENCE])
        with httpx.Client(base_url=f"https://127.0.0.1:{c.peer_port}", verify=False) as http:
            path = wire.tree_path(layout.hex_of(digest))
            tenant = http.get(path, headers={"authorization": "Bearer tenant-peer-token"})
            assert tenant.status_code == 403, tenant.text
            plugin = http.get(path, headers={"authorization": f"Bearer {c.peer_token}"})
            assert plugin.status_code == 200

        # 5. node-d, sync off, uses the hub though node-c holds the digest
        d = peernodes.Node(cluster, "node-d", hub.endpoint, peer=False)
        nodes.append(d)
        d.wait_serving()
        served = hub.bytes_served(REPO)
        peernodes.publish([d], timeout=60)
        assert hub.bytes_served(REPO) - served >= size - 300_000
        assert d.source() == "Hub"
        _tree_is_the_hub_s(hub, d, digest)
    except BaseException:
        for node in nodes:
            print(f"--- {node.name} log\n{node.log()[-6000:]}")
        print("--- server log\n" + cluster.server.log()[-6000:])
        raise
    finally:
        for node in nodes:
            node.stop(remove=False)
