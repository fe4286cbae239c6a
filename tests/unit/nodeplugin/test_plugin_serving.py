"""The assembled plugin's HTTPS port and metrics: real hypercorn over TLS on loopback, a real gRPC
socket, a fake API client and mounter, the local importer as the materializer."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import ssl
from collections.abc import AsyncIterator

import grpc
import httpx
import pytest

from devkit.harness import apiserver as support
from hub import config as hub_config
from nodeplugin import apiclient, plugin
from nodeplugin.cache import layout
from nodeplugin.csi.gen import csi_pb2, csi_pb2_grpc
from nodeplugin.materialize import download, interface, local
from tests.unit.nodeplugin import fakes

FILES = {"config.json": b"{}", "model.bin": b"\x02" * 3000}


def _request(tmp: pathlib.Path, digest: str, pod: str, artifact: str = "qwen"
             ) -> csi_pb2.NodePublishVolumeRequest:
    parent = tmp / "kubelet" / "pods" / pod / "volumes" / "kubernetes.io~csi" / "model"
    parent.mkdir(parents=True, exist_ok=True)
    return csi_pb2.NodePublishVolumeRequest(
        volume_id=f"csi-{pod}",
        target_path=str(parent / "mount"),
        volume_capability=csi_pb2.VolumeCapability(mount=csi_pb2.VolumeCapability.MountVolume()),
        volume_context={"artifact": artifact, "artifactUID": "uid-1", "manifestDigest": digest,
                        "csi.storage.k8s.io/pod.namespace": "team-a",
                        "csi.storage.k8s.io/ephemeral": "true"},
    )


@pytest.fixture
async def running(tmp_path: pathlib.Path) -> AsyncIterator[tuple[plugin.Plugin, str]]:
    digest = local.write_import(tmp_path / "imports", FILES)
    client = fakes.FakeClient([fakes.page([fakes.artifact_object(digest=digest)], "3")])
    config = plugin.Config(
        node_name="node-1", endpoint=f"unix://{tmp_path}/csi.sock", root=str(tmp_path / "cache"),
        kubelet_dir=str(tmp_path / "kubelet"), import_dir=str(tmp_path / "imports"),
        secure_port=support.free_port(), bind_address="127.0.0.1",
    )
    started = await plugin.start(config, client=client, mount=fakes.FakeMounter())
    try:
        yield started, digest
    finally:
        await started.stop(0)


@contextlib.asynccontextmanager
async def _https(started: plugin.Plugin) -> AsyncIterator[httpx.AsyncClient]:
    """A client trusting the plugin's self-signed CA, once the port answers."""
    async with asyncio.timeout(10):
        while not (started.cache.state / "tls" / "ca.crt").exists():
            await asyncio.sleep(0.02)
    context = ssl.create_default_context(cafile=str(started.cache.state / "tls" / "ca.crt"))
    base = f"https://127.0.0.1:{started.config.secure_port}"
    async with httpx.AsyncClient(base_url=base, verify=context) as client:
        async with asyncio.timeout(10):
            while True:
                try:
                    await client.get("/livez")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.02)
        yield client


async def _publish(node: csi_pb2_grpc.NodeStub, request: csi_pb2.NodePublishVolumeRequest
                   ) -> grpc.StatusCode:
    try:
        await node.NodePublishVolume(request)
    except grpc.aio.AioRpcError as err:
        return err.code()
    return grpc.StatusCode.OK


