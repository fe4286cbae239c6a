"""The GPUStack server's client (``kube.gpustack``) against the real standalone server, its
embedded controllers resolving against the fixture hub: create, wait, progress, node stores and
the nodes holding a digest, listing, a prefetch, the typed errors, and the blocking variant."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

import kube
from devkit import fixturehub
from devkit.harness import apiserver as support
from kube import gpustack, placement
from kube.resources import NodeModelStore
from openapi import placement as rules
from tests.support import pools

NODE = "node-a"
REPO = "org/tiny-client"
DOWN = "org/always-down"
COMMIT = "c" * 40


@pytest.fixture(scope="module")
def hub() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        running.add_repo(REPO, {"config.json": b"{}", "model.safetensors": 4096}, commit=COMMIT)
        running.add_repo(DOWN, {"config.json": b"{}"})
        running.faults(DOWN).fail_times = None  # every request answers 503
        yield running


@pytest.fixture(scope="module")
def server(hub: fixturehub.Hub, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[support.RunningServer]:
    with support.running(tmp_path_factory.mktemp("gpustack-client"), extra_args=[
            "--node", NODE, "--controllers=embedded", "--huggingface-endpoint", hub.endpoint,
    ]) as running:
        running.wait_for(f"/apis/worker.gpustack.ai/v1/nodemodelstores/{NODE}")
        yield running


async def test_create_wait_progress_and_the_nodes_holding_it(
        server: support.RunningServer) -> None:
    async with gpustack.ModelManager.from_kubeconfig(str(server.kubeconfig)) as models:
        created = await models.create_artifact(
            "team-a", "tiny", gpustack.HubSource("huggingFace", REPO), labels={"app": "gpustack"})
        assert (created.namespace, created.name, created.resolved) == ("team-a", "tiny", False)
        resolved = await models.wait_resolved("team-a", "tiny", timeout=60)
        assert resolved.resolved and resolved.revision == COMMIT
        assert resolved.manifest_digest.startswith("sha256:") and resolved.size_bytes == 4098
        progress = await models.progress("team-a", "tiny")
        assert progress["manifestDigest"] == resolved.manifest_digest
        assert progress["ready"] == 0
        (store,) = await models.node_stores()
        assert store.node == NODE and not store.holds(resolved.manifest_digest)
        assert await models.nodes_holding(resolved.manifest_digest) == []
        # the node's plugin reports the digest published: now that node holds it
        async with kube.Client.from_kubeconfig(server.plugin_kubeconfig) as plugin:
            await plugin.patch(NodeModelStore.Status, NODE, {"status": {"models": [
                {"digest": resolved.manifest_digest, "state": "Ready", "sizeBytes": 4098}]}})
        assert await models.nodes_holding(resolved.manifest_digest) == [NODE]
        (store,) = await models.node_stores()
        assert store.entry(resolved.manifest_digest) == {
            "digest": resolved.manifest_digest, "state": "Ready", "sizeBytes": 4098}
        listed = await models.list_artifacts("team-a")
        assert [(a.name, a.resolved) for a in listed] == [("tiny", True)]
        assert "team-a/tiny" in {f"{a.namespace}/{a.name}" for a in await models.list_artifacts()}
        await models.delete_artifact("team-a", "tiny")
        with pytest.raises(kube.NotFound):
            await models.get_artifact("team-a", "tiny")


async def test_typed_errors(server: support.RunningServer) -> None:
    async with gpustack.ModelManager.from_kubeconfig(str(server.kubeconfig)) as models:
        await models.create_artifact("team-a", "missing", gpustack.HubSource(
            "huggingFace", "org/not-on-the-hub"))
        # a repository that does not exist is a terminal answer: raised at once with the reason,
        # long before the timeout (an outage would be waited through until ResolutionTimeout)
        with pytest.raises(gpustack.ResolutionFailed) as failed:
            await models.wait_resolved("team-a", "missing", timeout=600)
        assert failed.value.reason == "AccessDenied" and failed.value.retry_time is not None
        assert "team-a/missing" in failed.value.message
        # an outage is not terminal: waited through, then ResolutionTimeout with the last seen
        await models.create_artifact("team-a", "down", gpustack.HubSource("huggingFace", DOWN))
        with pytest.raises(gpustack.ResolutionTimeout) as late:
            await models.wait_resolved("team-a", "down", timeout=3)
        assert late.value.artifact.name == "down"
        assert late.value.artifact.reason in ("Resolving", "SourceUnavailable")
        assert late.value.artifact.terminal_reason == ""
        await models.delete_artifact("team-a", "down")
        with pytest.raises(kube.AlreadyExists):
            await models.create_artifact("team-a", "missing", gpustack.HubSource(
                "huggingFace", "org/not-on-the-hub"))
        with pytest.raises(kube.Invalid, match=r"spec\.source\.image\.reference"):
            await models.create_artifact("team-a", "tagged", gpustack.ImageSource("busybox:1"))
        await models.delete_artifact("team-a", "missing")
    async with gpustack.ModelManager.from_kubeconfig(str(server.plugin_kubeconfig)) as plugin:
        with pytest.raises(kube.Forbidden):
            await plugin.create_artifact("team-a", "nope", gpustack.HubSource("huggingFace",
                                                                               REPO))


def test_the_blocking_client(server: support.RunningServer, tmp_path: pathlib.Path) -> None:
    with gpustack.SyncModelManager(str(server.kubeconfig)) as models:
        models.create_artifact("team-b", "tiny", gpustack.HubSource("huggingFace", REPO,
                                                                     revision="main"))
        resolved = models.wait_resolved("team-b", "tiny", timeout=60)
        assert resolved.revision == COMMIT
        assert models.progress("team-b", "tiny")["manifestDigest"] == resolved.manifest_digest
        assert [store.node for store in models.node_stores()] == [NODE]
        assert [a.name for a in models.list_artifacts("team-b")] == ["tiny"]
        with server.client() as admin:
            pools.setup(admin, "team-b", [NODE])
        models.create_prefetch("team-b", "warm",
                               gpustack.PrefetchSpec("tiny", "grant", node_names=(NODE,)))
        assert models.get_prefetch("team-b", "warm")["spec"]["artifactRef"] == {"name": "tiny"}
        models.delete_prefetch("team-b", "warm")
        models.delete_artifact("team-b", "tiny")


async def test_a_prefetch_is_created_and_deleted(server: support.RunningServer) -> None:
    async with gpustack.ModelManager.from_kubeconfig(str(server.kubeconfig)) as models:
        await models.create_artifact("team-c", "tiny", gpustack.HubSource("huggingFace", REPO))
        with server.client() as admin:
            pools.setup(admin, "team-c", [NODE], allow_pinned=False)
        spec = gpustack.PrefetchSpec("tiny", "grant", node_names=(NODE,))
        created = await models.create_prefetch("team-c", "warm", spec, labels={"app": "g"})
        assert created["spec"]["artifactRef"] == {"name": "tiny"}
        assert created["spec"]["placement"]["nodeSelector"]["matchExpressions"][0][
            "values"] == [NODE]
        assert (await models.get_prefetch("team-c", "warm"))["metadata"]["labels"] == {
            "app": "g"}
        with pytest.raises(kube.AlreadyExists):
            await models.create_prefetch("team-c", "warm", spec)
        with pytest.raises(kube.Invalid, match="bindingRef"):
            await models.create_prefetch("team-c", "nowhere",
                                         gpustack.PrefetchSpec("tiny", "no-such-binding"))
        with pytest.raises(kube.Invalid, match="allowPinned"):
            await models.create_prefetch("team-c", "pinned",
                                         gpustack.PrefetchSpec("tiny", "grant", pinned=True))
        await models.delete_prefetch("team-c", "warm")
        with pytest.raises(kube.NotFound):
            await models.delete_prefetch("team-c", "warm")
        await models.delete_artifact("team-c", "tiny")


async def test_placement_gives_the_volume_and_the_warm_nodes(
        server: support.RunningServer) -> None:
    """Through the real server: the standalone server serves no CSINodes, so every store's node
    counts (as its webhook counts the ``--node`` names)."""
    async with gpustack.ModelManager.from_kubeconfig(str(server.kubeconfig)) as models:
        await models.create_artifact("team-p", "tiny", gpustack.HubSource("huggingFace", REPO))
        with pytest.raises(placement.NotMountable, match="team-p/tiny: it is not resolved yet"):
            await models.placement("team-p", "tiny")
        resolved = await models.wait_resolved("team-p", "tiny", timeout=60)
        async with kube.Client.from_kubeconfig(server.plugin_kubeconfig) as plugin:
            await plugin.patch(NodeModelStore.Status, NODE, {"status": {
                "models": [{"digest": resolved.manifest_digest, "state": "Ready",
                            "sizeBytes": 4098}],
                "conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
        found = await models.placement("team-p", "tiny", volume_name="weights")
        assert found.volume["csi"]["volumeAttributes"] == {
            "artifact": "tiny", "artifactUID": resolved.uid,
            "manifestDigest": resolved.manifest_digest}
        assert found.nodes == (NODE,)
        assert found.preferred_term == rules.preferred_term([NODE])
        with pytest.raises(kube.NotFound):
            await models.placement("team-p", "absent")
        await models.delete_artifact("team-p", "tiny")
