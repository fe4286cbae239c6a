"""Discovery in a cluster, end to end: two plugins (``plugin.start``, each as the ServiceAccount
of its own Pod, against the real API server in cluster mode and the fixture control plane) are
given no ``--peer-address``. Each publishes its peer port in its NodeModelStore's
``status.peer.url`` through the status guard; node-a downloads from the fixture hub, and node-b,
finding node-a's address in node-a's store, pulls the whole tree from node-a's peer port (its
token for the peer audience reviewed by node-a) without one more byte from the hub."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import pathlib
from typing import Any

import pytest

import kube
from apiserver.registry import build
from apiserver.storage import sqlite
from devkit import admitting, fixturehub
from devkit.controlplane import ControlPlane, Rule
from devkit.harness import clustermode
from devkit.harness.apiserver import free_port
from hub import config as hub_config
from kube.resources import NodeModelStore
from nodeplugin import plugin
from nodeplugin.materialize import download, interface, ranges, transfer
from nodeplugin.peer import assembly as peer_assembly
from nodeplugin.peer import wire
from tests.integration.apiserver import cluster
from tests.support import hubrequest
from tests.unit.nodeplugin import fakes

pytestmark = pytest.mark.integration

REPO = "org/model"
MiB = 1 << 20
NS = "gpustack-system"
NODES = ("node-a", "node-b")


def _settings() -> download.Settings:
    return download.Settings(
        concurrency=2, memory_bytes=4 * MiB,
        tuning=transfer.Tuning(part_bytes=1 * MiB, checkpoint_bytes=1 * MiB),
        policy=ranges.Policy(stall_seconds=5.0, max_failures=4, retry_base_seconds=0.05),
    )


def _seed_stores(data_dir: pathlib.Path, endpoint: str) -> None:
    """Both nodes' stores, their spec naming the fixture hub (as the worker would write it),
    stored before the server starts (no client may create or change a store's spec)."""

    async def seed() -> None:
        store = sqlite.Store(data_dir / "store.db")
        await store.start()
        try:
            registry = build.build(store, admission=admitting.standalone())
            for node in NODES:
                await registry.nodemodelstores.create(
                    {"metadata": {"name": node},
                     "spec": {"hub": {"huggingFaceEndpoint": endpoint}}})
        finally:
            await store.close()

    data_dir.mkdir(parents=True, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the test's loop is running
        pool.submit(asyncio.run, seed()).result()


async def _status(client: kube.Client, node: str) -> dict[str, Any]:
    found = await client.get(NodeModelStore, node)
    return dict(found.get("status") or {})


async def _until(what: str, check: Any, timeout: float = 60) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not await check():
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None


async def _publish(running: plugin.Plugin, request: interface.Request) -> None:
    async with asyncio.timeout(60):
        while (progress := await running.materializer.ensure(request)).state \
                is not interface.State.PUBLISHED:
            assert progress.state is not interface.State.FAILED, progress.message
            await asyncio.sleep(0.02)


async def test_a_cold_plugin_finds_its_peer_in_the_node_store_and_pulls_from_it(
    tmp_path: pathlib.Path,
) -> None:
    with ControlPlane(tmp_path / "cp") as cp, fixturehub.run() as hub:
        clustermode.prepare(cp)
        cluster.grant_chart_and_tenants(cp)
        hub.add_repo(REPO, {"config.json": b"{}\n", "model.safetensors": 6 * MiB + 5,
                            "tokenizer.json": fixturehub.FileSpec(size=200_000, lfs=False)})
        request = await hubrequest.request_for(hub, REPO)
        digest = request.digest
        data_dir = tmp_path / "server"
        _seed_stores(data_dir, hub.endpoint)
        with clustermode.running(cp, data_dir) as server:
            started: dict[str, plugin.Plugin] = {}
            clients: list[kube.Client] = []
            ports: dict[str, int] = {}
            try:
                for node in NODES:
                    token, user, _ = cp.plugin_pod(node)
                    cp.policy.grant(user.name, Rule(("create",), ("authentication.k8s.io",),
                                                    ("tokenreviews",)))
                    peer_token = tmp_path / f"{node}.peer-token"
                    peer_token.write_text(f"peer-token-of-{node}\n")
                    cp.add_token(f"peer-token-of-{node}", user, audiences=[wire.AUDIENCE])
                    ours = kube.Client.from_kubeconfig(
                        server.kubeconfig(tmp_path / f"{node}.kubeconfig", token))
                    theirs = kube.Client.from_kubeconfig(
                        cp.write_kubeconfig(tmp_path / f"{node}-cluster.kubeconfig",
                                            token=token))
                    clients += [ours, theirs]
                    ports[node] = free_port()
                    config = plugin.Config(
                        node_name=node, endpoint=f"unix://{tmp_path}/{node}.sock",
                        root=str(tmp_path / node / "cache"),
                        kubelet_dir=str(tmp_path / node / "kubelet"), namespace=NS,
                        hub=hub_config.HubConfig(huggingface_endpoint=hub.endpoint),
                        download=_settings(), bind_address="127.0.0.1",
                        peer=peer_assembly.Settings(
                            port=ports[node], plugin_user=user.name,
                            token_file=str(peer_token), advertise_address="127.0.0.1"))
                    started[node] = await plugin.start(
                        config, kube_client=ours, cluster_client=theirs,
                        mount=fakes.FakeMounter())
                reader = clients[0]

                async def published() -> bool:
                    urls = [((await _status(reader, n)).get("peer") or {}).get("url")
                            for n in NODES]
                    ready = [any(c["type"] == "Ready" and c["status"] == "True"
                                 for c in (await _status(reader, n)).get("conditions") or [])
                             for n in NODES]
                    return urls == [f"https://127.0.0.1:{ports[n]}" for n in NODES] \
                        and all(ready)

                await _until("both plugins publish their peer port", published)
                await _publish(started["node-a"], request)

                async def a_holds() -> bool:
                    models = (await _status(reader, "node-a")).get("models") or []
                    return any(m["digest"] == digest and m["state"] == "Ready" for m in models)

                await _until("node-a lists the digest Ready", a_holds)
                hub_bytes = hub.bytes_served(REPO)
                assert hub_bytes >= 6 * MiB
                b = started["node-b"]
                await _publish(b, request)
                assert hub.bytes_served(REPO) == hub_bytes  # every byte from node-a
                assert b.peer_sync is not None and b.peer_sync.holders.delivered_bytes > 6 * MiB

                async def b_from_peer() -> bool:
                    models = (await _status(reader, "node-b")).get("models") or []
                    return any(m["digest"] == digest and m.get("source") == "Peer"
                               for m in models)

                await _until("node-b reports the copy's source Peer", b_from_peer)
            finally:
                for running in started.values():
                    with contextlib.suppress(Exception):
                        await running.stop(0)
                for client in clients:
                    await client.aclose()
