"""The GPUStack server's flow end to end through ``kube.gpustack``, connected by URL, bearer token
and CA, against the standalone server (embedded controllers), the fixture hub and two real node
plugin processes (node-1 and node-2, each with its own plugin token bound to its node).

An artifact for a whole repository and one for a GGUF with its mmproj; the manifest names the
GGUF's path under the mount; a prefetch to both nodes is watched through ``copies`` from
Pending/Downloading (live bytes from the plugins rising between the nodes' stored reports) to
Ready; a repository that does not exist fails at once (``ResolutionFailed``, not the timeout)
naming the configured hub; the blocking client works inside a running event loop; deleting the
artifact with cleanup makes both nodes remove the bytes at once (``spec.evict``), whatever their
watermarks, and stop listing the digest.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import uuid
from collections.abc import Iterator

import pytest
import yaml

from apiserver.auth import static
from apiserver.auth import user as users
from apiserver.flags import config
from apiserver.wiring import standalone
from certs import authority
from devkit import fixturehub
from devkit.harness import apiserver as support
from kube import gpustack
from tests.integration.nodeplugin import csi_harness
from tests.support import pools

if os.geteuid() != 0:  # the plugin's read-only view of its cache is a bind mount
    pytest.skip("the plugin processes need root (bind mounts)", allow_module_level=True)

MiB = 1 << 20
NAMESPACE = "gpustack"
NODES = ("node-1", "node-2")
WHOLE = "org/whole-model"
GGUF = "org/model-GGUF"
PATTERNS = ("*Q4_K_M*.gguf", "*mmproj*.gguf")
RATE = 1.5 * MiB  # bytes per second per response: a download lasts seconds, not an instant


@pytest.fixture
def mount_guard(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """As the plugin tests' own (tests/integration/nodeplugin/conftest.py)."""
    try:
        yield tmp_path
    finally:
        csi_harness.unmount_all_under(tmp_path)


@pytest.fixture
def hub() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        running.add_repo(WHOLE, {"config.json": b'{"a": 1}\n', "model.safetensors": MiB + 3})
        running.add_repo(GGUF, {"README.md": b"# quantized\n", "model-Q4_K_M.gguf": 3 * MiB,
                                "model-Q8_0.gguf": 5 * MiB, "mmproj-model-f16.gguf": MiB})
        for path in ("model-Q4_K_M.gguf", "mmproj-model-f16.gguf"):
            running.faults(GGUF, path).rate = RATE
        yield running


def _plugin_tokens(data: pathlib.Path) -> dict[str, str]:
    """One plugin token per node, as a cluster issues one per plugin Pod."""
    plugin = support.PLUGIN_USER
    groups = users.service_account_groups(config.DEFAULT_NAMESPACE)
    tokens = {node: static.new_token() for node in NODES}
    data.mkdir(mode=0o700, parents=True, exist_ok=True)
    static.write(data / "tokens.csv", [
        static.Entry(tokens[node], plugin, str(uuid.uuid4()), groups,
                     standalone.plugin_extra(node, str(uuid.uuid4()))) for node in NODES])
    return tokens


def _kubeconfig(server: support.RunningServer, token: str, path: pathlib.Path) -> pathlib.Path:
    document = yaml.safe_load(server.kubeconfig.read_text())
    document["users"][0]["user"] = {"token": token}
    path.write_text(yaml.safe_dump(document))
    path.chmod(0o600)
    return path


async def test_the_gpustack_server_flow(hub: fixturehub.Hub, mount_guard: pathlib.Path) -> None:
    tokens = _plugin_tokens(mount_guard / "api")
    tls = authority.ensure(mount_guard / "plugin-tls")
    ports = {node: support.free_port() for node in NODES}
    with support.running(mount_guard / "api", extra_args=[
        "--controllers=embedded", "--huggingface-endpoint", hub.endpoint,
        *[arg for node in NODES for arg in ("--node", f"{node}=https://127.0.0.1:{ports[node]}")],
        "--plugin-node", NODES[0], "--plugin-ca-file", str(tls.ca_cert),
    ]) as server:
        token_file = mount_guard / "worker-token"
        token_file.write_text(server.worker_token)
        plugins = []
        for node in NODES:
            server.wait_for(f"/apis/worker.gpustack.ai/v1/nodemodelstores/{node}")
            plugins.append(csi_harness.PluginProcess(
                mount_guard / node, _kubeconfig(server, tokens[node], mount_guard / f"{node}.kc"),
                import_dir=None, extra_args=[
                    "--node-name", node, "--huggingface-endpoint", hub.endpoint,
                    "--secure-port", str(ports[node]), "--bind-address", "127.0.0.1",
                    "--tls-cert-file", str(tls.cert), "--tls-private-key-file", str(tls.key),
                    "--downloads-token-file", str(token_file)]))
        try:
            for plugin in plugins:
                await asyncio.to_thread(plugin.start)
            await _flow(server, hub, plugins)
        except BaseException:
            print("--- server log\n" + server.log()[-15000:])
            for plugin in plugins:
                print(f"--- plugin log {plugin.base.name}\n" + plugin.log()[-8000:])
            raise
        finally:
            for plugin in plugins:
                plugin.close()


