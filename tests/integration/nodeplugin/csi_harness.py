"""The CSI plugin's integration harness: the plugin process, a kubelet-like gRPC client,
artifacts in the real API server, and mount-table helpers. Fixtures are in ``conftest.py``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from devkit import fixturehub
from devkit.harness import apiserver as support
from hub import config as hub_config
from hub import huggingface, listing
from nodeplugin.cache import refs
from nodeplugin.csi.gen import csi_pb2, csi_pb2_grpc

REPO = pathlib.Path(__file__).resolve().parents[3]
MNT_DETACH = 2
START_TIMEOUT = 20.0
GROUP = "/apis/worker.gpustack.ai/v1"

async def hub_digest(hub: fixturehub.Hub, repo: str, commit: str,
                     token: str | None = None, *, ignore: tuple[str, ...] = ()) -> str:
    """The manifest digest of ``repo`` at ``commit`` (without what ``ignore`` matches),
    computed here from the hub's listing (independently of the plugin)."""
    client = hub_config.make_client(hub_config.HubConfig(huggingface_endpoint=hub.endpoint))
    try:
        source = huggingface.HuggingFace(client, hub.endpoint)
        return (await listing.manifest_for(source, repo, commit, (), ignore, token=token))[2]
    finally:
        await client.aclose()


def mounts_under(directory: pathlib.Path) -> list[str]:
    base = str(directory.resolve())
    return [
        m.mount_point
        for m in refs.parse_mountinfo(refs.read_mountinfo())
        if m.mount_point == base or m.mount_point.startswith(base + "/")
    ]


def unmount_all_under(directory: pathlib.Path) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    for _ in range(4):
        points = mounts_under(directory)
        if not points:
            return
        for point in sorted(points, key=len, reverse=True):
            libc.umount2(os.fsencode(point), MNT_DETACH)


# --- the kubelet side -------------------------------------------------------------------------
LAGGING_REFUSALS = ("no ModelArtifact", "is not Resolved=True", "has UID", "resolved to")
"""Refusals that only mean the plugin's artifact copy is older than what the test wrote."""


class Kubelet:
    """Drives publish/unpublish the way kubelet does for an inline ephemeral CSI volume."""

    def __init__(self, socket: pathlib.Path, kubelet_dir: pathlib.Path) -> None:
        self.kubelet_dir = kubelet_dir
        self.channel = grpc.insecure_channel(f"unix:{socket}")
        self.node = csi_pb2_grpc.NodeStub(self.channel)
        self.identity = csi_pb2_grpc.IdentityStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def target(self, pod_uid: str, volume: str = "gpustack-model") -> pathlib.Path:
        return (self.kubelet_dir / "pods" / pod_uid / "volumes" / "kubernetes.io~csi" / volume
                / "mount")

    def publish_request(
        self,
        *,
        namespace: str,
        pod_uid: str,
        attributes: Mapping[str, str],
        secrets: Mapping[str, str] | None = None,
        volume: str = "gpustack-model",
        pod_name: str | None = None,
        service_account: str = "default",
    ) -> csi_pb2.NodePublishVolumeRequest:
        target = self.target(pod_uid, volume)
        target.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
        context = dict(attributes)
        # kubelet merges its Pod keys OVER the volume's attributes (podInfoOnMount: true).
        context.update({
            "csi.storage.k8s.io/pod.name": pod_name or f"pod-{pod_uid}",
            "csi.storage.k8s.io/pod.namespace": namespace,
            "csi.storage.k8s.io/pod.uid": pod_uid,
            "csi.storage.k8s.io/serviceAccount.name": service_account,
            "csi.storage.k8s.io/ephemeral": "true",
        })
        handle = "csi-" + hashlib.sha256((pod_uid + volume).encode()).hexdigest()
        return csi_pb2.NodePublishVolumeRequest(
            volume_id=handle,
            target_path=str(target),
            volume_capability=csi_pb2.VolumeCapability(
                mount=csi_pb2.VolumeCapability.MountVolume(),
                access_mode=csi_pb2.VolumeCapability.AccessMode(
                mode=csi_pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER),
            ),
            readonly=True,
            secrets=dict(secrets or {}),
            volume_context=context,
        )

    def publish(self, request: csi_pb2.NodePublishVolumeRequest) -> tuple[grpc.StatusCode, str]:
        try:
            self.node.NodePublishVolume(request, timeout=30)
        except grpc.RpcError as err:
            return err.code(), err.details() or ""
        return grpc.StatusCode.OK, ""

    def publish_until_ok(
        self, request: csi_pb2.NodePublishVolumeRequest, timeout: float = 20.0
    ) -> list[tuple[grpc.StatusCode, str]]:
        """Retry like kubelet (without its long backoff) while the answer is not final."""
        seen: list[tuple[grpc.StatusCode, str]] = []
        deadline = time.monotonic() + timeout
        while True:
            outcome = self.publish(request)
            seen.append(outcome)
            if outcome[0] not in (grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE):
                return seen
            if time.monotonic() > deadline:
                raise AssertionError(f"publish still not done after {timeout}s: {seen[-3:]}")
            time.sleep(0.05)

    def publish_once_seen(
        self, request: csi_pb2.NodePublishVolumeRequest, timeout: float = 20.0
    ) -> tuple[grpc.StatusCode, str]:
        """The first answer given once the plugin's informer has caught up with the API.

        A test that just created or resolved an artifact races the plugin's watch: until the
        event arrives the plugin (correctly) answers Unavailable, or PermissionDenied because its
        copy has no such artifact or an older status. Those answers are retried; any other is
        returned, so a real refusal still reaches the test (after ``timeout`` the lagging answer
        is returned as it is)."""
        deadline = time.monotonic() + timeout
        while True:
            code, message = self.publish(request)
            lagging = code == grpc.StatusCode.UNAVAILABLE or (
                code == grpc.StatusCode.PERMISSION_DENIED and any(
                    phrase in message for phrase in LAGGING_REFUSALS))
            if not lagging or time.monotonic() > deadline:
                return code, message
            time.sleep(0.05)

    def unpublish(self, target: pathlib.Path | str, volume_id: str = "csi-x") -> None:
        self.node.NodeUnpublishVolume(
            csi_pb2.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=str(target)),
            timeout=30,
        )


