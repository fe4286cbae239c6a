"""Restarts: live mounts survive and are re-learned; mounts wait for the artifact list."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable

import grpc

from devkit.harness import apiserver as support
from nodeplugin.cache import layout
from nodeplugin.csi.gen import csi_pb2
from nodeplugin.materialize import local
from tests.integration.nodeplugin.csi_harness import ArtifactApi, PluginProcess, mounts_under

FILES = {"config.json": b"{}", "weights.bin": b"\x07" * 65536}


def test_restart_with_live_mounts_rebuilds_references(
    apiserver: support.RunningServer,
    artifacts: ArtifactApi,
    start_plugin: Callable[..., PluginProcess],
    tmp_path: pathlib.Path,
) -> None:
    import_dir = tmp_path / "imports"
    digest = local.write_import(import_dir, FILES)
    second = local.write_import(import_dir, {"other.bin": b"2"})
    art = artifacts.resolved("restart-a", "qwen", digest)
    other = artifacts.resolved("restart-a", "other", second)
    plugin = start_plugin(apiserver, import_dir=import_dir)
    kubelet = plugin.kubelet()
    attributes = {"artifact": "qwen", "artifactUID": art["metadata"]["uid"],
                  "manifestDigest": digest}
    requests = [kubelet.publish_request(namespace="restart-a", pod_uid=f"pod-{i}",
                                        attributes=attributes) for i in range(3)]
    for request in requests:
        assert kubelet.publish_until_ok(request)[-1][0] == grpc.StatusCode.OK
    cache = layout.Layout(plugin.root)
    stray = cache.partial / f"{layout.hex_of(second)}.dead"
    stray.mkdir()
    (stray / "half.bin").write_bytes(b"x")
    kept = cache.partial / f"{layout.hex_of(second)}.resume"
    kept.mkdir()
    (kept / layout.RESUMABLE).write_text("{}")

    plugin.kill()
    # The Pods keep reading while no plugin runs: their mounts are the kernel's.
    target = pathlib.Path(requests[0].target_path)
    assert (target / "weights.bin").read_bytes() == FILES["weights.bin"]
    plugin.start()

    assert sorted(mounts_under(plugin.kubelet_dir)) == sorted(r.target_path for r in requests)
    assert not stray.exists() and kept.exists()
    state = json.loads((cache.state / "usage.json").read_text())
    assert state["digests"][digest]["referenced"] is True
    # The rebuilt references know what each target holds.
    clash = kubelet.publish_request(
        namespace="restart-a", pod_uid="pod-0",
        attributes={"artifact": "other", "artifactUID": other["metadata"]["uid"],
                    "manifestDigest": second})
    code, message = kubelet.publish_until_ok(clash)[-1]
    assert code == grpc.StatusCode.ALREADY_EXISTS, message
    assert kubelet.publish_until_ok(requests[0])[-1][0] == grpc.StatusCode.OK
    assert len(mounts_under(plugin.kubelet_dir)) == 3  # no second mount stacked
    for request in requests:
        kubelet.unpublish(request.target_path, request.volume_id)
    assert mounts_under(plugin.kubelet_dir) == []
    state = json.loads((cache.state / "usage.json").read_text())
    assert state["digests"][digest]["referenced"] is False


def test_mounts_are_unavailable_until_the_artifacts_are_read(
    fresh_apiserver: support.RunningServer,
    start_plugin: Callable[..., PluginProcess],
    tmp_path: pathlib.Path,
) -> None:
    import_dir = tmp_path / "imports"
    digest = local.write_import(import_dir, FILES)
    art = ArtifactApi(fresh_apiserver).resolved("window", "qwen", digest)
    port = fresh_apiserver.port
    fresh_apiserver.stop()
    plugin = start_plugin(fresh_apiserver, import_dir=import_dir)
    kubelet = plugin.kubelet()
    # Identity and NodeGetInfo serve with the API down.
    info = kubelet.identity.GetPluginInfo(csi_pb2.GetPluginInfoRequest(), timeout=5)
    assert info.name == "model.csi.gpustack.ai"
    assert kubelet.node.NodeGetInfo(csi_pb2.NodeGetInfoRequest(), timeout=5).node_id == "node-1"
    request = kubelet.publish_request(
        namespace="window", pod_uid="pod-1",
        attributes={"artifact": "qwen", "artifactUID": art["metadata"]["uid"],
                    "manifestDigest": digest})
    code, message = kubelet.publish(request)
    assert code == grpc.StatusCode.UNAVAILABLE, message
    assert "not read the ModelArtifacts" in message
    assert not pathlib.Path(request.target_path).exists()
    server = support.start(fresh_apiserver.data_dir, port=port)
    try:
        outcomes = kubelet.publish_until_ok(request, timeout=30)
        assert outcomes[-1][0] == grpc.StatusCode.OK, outcomes[-3:]
        kubelet.unpublish(request.target_path, request.volume_id)
    finally:
        server.stop()