async def test_mounts_and_materializations_show_in_metrics_over_https(
    running: tuple[plugin.Plugin, str], tmp_path: pathlib.Path
) -> None:
    started, digest = running
    socket = f"unix:{tmp_path}/csi.sock"
    async with _https(started) as client, grpc.aio.insecure_channel(socket) as channel:
        await started.informer.wait_synced()
        assert (await client.get("/readyz")).status_code == 200
        node = csi_pb2_grpc.NodeStub(channel)
        first = _request(tmp_path, digest, "p1")
        assert await _publish(node, first) == grpc.StatusCode.ABORTED
        async with asyncio.timeout(10):
            while await _publish(node, first) != grpc.StatusCode.OK:
                await asyncio.sleep(0.01)
        assert await _publish(node, _request(tmp_path, digest, "p2")) == grpc.StatusCode.OK
        denied = _request(tmp_path, digest, "p3", artifact="absent")
        assert await _publish(node, denied) == grpc.StatusCode.PERMISSION_DENIED
        async with asyncio.timeout(10):  # the attempt's task ends (and tells) just after
            while started.materializer.running():
                await asyncio.sleep(0.01)
        await started.stock.settle()  # and the completion's measurement has landed
        text = (await client.get("/metrics")).text
        forbidden = await client.get("/model/downloads")
    p = "gpustack_model_manager_"
    assert f'{p}mounts_total{{result="materialized"}} 1.0' in text
    assert f'{p}mounts_total{{result="hit"}} 1.0' in text
    assert f'{p}mounts_total{{result="denied"}} 1.0' in text
    assert f'{p}mounts_total{{result="pending"}} ' in text
    assert f'{p}mounts_total{{result="pending"}} 0.0' not in text
    assert f"{p}publish_duration_seconds_count 1.0" in text
    stored = next(line for line in text.splitlines() if line.startswith(f"{p}stored_bytes "))
    assert float(stored.split()[1]) >= 3000
    assert forbidden.status_code == 403
    for name in ("team-a", "qwen", "uid-1"):
        assert name not in text


async def test_not_ready_until_the_informer_lists(tmp_path: pathlib.Path) -> None:
    blocked = asyncio.Event()

    class Slow(fakes.FakeClient):
        async def list_page(self, *, limit: int, continue_token: str) -> apiclient.ListPage:
            await blocked.wait()
            return await super().list_page(limit=limit, continue_token=continue_token)

    config = plugin.Config(
        node_name="node-1", endpoint=f"unix://{tmp_path}/csi.sock", root=str(tmp_path / "cache"),
        kubelet_dir=str(tmp_path / "kubelet"), secure_port=support.free_port(),
        bind_address="127.0.0.1",
    )
    started = await plugin.start(config, client=Slow([fakes.page([], "1")]),
                                 mount=fakes.FakeMounter())
    try:
        async with _https(started) as client:
            assert (await client.get("/readyz")).status_code == 503
            blocked.set()
            await started.informer.wait_synced()
            assert (await client.get("/readyz")).status_code == 200
    finally:
        blocked.set()
        await started.stop(0)


def test_without_import_dir_the_hub_downloader_is_built_from_the_config(
    tmp_path: pathlib.Path,
) -> None:
    config = plugin.Config(
        node_name="n", endpoint="unix:///x", root=str(tmp_path), kubelet_dir="/k",
        download=download.Settings(concurrency=3, bytes_per_second=1000, high_percent=50),
    )
    built = plugin.default_materializer(config, layout.Layout(tmp_path))
    assert isinstance(built, download.HubMaterializer)
    assert built.settings.concurrency == 3 and built.settings.high_percent == 50
    asyncio.run(built.close())


async def test_a_bad_hub_configuration_fails_new_digests_with_the_reason(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = plugin.Config(
        node_name="n", endpoint="unix:///x", root=str(tmp_path), kubelet_dir="/k",
        hub=hub_config.HubConfig(ca_bundle=str(tmp_path / "missing.pem")),
    )
    built = plugin.default_materializer(config, layout.Layout(tmp_path))
    assert not isinstance(built, download.HubMaterializer)
    progress = await built.ensure(interface.Request(
        "sha256:" + "ab" * 32, interface.Source("huggingFace", "org/m", "c" * 40)))
    assert progress.state is interface.State.FAILED
    assert progress.reason is interface.Reason.INVALID_REQUEST
    assert "missing.pem does not exist" in progress.message
    assert "hub configuration is unusable" in caplog.text
    assert built.running() == []
