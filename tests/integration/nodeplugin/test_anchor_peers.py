"""The anchor theft through a peer (issue 35), with real plugin processes in cluster mode
(``devkit.harness.peernodes``: the fixture control plane, the API server behind it, the hub).

node-a holds bob's team-b content, fetched from the hub. alice's team-a artifact anchors to the
same digest with no proof that team-a may read it: the status the resolver wrote for it before
the fix (``digestSource: Expected``, nothing more). node-b, cold, asked for alice's artifact
(``POST /model/prefetches``, the path a mount takes) must refuse it before it asks any peer:
403 naming the anchor rule, nothing pulled from node-a, nothing on node-b's disk. Once the
worker records an administrator's grant (``anchorProof: Grant``, the legacy import), node-b
pulls the same tree from node-a, the hub serving no byte more.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from devkit import fixturehub
from devkit.harness import peernodes
from tests.support import hubrequest

if os.geteuid() != 0:  # the plugin's read-only view of its cache is a bind mount
    pytest.skip("the plugin processes need root (bind mounts)", allow_module_level=True)

pytestmark = pytest.mark.integration

GROUP = "/apis/worker.gpustack.ai/v1"
BOB_REPO = "bob/private"
MiB = 1 << 20
FILES: dict[str, bytes | int | fixturehub.FileSpec] = {
    "config.json": b'{"architectures": ["BobsModel"]}\n',
    "model.safetensors": 2 * MiB + 5,
}


@pytest.fixture
def world(mount_guard: pathlib.Path) -> Iterator[tuple[fixturehub.Hub, peernodes.Cluster]]:
    with fixturehub.run() as hub, contextlib.ExitStack() as stack:
        hub.add_repo(BOB_REPO, FILES)
        spec = {"hub": {"huggingFaceEndpoint": hub.endpoint}}
        cluster = peernodes.Cluster(stack, mount_guard, {"node-a": spec, "node-b": spec},
                                    namespaces=("team-a", "team-b"))
        yield hub, cluster


def _create(cluster: peernodes.Cluster, namespace: str, name: str,
            spec: dict[str, Any]) -> dict[str, Any]:
    body = {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    created = cluster.admin.post(f"{GROUP}/namespaces/{namespace}/modelartifacts", json=body)
    assert created.status_code == 201, created.text
    found: dict[str, Any] = created.json()
    return found


def _write_status(cluster: peernodes.Cluster, obj: dict[str, Any],
                  resolved: dict[str, Any]) -> dict[str, Any]:
    """The status as the worker writes it: ``Resolved=True`` with ``resolved``."""
    meta = obj["metadata"]
    obj = {**obj, "status": {"resolved": resolved, "conditions": [{
        "type": "Resolved", "status": "True", "reason": "Resolved", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    path = f"{GROUP}/namespaces/{meta['namespace']}/modelartifacts/{meta['name']}/status"
    with cluster.client(cluster.worker_token) as worker:
        written = worker.put(path, json=obj)
    assert written.status_code == 200, written.text
    body: dict[str, Any] = written.json()
    return body


def _ask(node: peernodes.Node, obj: dict[str, Any], digest: str) -> httpx.Response:
    return node.http.post("/model/prefetches", json={
        "namespace": obj["metadata"]["namespace"], "artifact": obj["metadata"]["name"],
        "artifactUID": obj["metadata"]["uid"], "manifestDigest": digest})


def _seen(node: peernodes.Node, obj: dict[str, Any], digest: str,
          check: Any, timeout: float = 60.0) -> httpx.Response:
    """Ask until ``check`` holds (the plugin's informer catching up answers 503 or an older
    verdict first); the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        answer = _ask(node, obj, digest)
        if check(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(peernodes.POLL)


def test_an_unproven_anchor_pulls_nothing_from_a_peer(
    world: tuple[fixturehub.Hub, peernodes.Cluster],
) -> None:
    hub, cluster = world
    resolved = asyncio.run(hubrequest.request_for(hub, BOB_REPO))
    digest = resolved.digest
    cluster.digest = digest  # the digest its stores' entries are read for (Node.source)
    size = sum(hub.content(BOB_REPO, path).size for path in FILES)
    bobs = _create(cluster, "team-b", "weights", {"source": {"huggingFace": {
        "repository": BOB_REPO}}})
    bobs = _write_status(cluster, bobs, {
        "revision": resolved.source.revision, "manifestDigest": digest, "digestSource": "Hub",
        "fileCount": len(FILES), "sizeBytes": size})
    steal = _create(cluster, "team-a", "steal", {
        "source": {"huggingFace": {"repository": "alice/anything"}}, "expectedDigest": digest})
    # what the resolver wrote before the fix, after two outages: the anchor, and nothing else
    steal = _write_status(cluster, steal, {"manifestDigest": digest, "digestSource": "Expected",
                                           "resolvedTime": "2026-01-01T00:00:00Z"})
    nodes: list[peernodes.Node] = []
    try:
        a, b = (peernodes.Node(cluster, name, hub.endpoint, peer=True)
                for name in ("node-a", "node-b"))
        nodes += [a, b]
        for node in nodes:
            node.wait_serving()

        # node-a holds bob's content, from the hub
        answer = _seen(a, bobs, digest, lambda r: r.status_code == 200
                       and r.json()["state"] == "Published")
        assert answer.json()["state"] == "Published", answer.text
        assert hub.bytes_served(BOB_REPO) == size

        # node-b refuses alice's anchor before it asks node-a for anything
        refused = _seen(b, steal, digest, lambda r: r.status_code == 200 or (
            r.status_code == 403 and "anchor" in r.text))
        assert refused.status_code == 403, refused.text
        assert "anchor" in refused.json()["message"], refused.text
        time.sleep(1.0)  # an attempt started anyway would have pulled by now
        assert not b.tree(digest).exists()
        assert b.downloaded().get("peer", 0) == 0
        assert hub.bytes_served(BOB_REPO) == size

        # the worker records an administrator's grant: the legacy import pulls from node-a
        granted = _write_status(cluster, steal, {
            "manifestDigest": digest, "digestSource": "Expected", "anchorProof": "Grant",
            "resolvedTime": "2026-01-01T00:00:00Z"})
        answer = _seen(b, granted, digest, lambda r: r.status_code == 200
                       and r.json()["state"] == "Published")
        assert answer.json()["state"] == "Published", answer.text
        assert b.source() == "Peer"
        assert hub.bytes_served(BOB_REPO) == size
        for path in FILES:
            assert (b.tree(digest) / path).read_bytes() == hub.content(BOB_REPO, path).read()
    except BaseException:
        for node in nodes:
            print(f"--- {node.name} log\n{node.log()[-6000:]}")
        print("--- server log\n" + cluster.server.log()[-6000:])
        raise
    finally:
        for node in nodes:
            node.stop(remove=False)