async def _flow(server: support.RunningServer, hub: fixturehub.Hub,
                plugins: list[csi_harness.PluginProcess]) -> None:
    async with gpustack.ModelManager.from_url(server.url, token=server.admin_token,
                                              ca_file=str(server.ca_file)) as models:
        source = gpustack.HubSource("huggingFace", GGUF)
        await models.create_artifact(NAMESPACE, "whole", gpustack.HubSource("huggingFace",
                                                                             WHOLE))
        await models.create_artifact(NAMESPACE, "gguf", source, allow_patterns=PATTERNS)
        whole = await models.wait_resolved(NAMESPACE, "whole", timeout=120)
        gguf = await models.wait_resolved(NAMESPACE, "gguf", timeout=120)
        assert whole.manifest_digest != gguf.manifest_digest

        # which files the patterns kept, and the GGUF to load under the mount
        manifest = await models.manifest(NAMESPACE, "gguf")
        assert manifest.manifest_digest == gguf.manifest_digest and manifest.reason == ""
        assert [f.path for f in manifest.files] == ["mmproj-model-f16.gguf", "model-Q4_K_M.gguf"]
        (weights,) = [f for f in manifest.matching(".gguf") if "mmproj" not in f.path]
        assert weights.path == "model-Q4_K_M.gguf" and weights.size == 3 * MiB
        assert weights.sha256 == hub.content(GGUF, weights.path).sha256
        assert len((await models.manifest(NAMESPACE, "whole")).files) == 2

        # nothing anywhere yet
        assert (await models.copies(NAMESPACE, "gguf")).nodes == ()

        with server.client() as admin:  # the administrator's pool layer: both nodes, granted
            await asyncio.to_thread(pools.setup, admin, NAMESPACE, list(NODES))
        await models.create_prefetch(NAMESPACE, "warm", gpustack.PrefetchSpec(
            "gguf", "grant", node_names=NODES, pinned=True))
        seen: dict[str, list[gpustack.NodeCopy]] = {node: [] for node in NODES}
        async for copies in models.watch_copies(NAMESPACE, "gguf", interval=0.1):
            for row in copies.nodes:
                seen[row.node].append(row)
            if len(copies.nodes) == 2 and all(row.ready for row in copies.nodes):
                break
        order = {"Pending": 0, "Downloading": 1, "Ready": 2}
        for node, rows in seen.items():
            phases = [order[row.phase] for row in rows]
            assert phases == sorted(phases), (node, [row.phase for row in rows])
            assert rows[-1].ready and rows[-1].downloaded_bytes == gguf.size_bytes
            assert rows[-1].pinned and rows[-1].prefetches == ("warm",)
            assert rows[-1].percent == 100 and rows[-1].source == "Hub"
        live = [row for rows in seen.values() for row in rows
                if row.phase == "Downloading" and row.live]
        assert live, "a downloading node's bytes were read live from its plugin"
        rising = {node: sorted({r.downloaded_bytes for r in rows
                                if r.phase == "Downloading" and r.live})
                  for node, rows in seen.items()}
        assert any(len(values) >= 2 for values in rising.values()), rising
        for plugin in plugins:  # published on each node
            tree = plugin.root / "objects" / "sha256" / gguf.manifest_digest.removeprefix("sha256:")
            assert (tree / weights.path).read_bytes() == hub.content(GGUF, weights.path).read()
        ready = await models.wait_ready(NAMESPACE, "gguf", nodes=NODES, timeout=60)
        assert {row.node for row in ready.nodes} == set(NODES)

        # the blocking client, from inside this running event loop (its own loop in a thread)
        with gpustack.SyncModelManager(server=server.url, token=server.admin_token,
                                       ca_file=str(server.ca_file)) as blocking:
            assert {row.node for row in blocking.copies(NAMESPACE, "gguf").nodes} == set(NODES)
            assert blocking.manifest(NAMESPACE, "gguf").files == manifest.files

        # a repository that does not exist: an answer at once, not the timeout
        await models.create_artifact(NAMESPACE, "missing", gpustack.HubSource(
            "huggingFace", "org/not-on-the-hub"))
        with pytest.raises(gpustack.ResolutionFailed) as failed:
            await models.wait_resolved(NAMESPACE, "missing", timeout=600)
        assert failed.value.reason == "AccessDenied"
        assert failed.value.retry_time is not None
        host = hub.endpoint.split("://", 1)[1].rstrip("/")
        assert host in failed.value.message and "huggingface.co" not in failed.value.message
        with pytest.raises(gpustack.ResolutionFailed):
            await models.wait_ready(NAMESPACE, "missing", nodes=NODES, timeout=600)

        # delete with cleanup: the bytes leave both nodes now (nothing mounts them), not when
        # a watermark is passed; each node's store stops listing the digest
        trees = [plugin.root / "objects" / "sha256" / gguf.manifest_digest.removeprefix(
            "sha256:") for plugin in plugins]
        await models.delete_artifact(NAMESPACE, "gguf", cleanup=True)
        async with asyncio.timeout(120):  # a hang guard, not a speed assertion
            while any(tree.exists() for tree in trees) or any(
                    store.entry(gguf.manifest_digest) is not None
                    for store in await models.node_stores()):
                await asyncio.sleep(0.1)
        assert not any(tree.exists() for tree in trees)
        for plugin in plugins:
            assert f"removed {gguf.manifest_digest} as the node's spec.evict asks" in plugin.log()
        whole_tree = [p.root / "objects" / "sha256" for p in plugins]
        assert all(tree.is_dir() for tree in whole_tree)  # the cache itself stays
