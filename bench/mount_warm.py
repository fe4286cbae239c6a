"""mount-warm: 1,000 NodePublishVolume calls of a published digest, 50 at a time, each to a new
target, then 1,000 NodeUnpublishVolume; baseline: the same calls against a no-op servicer.

The plugin runs as its own process against the real standalone API server, with real bind mounts
(root needed). ``python -m bench.mount_warm noop SOCKET`` is the baseline's servicer process.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import grpc

from bench import result
from nodeplugin import errors
from nodeplugin.cache import mounter, refs, targets
from nodeplugin.csi.gen import csi_pb2, csi_pb2_grpc
from nodeplugin.materialize import local

REPO = pathlib.Path(__file__).resolve().parents[1]
CALLS = 1000
CONCURRENCY = 50
GROUP = "/apis/worker.gpustack.ai/v1"


# --- shared harness (restart_refs uses it too) --------------------------------------------------
def start_plugin(base: pathlib.Path, kubeconfig: pathlib.Path, import_dir: pathlib.Path
                 ) -> subprocess.Popen[bytes]:
    command = [
        sys.executable, "-m", "nodeplugin", "--node-name", "bench",
        "--endpoint", f"unix://{base}/csi.sock", "--root", str(base / "cache"),
        "--kubelet-dir", str(base / "kubelet"), "--kubeconfig", str(kubeconfig),
        "--import-dir", str(import_dir), "--log-level", "WARNING",
    ]  # fmt: skip
    log = (base / "plugin.log").open("ab")
    return subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)


def stop(process: subprocess.Popen[bytes], *, hard: bool = False) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
        process.wait(15)


def unmount_under(base: pathlib.Path) -> None:
    linux = mounter.LinuxMounter()
    rules = targets.Targets(str(base.resolve()))
    prefix = str(base.resolve()) + "/"
    for _ in range(4):
        points = [m.mount_point for m in refs.parse_mountinfo(refs.read_mountinfo())
                  if m.mount_point.startswith(prefix)]
        if not points:
            return
        for point in sorted(points, key=len, reverse=True):
            with contextlib.suppress(OSError, errors.PluginError), rules.open(point) as opened:
                if opened is not None:
                    linux.unmount(opened)


@contextlib.contextmanager
def workspace() -> Iterator[pathlib.Path]:
    with tempfile.TemporaryDirectory(prefix="bench-csi-") as tmp:
        base = pathlib.Path(tmp)
        try:
            yield base
        finally:
            unmount_under(base)


@contextlib.contextmanager
def api_server(base: pathlib.Path) -> Iterator[Any]:
    sys.path.insert(0, str(REPO))
    from tests.support import apiserver  # the same harness the integration tests use

    server = apiserver.start(base / "apiserver")
    try:
        yield server
    finally:
        server.stop()


def resolved_artifact(server: Any, namespace: str, name: str, digest: str) -> str:
    """Create and resolve an artifact (status written as the worker); returns its UID."""
    body = {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"source": {"huggingFace": {"repository": f"org/{name}"}}}}
    with server.client() as client:
        obj = client.post(f"{GROUP}/namespaces/{namespace}/modelartifacts", json=body).json()
    obj["status"] = {
        "resolved": {"revision": "c" * 40, "manifestDigest": digest, "digestSource": "Hub",
                     "fileCount": 1, "sizeBytes": 1},
        "conditions": [{"type": "Resolved", "status": "True", "reason": "Resolved",
                        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }
    path = f"{GROUP}/namespaces/{namespace}/modelartifacts/{name}/status"
    with server.client(token=server.worker_token) as client:
        response = client.put(path, json=obj)
        response.raise_for_status()
    return str(obj["metadata"]["uid"])


def publish_request(kubelet_dir: pathlib.Path, pod: str, namespace: str, name: str, uid: str,
                    digest: str) -> csi_pb2.NodePublishVolumeRequest:
    parent = kubelet_dir / "pods" / pod / "volumes" / "kubernetes.io~csi" / "model"
    parent.mkdir(parents=True, exist_ok=True)
    return csi_pb2.NodePublishVolumeRequest(
        volume_id="csi-" + hashlib.sha256(pod.encode()).hexdigest(),
        target_path=str(parent / "mount"),
        volume_capability=csi_pb2.VolumeCapability(
            mount=csi_pb2.VolumeCapability.MountVolume(),
            access_mode=csi_pb2.VolumeCapability.AccessMode(
                mode=csi_pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER)),
        readonly=True,
        volume_context={"artifact": name, "artifactUID": uid, "manifestDigest": digest,
                        "csi.storage.k8s.io/pod.namespace": namespace,
                        "csi.storage.k8s.io/ephemeral": "true"},
    )


async def wait_serving(socket: pathlib.Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if socket.exists():
            try:
                async with grpc.aio.insecure_channel(f"unix:{socket}") as channel:
                    await csi_pb2_grpc.IdentityStub(channel).Probe(csi_pb2.ProbeRequest(),
                                                                   timeout=1)
                    return
            except grpc.aio.AioRpcError:
                pass
        await asyncio.sleep(0.005)
    raise RuntimeError(f"{socket} did not serve within {timeout}s")


async def publish_until_ok(stub: Any, request: csi_pb2.NodePublishVolumeRequest,
                           timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            await stub.NodePublishVolume(request, timeout=30)
            return
        except grpc.aio.AioRpcError as err:
            retry = err.code() in (grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE)
            if not retry or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.02)


# --- the measurement ----------------------------------------------------------------------------
async def _timed(socket: pathlib.Path, phase: str,
                 requests: list[csi_pb2.NodePublishVolumeRequest]) -> list[float]:
    """Latencies (ms) of publishing (or unpublishing) every request, ``CONCURRENCY`` at once."""
    async with grpc.aio.insecure_channel(f"unix:{socket}") as channel:
        node = csi_pb2_grpc.NodeStub(channel)
        gate = asyncio.Semaphore(CONCURRENCY)

        async def timed(request: csi_pb2.NodePublishVolumeRequest) -> float:
            async with gate:
                began = time.perf_counter()
                if phase == "publish":
                    await node.NodePublishVolume(request, timeout=30)
                else:
                    await node.NodeUnpublishVolume(csi_pb2.NodeUnpublishVolumeRequest(
                        volume_id=request.volume_id, target_path=request.target_path),
                        timeout=30)
                return (time.perf_counter() - began) * 1000

        return list(await asyncio.gather(*(timed(r) for r in requests)))


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


class _Noop(csi_pb2_grpc.NodeServicer):  # type: ignore[misc]
    async def NodePublishVolume(self, request: Any, context: Any) -> Any:
        return csi_pb2.NodePublishVolumeResponse()

    async def NodeUnpublishVolume(self, request: Any, context: Any) -> Any:
        return csi_pb2.NodeUnpublishVolumeResponse()


class _NoopIdentity(csi_pb2_grpc.IdentityServicer):  # type: ignore[misc]
    async def Probe(self, request: Any, context: Any) -> Any:
        return csi_pb2.ProbeResponse()


async def _serve_noop(socket: str) -> None:
    server = grpc.aio.server()
    csi_pb2_grpc.add_NodeServicer_to_server(_Noop(), server)
    csi_pb2_grpc.add_IdentityServicer_to_server(_NoopIdentity(), server)
    server.add_insecure_port(f"unix:{socket}")
    await server.start()
    await server.wait_for_termination()


ROUNDS = 5
"""The 1,000 calls run in rounds alternating with the baseline's, so both see the same load
on a shared machine (the no-op servicer runs beside the plugin, in its own process)."""


async def _run(base: pathlib.Path) -> dict[str, Any]:
    import_dir = base / "imports"
    digest = local.write_import(import_dir, {"config.json": b"{}", "model.bin": b"\x01" * 65536})
    noop_socket = base / "noop.sock"
    noop = subprocess.Popen([sys.executable, "-m", "bench.mount_warm", "noop", str(noop_socket)],
                            cwd=REPO)
    publish: list[float] = []
    unpublish: list[float] = []
    base_publish: list[float] = []
    base_unpublish: list[float] = []
    try:
        with api_server(base) as server:
            uid = resolved_artifact(server, "bench", "warm", digest)
            plugin_dir = base / "plugin"
            plugin_dir.mkdir()
            process = start_plugin(plugin_dir, server.kubeconfig, import_dir)
            try:
                socket = plugin_dir / "csi.sock"
                await wait_serving(socket)
                await wait_serving(noop_socket)
                kubelet = plugin_dir / "kubelet"
                async with grpc.aio.insecure_channel(f"unix:{socket}") as channel:
                    stub = csi_pb2_grpc.NodeStub(channel)
                    warm = publish_request(kubelet, "warm-up", "bench", "warm", uid, digest)
                    await publish_until_ok(stub, warm)  # materialize once: now it is warm
                    await stub.NodeUnpublishVolume(csi_pb2.NodeUnpublishVolumeRequest(
                        volume_id=warm.volume_id, target_path=warm.target_path))
                ours = [publish_request(kubelet, f"pod-{i}", "bench", "warm", uid, digest)
                        for i in range(CALLS)]
                noops = [publish_request(base / "noop-kubelet", f"pod-{i}", "bench", "warm",
                                         uid, digest) for i in range(CALLS)]
                share = CALLS // ROUNDS
                # All 1,000 publishes (1,000 live mounts), then all unpublishes, each phase in
                # rounds alternating with the same calls to the no-op servicer.
                for phase, mine, theirs in (("publish", publish, base_publish),
                                            ("unpublish", unpublish, base_unpublish)):
                    for r in range(ROUNDS):
                        batch = slice(r * share, (r + 1) * share)
                        mine += await _timed(socket, phase, ours[batch])
                        theirs += await _timed(noop_socket, phase, noops[batch])
            finally:
                stop(process)
                unmount_under(plugin_dir)
    finally:
        stop(noop)
    return {
        "p99_publish_ms": p99(publish), "p50_publish_ms": statistics.median(publish),
        "p99_unpublish_ms": p99(unpublish), "p50_unpublish_ms": statistics.median(unpublish),
        "noop_p99_publish_ms": p99(base_publish),
        "noop_p50_publish_ms": statistics.median(base_publish),
        "noop_p99_unpublish_ms": p99(base_unpublish),
        "noop_p50_unpublish_ms": statistics.median(base_unpublish),
    }


def main() -> None:
    with workspace() as base:
        figures = asyncio.run(_run(base))
    params = {"calls": CALLS, "concurrency": CONCURRENCY, "rounds": ROUNDS,
              "target": "p99 <= 1.5x the no-op servicer's (ratio >= 0.67)",
              **{k: round(v, 3) for k, v in figures.items()}}
    result.report(
        "mount-warm", figures["p99_publish_ms"], "ms", figures["noop_p99_publish_ms"],
        higher_is_better=False, params=params,
    )
    result.report(
        "mount-warm-unpublish", figures["p99_unpublish_ms"], "ms",
        figures["noop_p99_unpublish_ms"], higher_is_better=False, params=params,
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "noop":
        asyncio.run(_serve_noop(sys.argv[2]))
    else:
        main()
