"""The installable client (``clients/python``, ``model_manager_client``, on kubernetes-asyncio)
against the standalone server with its embedded controllers and the fixture hub: connected by
kubeconfig and by URL + token + CA; one artifact per source found again by its label; resolved,
or a terminal failure raised at once; the manifest; copies rows as the node reports them, a
prefetch target among them; wait_ready; the blocking facade inside a running event loop; delete
with cleanup removing the prefetch with cleanupOnDelete set."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import model_manager_client as mmc
import pytest

import kube
from devkit import fixturehub
from devkit.harness import apiserver as support
from kube.resources import NodeModelStore
from tests.support import pools

NODE = "node-a"
NS = "gpustack"
REPO = "org/client-model-GGUF"
FILES: dict[str, bytes | int] = {"README.md": b"# q\n", "m-Q4_K_M.gguf": 4096,
                                 "m-Q8_0.gguf": 8192, "mmproj-m-f16.gguf": 1024}
PATTERNS = ("*Q4_K_M*.gguf", "*mmproj*.gguf")


@pytest.fixture(scope="module")
def hub() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        running.add_repo(REPO, FILES)
        yield running


@pytest.fixture(scope="module")
def server(hub: fixturehub.Hub, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[support.RunningServer]:
    with support.running(tmp_path_factory.mktemp("mm-client"), extra_args=[
            "--node", NODE, "--controllers=embedded", "--huggingface-endpoint", hub.endpoint,
    ]) as running:
        running.wait_for(f"/apis/worker.gpustack.ai/v1/nodemodelstores/{NODE}")
        yield running


async def _report(server: support.RunningServer, models: list[dict[str, object]]) -> None:
    """The node's report, written as its plugin writes it."""
    async with kube.Client.from_kubeconfig(server.plugin_kubeconfig) as plugin:
        await plugin.patch(NodeModelStore.Status, NODE, {"status": {"models": models}})


async def test_the_gpustack_flow_through_the_installable_client(
        server: support.RunningServer, hub: fixturehub.Hub) -> None:
    source = mmc.hub_source("huggingFace", REPO)
    async with await mmc.ModelManager.from_kubeconfig(str(server.kubeconfig)) as models:
        created = await models.ensure_artifact(NS, "gguf", source, allow_patterns=PATTERNS)
        assert created.labels[mmc.SOURCE_LABEL] == mmc.source_key(source, PATTERNS)
        again = await models.ensure_artifact(NS, "another-name", source,
                                             allow_patterns=PATTERNS)
        assert again.name == "gguf"  # one source, one artifact
        other = await models.ensure_artifact(NS, "whole", source)  # other patterns: another
        assert other.name == "whole"
        resolved = await models.wait_resolved(NS, "gguf", timeout=120)
        assert resolved.resolved and resolved.manifest_digest.startswith("sha256:")
        manifest = await models.manifest(NS, "gguf")
        assert [f.path for f in manifest.files] == ["m-Q4_K_M.gguf", "mmproj-m-f16.gguf"]
        assert manifest.files[0].sha256 == hub.content(REPO, "m-Q4_K_M.gguf").sha256

        await models.create_artifact(NS, "missing", mmc.hub_source("huggingFace",
                                                                   "org/not-on-the-hub"))
        with pytest.raises(mmc.ResolutionFailed) as failed:
            await models.wait_resolved(NS, "missing", timeout=600)  # at once, not the timeout
        assert failed.value.reason == "AccessDenied" and failed.value.retry_time is not None
        with pytest.raises(mmc.NotFound):
            await models.get_artifact(NS, "nope")

    async with mmc.ModelManager.from_url(server.url, token=server.admin_token,
                                         ca_file=str(server.ca_file)) as models:
        digest = resolved.manifest_digest
        assert (await models.copies(NS, "gguf")).nodes == ()
        with server.client() as admin:  # the administrator's pool layer: every node, NS granted
            await asyncio.to_thread(pools.setup, admin, NS, [NODE])
        await models.create_prefetch(NS, "warm", "gguf", binding="grant", nodes=(NODE,))
        await _report(server, [{"digest": digest, "state": "Downloading", "sizeBytes": 5120,
                                "downloadedBytes": 1024, "source": "Hub"}])
        async for copies in models.watch_copies(NS, "gguf", interval=0.1):
            row = copies.node(NODE)
            if row is not None and row.phase == "Downloading" and row.prefetches == ("warm",):
                break
        assert (row.downloaded_bytes, row.size_bytes, row.percent) == (1024, 5120, 20)
        assert not row.live  # no plugin answers here: the stored bytes, and it says so
        await _report(server, [{"digest": digest, "state": "Ready", "sizeBytes": 5120,
                                "downloadedBytes": 5120, "source": "Hub"}])
        ready = await models.wait_ready(NS, "gguf", nodes=(NODE,), timeout=60, interval=0.1)
        assert ready.node(NODE) is not None

        # the blocking facade, from inside this running loop
        with mmc.SyncModelManager.from_url(server.url, token=server.admin_token,
                                           ca_file=str(server.ca_file)) as blocking:
            assert blocking.manifest(NS, "gguf") == manifest
            assert blocking.copies(NS, "gguf").node(NODE) is not None

        await models.delete_artifact(NS, "gguf", cleanup=True)
        with pytest.raises(mmc.NotFound):
            await models.get_artifact(NS, "gguf")
        async with kube.Client.from_kubeconfig(server.kubeconfig) as admin:
            from kube.resources import ModelPrefetch
            with pytest.raises(kube.NotFound):
                await admin.get(ModelPrefetch, "warm", namespace=NS)


def test_a_url_must_be_http() -> None:
    with pytest.raises(mmc.ModelManagerError, match="http"):
        mmc.ModelManager.from_url("cluster.example:6443")
