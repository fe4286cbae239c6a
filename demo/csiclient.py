"""A small CSI client over the plugin's unix socket: publish and unpublish the way kubelet does
for an inline ephemeral volume (kubelet's Pod keys written over the volume's attributes)."""

from __future__ import annotations

import dataclasses
import pathlib

import grpc

from nodeplugin.csi.gen import csi_pb2, csi_pb2_grpc
from openapi import volume


@dataclasses.dataclass(frozen=True)
class Answer:
    code: grpc.StatusCode
    message: str

    @property
    def ok(self) -> bool:
        return bool(self.code == grpc.StatusCode.OK)


class Kubelet:
    def __init__(self, socket: pathlib.Path, kubelet_dir: pathlib.Path) -> None:
        self.kubelet_dir = kubelet_dir
        self.channel = grpc.insecure_channel(f"unix:{socket}")
        self.node = csi_pb2_grpc.NodeStub(self.channel)
        self.identity = csi_pb2_grpc.IdentityStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def driver(self) -> str:
        info = self.identity.GetPluginInfo(csi_pb2.GetPluginInfoRequest(), timeout=10)
        return str(info.name)

    def target(self, pod_uid: str) -> pathlib.Path:
        return (self.kubelet_dir / "pods" / pod_uid / "volumes" / "kubernetes.io~csi"
                / "gpustack-model" / "mount")  # fmt: skip

    def publish(self, *, namespace: str, pod_uid: str,
                attributes: volume.VolumeAttributes) -> Answer:
        target = self.target(pod_uid)
        target.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
        context = {**volume.context(attributes),
                   **volume.kubelet_context(namespace=namespace, pod_name="demo", pod_uid=pod_uid)}
        request = csi_pb2.NodePublishVolumeRequest(
            volume_id=f"csi-demo-{pod_uid}",
            target_path=str(target),
            volume_capability=csi_pb2.VolumeCapability(
                mount=csi_pb2.VolumeCapability.MountVolume(),
                access_mode=csi_pb2.VolumeCapability.AccessMode(
                    mode=csi_pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER),
            ),
            readonly=True,
            volume_context=context,
        )  # fmt: skip
        try:
            self.node.NodePublishVolume(request, timeout=30)
        except grpc.RpcError as err:
            return Answer(err.code(), err.details() or "")
        return Answer(grpc.StatusCode.OK, "")

    def unpublish(self, pod_uid: str) -> Answer:
        request = csi_pb2.NodeUnpublishVolumeRequest(
            volume_id=f"csi-demo-{pod_uid}", target_path=str(self.target(pod_uid)))
        try:
            self.node.NodeUnpublishVolume(request, timeout=30)
        except grpc.RpcError as err:
            return Answer(err.code(), err.details() or "")
        return Answer(grpc.StatusCode.OK, "")
