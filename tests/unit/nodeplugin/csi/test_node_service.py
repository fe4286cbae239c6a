"""The CSI services over a real gRPC unix socket, with a fake API client and a fake mounter."""

from __future__ import annotations

import asyncio
import os
import pathlib
from collections.abc import AsyncIterator

import grpc
import pytest

from nodeplugin import plugin
from nodeplugin.csi import node
from nodeplugin.csi.gen import csi_pb2, csi_pb2_grpc
from nodeplugin.materialize import interface, local
from tests.unit.nodeplugin import fakes

FILES = {"config.json": b"{}", "model.bin": b"\x01" * 5000}


class Harness:
    def __init__(self, tmp: pathlib.Path, running: plugin.Plugin, channel: grpc.aio.Channel,
                 client: fakes.FakeClient, mounter: fakes.FakeMounter, digest: str) -> None:
        self.tmp = tmp
        self.running = running
        self.identity = csi_pb2_grpc.IdentityStub(channel)
        self.node = csi_pb2_grpc.NodeStub(channel)
        self.client = client
        self.mounter = mounter
        self.digest = digest
        self.kubelet = tmp / "kubelet"

    def request(self, pod: str = "p1", **context: str) -> csi_pb2.NodePublishVolumeRequest:
        parent = self.kubelet / "pods" / pod / "volumes" / "kubernetes.io~csi" / "model"
        parent.mkdir(parents=True, exist_ok=True)
        ctx = {"artifact": "qwen", "artifactUID": "uid-1", "manifestDigest": self.digest}
        ctx.update(context)
        ctx.update({"csi.storage.k8s.io/pod.namespace": "team-a",
                    "csi.storage.k8s.io/ephemeral": "true"})
        return csi_pb2.NodePublishVolumeRequest(
            volume_id=f"csi-{pod}",
            target_path=str(parent / "mount"),
            volume_capability=csi_pb2.VolumeCapability(
                mount=csi_pb2.VolumeCapability.MountVolume(),
                access_mode=csi_pb2.VolumeCapability.AccessMode(
                mode=csi_pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER)),
            readonly=True,
            secrets={"token": "hf_secret_value"},
            volume_context=ctx,
        )


@pytest.fixture
async def harness(tmp_path: pathlib.Path) -> AsyncIterator[Harness]:
    digest = local.write_import(tmp_path / "imports", FILES)
    client = fakes.FakeClient([fakes.page([
        fakes.artifact_object(digest=digest),
        fakes.artifact_object("other", "team-b", digest=digest),
    ], "7")])
    mounter = fakes.FakeMounter()
    config = plugin.Config(node_name="node-1", endpoint=f"unix://{tmp_path}/csi.sock",
                           root=str(tmp_path / "cache"), kubelet_dir=str(tmp_path / "kubelet"),
                           import_dir=str(tmp_path / "imports"))
    running = await plugin.start(config, client=client, mount=mounter)
    async with grpc.aio.insecure_channel(f"unix:{tmp_path}/csi.sock") as channel:
        await running.informer.wait_synced()
        yield Harness(tmp_path, running, channel, client, mounter, digest)
    await running.stop(0)


async def _code(call: object) -> tuple[grpc.StatusCode, str]:
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as err:
        return err.code(), err.details() or ""
    return grpc.StatusCode.OK, ""


async def test_identity_and_node_info(harness: Harness) -> None:
    info = await harness.identity.GetPluginInfo(csi_pb2.GetPluginInfoRequest())
    assert info.name == "model.csi.gpustack.ai" and info.vendor_version
    caps = await harness.identity.GetPluginCapabilities(csi_pb2.GetPluginCapabilitiesRequest())
    assert list(caps.capabilities) == []
    probe = await harness.identity.Probe(csi_pb2.ProbeRequest())
    assert probe.ready.value
    assert (await harness.node.NodeGetInfo(csi_pb2.NodeGetInfoRequest())).node_id == "node-1"
    code, _ = await _code(harness.node.NodeStageVolume(csi_pb2.NodeStageVolumeRequest()))
    assert code == grpc.StatusCode.UNIMPLEMENTED


async def test_first_mount_materializes_then_mounts(harness: Harness) -> None:
    request = harness.request()
    code, message = await _code(harness.node.NodePublishVolume(request))
    assert code == grpc.StatusCode.ABORTED
    assert message.startswith(f"materializing {harness.digest}:") and "received" in message
    assert "hf_secret_value" not in message
    async with asyncio.timeout(5):
        while (await _code(harness.node.NodePublishVolume(request)))[0] != grpc.StatusCode.OK:
            await asyncio.sleep(0.01)
    assert list(harness.mounter.mounted) == [request.target_path]
    unpublish = csi_pb2.NodeUnpublishVolumeRequest(volume_id=request.volume_id,
                                                    target_path=request.target_path)
    await harness.node.NodeUnpublishVolume(unpublish)
    await harness.node.NodeUnpublishVolume(unpublish)
    assert harness.mounter.mounted == {}


