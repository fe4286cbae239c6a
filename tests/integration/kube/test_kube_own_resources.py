"""kube.resources against the real standalone API server: ModelArtifact and NodeModelStore with
their status subresources, list + watch, and the server's refusals as typed errors."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Iterator

import pytest

import kube
from devkit.harness import apiserver as support
from kube.resources import ModelArtifact, NodeModelStore, progress_path
from tests.support.kubeclient import artifact


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[support.RunningServer]:
    with support.running(
        tmp_path_factory.mktemp("own"),
        extra_args=["--node", "node-a", "--controllers=external"],
    ) as running:
        running.wait_for("/apis/worker.gpustack.ai/v1/nodemodelstores/node-a")
        yield running


async def test_model_artifacts_create_watch_and_status(server: support.RunningServer) -> None:
    async with kube.Client.from_kubeconfig(server.kubeconfig) as admin, kube.Client.from_kubeconfig(
        server.worker_kubeconfig
    ) as worker:
        listed = await admin.list(ModelArtifact, namespace="kube-own")
        stream = admin.watch(
            ModelArtifact, namespace="kube-own", resource_version=listed.resource_version
        )
        created = await admin.create(ModelArtifact(artifact("qwen", "kube-own")))
        kind, seen = await asyncio.wait_for(anext(stream), 30)
        assert kind == "ADDED" and seen.metadata is not None
        assert seen.metadata.name == "qwen" and created.metadata is not None
        await stream.aclose()  # type: ignore[attr-defined]

        with pytest.raises(kube.Forbidden, match="only the worker"):
            await admin.patch(
                ModelArtifact.Status, "qwen", {"status": {"observedGeneration": 1}},
                namespace="kube-own",
            )  # fmt: skip
        written = await worker.patch(
            ModelArtifact.Status, "qwen", {"status": {"observedGeneration": 1}},
            namespace="kube-own",
        )  # fmt: skip
        assert written["status"] == {"observedGeneration": 1}
        fetched = await worker.get(ModelArtifact, "qwen", namespace="kube-own")
        assert fetched["status"] == {"observedGeneration": 1}
        progress = await admin.request("GET", progress_path("kube-own", "qwen"))
        assert progress.status_code == 200
        with pytest.raises(kube.AlreadyExists):
            await admin.create(ModelArtifact(artifact("qwen", "kube-own")))
        await admin.delete(ModelArtifact, "qwen", namespace="kube-own")
        with pytest.raises(kube.NotFound):
            await admin.get(ModelArtifact, "qwen", namespace="kube-own")


async def test_node_model_stores_are_cluster_scoped(server: support.RunningServer) -> None:
    async with (kube.Client.from_kubeconfig(server.worker_kubeconfig) as worker,
                kube.Client.from_kubeconfig(server.plugin_kubeconfig) as plugin):
        stores = await worker.list(NodeModelStore)
        assert [s.metadata.name for s in stores.items if s.metadata] == ["node-a"]
        # only the node plugin of node-a writes node-a's status
        written = await plugin.patch(
            NodeModelStore.Status, "node-a", {"status": {"observedGeneration": 1}}
        )
        assert written["status"]["observedGeneration"] == 1
        with pytest.raises(kube.Forbidden):
            await worker.patch(NodeModelStore.Status, "node-a", {"status": {}})
        with pytest.raises(kube.KubeError) as refused:
            await worker.create(NodeModelStore({"metadata": {"name": "node-b"}}))
        assert refused.value.code == 405


def test_progress_path_is_the_subresource() -> None:
    assert progress_path("team-a", "qwen") == (
        "/apis/worker.gpustack.ai/v1/namespaces/team-a/modelartifacts/qwen/progress"
    )


def test_resources_name_our_group(tmp_path: pathlib.Path) -> None:
    assert ModelArtifact._api_info.resource.group == "worker.gpustack.ai"
    assert NodeModelStore._api_info.plural == "nodemodelstores"