# --- the plugin process -----------------------------------------------------------------------
class PluginProcess:
    def __init__(self, base: pathlib.Path, kubeconfig: pathlib.Path, *,
                 import_dir: pathlib.Path | None, extra_args: Sequence[str]) -> None:
        self.base = base
        self.root = base / "cache"
        self.kubelet_dir = base / "kubelet"
        self.socket = base / "csi" / "csi.sock"
        self.kubeconfig = kubeconfig
        self.import_dir = import_dir
        self.extra_args = list(extra_args)
        self.log_file = base / "plugin.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._kubelets: list[Kubelet] = []
        self.kubelet_dir.mkdir(parents=True, exist_ok=True)

    def command(self) -> list[str]:
        command = [
            sys.executable, "-m", "nodeplugin", "--node-name", "node-1",
            "--endpoint", f"unix://{self.socket}", "--root", str(self.root),
            "--kubelet-dir", str(self.kubelet_dir), "--kubeconfig", str(self.kubeconfig),
            "--log-level", "DEBUG", "--secure-port", "0",
        ]  # fmt: skip
        if self.import_dir is not None:
            command += ["--import-dir", str(self.import_dir)]
        return command + self.extra_args

    def start(self) -> PluginProcess:
        with self.log_file.open("ab") as log:
            log.write(b"--- start\n")
            log.flush()
            self.process = subprocess.Popen(
                self.command(), cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"plugin exited {self.process.returncode}:\n{self.log()}")
            if self.socket.exists():
                kubelet = Kubelet(self.socket, self.kubelet_dir)
                try:
                    kubelet.identity.Probe(csi_pb2.ProbeRequest(), timeout=2)
                    kubelet.close()
                    return self
                except grpc.RpcError:
                    kubelet.close()
            time.sleep(0.05)
        raise RuntimeError(f"plugin did not serve in {START_TIMEOUT}s:\n{self.log()}")

    def kubelet(self) -> Kubelet:
        kubelet = Kubelet(self.socket, self.kubelet_dir)
        self._kubelets.append(kubelet)
        return kubelet

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self, *, hard: bool = True) -> PluginProcess:
        self.kill() if hard else self.stop()
        return self.start()

    def close(self) -> None:
        for kubelet in self._kubelets:
            kubelet.close()
        self.kill()

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-20000:]
        except FileNotFoundError:
            return ""


# --- artifacts in the API ---------------------------------------------------------------------
class ArtifactApi:
    def __init__(self, server: support.RunningServer) -> None:
        self.server = server

    def create(self, namespace: str, name: str, source: dict[str, Any] | None = None
               ) -> dict[str, Any]:
        body = {
            "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"source": source or {"huggingFace": {"repository": f"org/{name}"}}},
        }
        with self.server.client() as client:
            response = client.post(f"{GROUP}/namespaces/{namespace}/modelartifacts", json=body)
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        return created

    def resolve(self, obj: dict[str, Any], digest: str, *, resolved: bool = True
                ) -> dict[str, Any]:
        """Write the status as the worker through the worker-only status path."""
        meta = obj["metadata"]
        obj = dict(obj)
        obj["status"] = {
            "resolved": {"revision": "c" * 40, "manifestDigest": digest, "digestSource": "Hub",
                         "fileCount": 1, "sizeBytes": 1},
            "conditions": [{
                "type": "Resolved", "status": "True" if resolved else "False",
                "reason": "Resolved" if resolved else "SourceUnavailable",
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
            }],
        }
        path = f"{GROUP}/namespaces/{meta['namespace']}/modelartifacts/{meta['name']}/status"
        with self.server.client(token=self.server.worker_token) as client:
            response = client.put(path, json=obj)
        assert response.status_code == 200, response.text
        updated: dict[str, Any] = response.json()
        return updated

    def resolved(self, namespace: str, name: str, digest: str) -> dict[str, Any]:
        return self.resolve(self.create(namespace, name), digest)
