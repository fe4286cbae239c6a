"""``python -m nodeplugin`` against the real standalone API server (root, real bind mounts): it
waits for its NodeModelStore, applies its spec, writes its status (as the identity the server
admits for ``nodemodelstores/status``), names no tenant anywhere in it, and a restart rewrites
the status from the disk and the live mounts, not from what was written before."""

from __future__ import annotations

import asyncio
import json
import pathlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

import kube
from devkit.harness import apiserver as support
from kube.resources import NodeModelStore
from nodeplugin.csi.gen import csi_pb2
from nodeplugin.materialize import local
from tests.integration.nodeplugin.csi_harness import GROUP, ArtifactApi, PluginProcess

NODE = "node-1"
NAMESPACE = "tenant-ns-7f3a"
ARTIFACT = "tenant-artifact-9c1d"
REPOSITORY = "tenant-org-55/tenant-repo-e2b0"
POD_UID = "tenant-pod-uid-4d21"
TENANT_STRINGS = (NAMESPACE, ARTIFACT, REPOSITORY, "tenant-org-55", "tenant-repo-e2b0", POD_UID,
                  f"pod-{POD_UID}")
FILES = {"config.json": b"{}", "weights.bin": b"\x05" * 100_000}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[support.RunningServer]:
    with support.running(tmp_path_factory.mktemp("store-api"),
                         extra_args=["--node", NODE, "--controllers=external"]) as running:
        running.wait_for(f"{GROUP}/nodemodelstores/{NODE}")
        yield running


def _store(server: support.RunningServer) -> dict[str, Any]:
    with server.client() as client:
        response = client.get(f"{GROUP}/nodemodelstores/{NODE}")
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def _wait_status(server: support.RunningServer, plugin: PluginProcess,
                 predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        status = _store(server).get("status") or {}
        if predicate(status):
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"status never got there: {status}\n{plugin.log()[-4000:]}")
        time.sleep(0.05)


async def _wipe(server: support.RunningServer) -> None:
    """Write an empty status as the plugin's identity (the only one admitted there)."""
    async with kube.Client.from_kubeconfig(server.plugin_kubeconfig) as client:
        await client.patch(NodeModelStore.Status, NODE,
                           {"status": {"models": [], "observedGeneration": 0}})
    assert (_store(server).get("status") or {}).get("models") == []


def _model(status: dict[str, Any], digest: str) -> dict[str, Any] | None:
    return next((m for m in status.get("models") or [] if m["digest"] == digest), None)


def test_status_is_the_nodes_and_a_restart_rewrites_it_from_disk(
    server: support.RunningServer,
    start_plugin: Callable[..., PluginProcess],
    tmp_path: pathlib.Path,
) -> None:
    import_dir = tmp_path / "imports"
    digest = local.write_import(import_dir, FILES)
    missing = "sha256:" + "9e" * 32  # not in the import directory: its import fails
    artifacts = ArtifactApi(server)
    art = artifacts.resolve(artifacts.create(NAMESPACE, ARTIFACT, {"huggingFace": {
        "repository": REPOSITORY}}), digest)
    broken = artifacts.resolve(artifacts.create(NAMESPACE, f"{ARTIFACT}-b", {"huggingFace": {
        "repository": REPOSITORY}}), missing)
    # As the identity the server admits on nodemodelstores/status (``plugin_kubeconfig``).
    plugin = start_plugin(server.plugin_kubeconfig, import_dir=import_dir)
    generation = _store(server)["metadata"]["generation"]
    status = _wait_status(server, plugin, lambda s: s.get("observedGeneration") == generation)
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Serving")
    kubelet = plugin.kubelet()
    request = kubelet.publish_request(namespace=NAMESPACE, pod_uid=POD_UID, attributes={
        "artifact": ARTIFACT, "artifactUID": art["metadata"]["uid"], "manifestDigest": digest})
    assert kubelet.publish_until_ok(request)[-1][0] == grpc.StatusCode.OK
    failing = kubelet.publish_request(namespace=NAMESPACE, pod_uid=f"{POD_UID}-b", attributes={
        "artifact": f"{ARTIFACT}-b", "artifactUID": broken["metadata"]["uid"],
        "manifestDigest": missing})
    deadline = time.monotonic() + 30
    while kubelet.publish(failing)[0] != grpc.StatusCode.UNAVAILABLE:  # the import ran, failed
        assert time.monotonic() < deadline
        time.sleep(0.05)
    status = _wait_status(server, plugin, lambda s: bool(
        (_model(s, digest) or {}).get("referenced"))
        and (_model(s, missing) or {}).get("state") == "Failed")
    entry = _model(status, digest)
    assert entry is not None and entry["state"] == "Ready"
    assert entry["sizeBytes"] == sum(len(b) for b in FILES.values())
    assert status["capacity"]["totalBytes"] > 0 and status["capacity"]["usedPercent"] % 5 == 0
    failed = _model(status, missing)
    assert failed is not None and failed["reason"] == "SourceUnavailable" and failed["retryTime"]
    # Cluster-scoped: no namespace, artifact, repository or Pod anywhere in it.
    text = json.dumps(_store(server))
    for tenant in TENANT_STRINGS:
        assert tenant not in text

    plugin.stop()
    asyncio.run(_wipe(server))  # whatever was written before is gone
    plugin.start()
    status = _wait_status(server, plugin, lambda s: bool(
        (_model(s, digest) or {}).get("referenced")))
    assert status["observedGeneration"] == generation
    assert (_model(status, missing) or {}).get("reason") == "SourceUnavailable"
    kubelet = plugin.kubelet()
    kubelet.unpublish(request.target_path, request.volume_id)
    status = _wait_status(server, plugin, lambda s: (_model(s, digest) or {}).get(
        "referenced") is False)
    assert _model(status, digest) is not None


def test_the_plugin_waits_for_its_object(
    server: support.RunningServer,
    start_plugin: Callable[..., PluginProcess],
) -> None:
    plugin = start_plugin(server.plugin_kubeconfig, extra_args=["--node-name", "node-absent"])
    kubelet = plugin.kubelet()
    # It serves mounts meanwhile, and says it is waiting.
    info = kubelet.node.NodeGetInfo(csi_pb2.NodeGetInfoRequest(), timeout=10)
    assert info.node_id == "node-absent"
    deadline = time.monotonic() + 30
    while "does not exist yet" not in plugin.log():
        assert time.monotonic() < deadline, plugin.log()
        time.sleep(0.05)
