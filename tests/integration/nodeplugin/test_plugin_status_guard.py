"""The plugin against the API server in cluster mode, as the ServiceAccount of a Pod on node-a
(its bound token, reviewed by the fixture control plane): it writes node-a's status, and a plugin
with that same identity claiming node-b is refused by the status guard."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import kube
from devkit.controlplane import ControlPlane
from devkit.harness import clustermode
from kube.resources import NodeModelStore
from nodeplugin import plugin
from tests.integration.apiserver import cluster
from tests.unit.nodeplugin import fakes


async def _status(client: kube.Client, node: str) -> dict[str, Any]:
    found = await client.get(NodeModelStore, node)
    return dict(found.get("status") or {})


async def test_the_plugin_of_a_pod_on_node_a_writes_a_and_is_refused_b(
    tmp_path: pathlib.Path,
) -> None:
    with ControlPlane(tmp_path / "cp") as cp:
        clustermode.prepare(cp)
        cluster.grant_chart_and_tenants(cp)
        token, _, pod = cp.plugin_pod("node-a")
        assert pod["spec"]["nodeName"] == "node-a"
        data_dir = tmp_path / "server"
        cluster.seed_store(data_dir)
        with clustermode.running(cp, data_dir) as server:
            kubeconfig = server.kubeconfig(tmp_path / "plugin.kubeconfig", token)
            started: list[plugin.Plugin] = []
            clients: list[kube.Client] = []
            try:
                for node in ("node-a", "node-b"):
                    config = plugin.Config(
                        node_name=node, endpoint=f"unix://{tmp_path}/{node}.sock",
                        root=str(tmp_path / node / "cache"),
                        kubelet_dir=str(tmp_path / node / "kubelet"),
                        import_dir=str(tmp_path / "imports"))
                    clients.append(kube.Client.from_kubeconfig(kubeconfig))
                    started.append(await plugin.start(config, kube_client=clients[-1],
                                                      mount=fakes.FakeMounter()))
                on_a, on_b = started
                async with kube.Client.from_kubeconfig(kubeconfig) as reader, \
                        asyncio.timeout(60):
                    while (await _status(reader, "node-a")).get("observedGeneration") != 1:
                        await asyncio.sleep(0.05)
                    written = await _status(reader, "node-a")
                    ready = next(c for c in written["conditions"] if c["type"] == "Ready")
                    assert ready["status"] == "True"
                    refused = on_b.store.reporter
                    assert refused is not None
                    while "rule 3 (same node)" not in refused.last_error:
                        await asyncio.sleep(0.05)
                    assert "403" in refused.last_error
                    assert await _status(reader, "node-b") == {}
                assert on_a.store.reporter is not None and on_a.store.reporter.writes >= 1
                assert refused.writes == 0
            finally:
                for running in started:
                    await running.stop(0)
                for client in clients:
                    await client.aclose()