async def test_missing_fields_are_invalid_argument(harness: Harness) -> None:
    for field in ("volume_id", "target_path", "volume_capability"):
        request = harness.request()
        request.ClearField(field)
        code, message = await _code(harness.node.NodePublishVolume(request))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and field in message
    code, _ = await _code(harness.node.NodeUnpublishVolume(
        csi_pb2.NodeUnpublishVolumeRequest(volume_id="v")))
    assert code == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_spoofed_namespace_is_overwritten_like_kubelet_does(harness: Harness) -> None:
    # team-b holds "other"; a team-a Pod naming team-b itself is still judged in team-a.
    spoof = {"csi.storage.k8s.io/pod.namespace": "team-b"}
    code, message = await _code(harness.node.NodePublishVolume(
        harness.request(artifact="other", **spoof)))
    assert code == grpc.StatusCode.PERMISSION_DENIED and "namespace 'team-a'" in message


async def _published(harness: Harness, pod: str = "p1") -> csi_pb2.NodePublishVolumeRequest:
    request = harness.request(pod)
    async with asyncio.timeout(5):
        while (await _code(harness.node.NodePublishVolume(request)))[0] != grpc.StatusCode.OK:
            await asyncio.sleep(0.01)
    return request


async def test_unexpected_failures_are_internal_not_unknown(harness: Harness) -> None:
    await _published(harness)
    harness.mounter.fail = RuntimeError("secret detail")
    code, message = await _code(harness.node.NodePublishVolume(harness.request("p2")))
    assert code == grpc.StatusCode.INTERNAL and "secret detail" not in message


async def test_symlink_targets_are_permission_denied_naming_the_rule(harness: Harness) -> None:
    victim = await _published(harness)
    outside = harness.tmp / "outside"
    outside.mkdir()
    publish = harness.request("p2")
    os.symlink(outside, publish.target_path)
    code, message = await _code(harness.node.NodePublishVolume(publish))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert "is a symlink; nothing below the kubelet directory may be a symlink" in message
    attack = harness.request("p3")
    os.symlink(victim.target_path, attack.target_path)
    code, message = await _code(harness.node.NodeUnpublishVolume(
        csi_pb2.NodeUnpublishVolumeRequest(volume_id="csi-p3", target_path=attack.target_path)))
    assert code == grpc.StatusCode.PERMISSION_DENIED and "is a symlink" in message
    assert list(harness.mounter.mounted) == [victim.target_path]


def test_outcome_messages() -> None:
    digest = "sha256:" + "0f" * 32
    downloading = interface.Progress(digest, interface.State.DOWNLOADING,
                                     int(2.1 * 2**30), int(15.2 * 2**30))
    assert str(node.outcome_error(downloading)) == (
        f"materializing {digest}: 2.1GiB of 15.2GiB received")
    full = interface.Progress(digest, interface.State.FAILED,
                              reason=interface.Reason.INSUFFICIENT_CAPACITY, message="full")
    assert type(node.outcome_error(full)).__name__ == "ResourceExhausted"
    denied = interface.Progress(digest, interface.State.FAILED,
                                reason=interface.Reason.ACCESS_DENIED, message="401")
    assert type(node.outcome_error(denied)).__name__ == "Unavailable"


async def test_volume_stats_are_advertised_and_answer_the_mounted_tree(harness: Harness) -> None:
    caps = await harness.node.NodeGetCapabilities(csi_pb2.NodeGetCapabilitiesRequest())
    rpc = csi_pb2.NodeServiceCapability.RPC
    assert [c.rpc.type for c in caps.capabilities] == [rpc.GET_VOLUME_STATS]
    request = await _published(harness)
    stats = await harness.node.NodeGetVolumeStats(csi_pb2.NodeGetVolumeStatsRequest(
        volume_id=request.volume_id, volume_path=request.target_path))
    by_unit = {u.unit: u for u in stats.usage}
    tree = harness.running.cache.published_path(harness.digest)
    files = [p for p in tree.rglob("*") if p.is_file()]
    blocks = sum(os.lstat(p).st_blocks * 512 for p in files)
    usage = by_unit[csi_pb2.VolumeUsage.BYTES]
    assert (usage.used, usage.total, usage.available) == (blocks, blocks, 0)
    assert blocks >= len(FILES["model.bin"])
    inodes = by_unit[csi_pb2.VolumeUsage.INODES]
    assert inodes.used == inodes.total == len(list(tree.rglob("*"))) + 1
    # Not published there (never, or any more): NotFound; a malformed request: InvalidArgument.
    other = harness.request("p2")
    code, message = await _code(harness.node.NodeGetVolumeStats(
        csi_pb2.NodeGetVolumeStatsRequest(volume_id="csi-p2", volume_path=other.target_path)))
    assert code == grpc.StatusCode.NOT_FOUND and "no volume is published" in message
    outside = "/etc/passwd"
    code, _ = await _code(harness.node.NodeGetVolumeStats(
        csi_pb2.NodeGetVolumeStatsRequest(volume_id="csi-x", volume_path=outside)))
    assert code == grpc.StatusCode.NOT_FOUND
    for missing in ("volume_id", "volume_path"):
        asked = csi_pb2.NodeGetVolumeStatsRequest(volume_id="v", volume_path=request.target_path)
        asked.ClearField(missing)
        code, message = await _code(harness.node.NodeGetVolumeStats(asked))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and missing in message
    await harness.node.NodeUnpublishVolume(csi_pb2.NodeUnpublishVolumeRequest(
        volume_id=request.volume_id, target_path=request.target_path))
    code, _ = await _code(harness.node.NodeGetVolumeStats(csi_pb2.NodeGetVolumeStatsRequest(
        volume_id=request.volume_id, volume_path=request.target_path)))
    assert code == grpc.StatusCode.NOT_FOUND
