"""The node store's integration harness (root): the cache on a small tmpfs the test mounts, trees
published the plugin's way, the assembled plugin in-process with real bind mounts, a manual
clock, the fake node-store API and a fake artifact list, and a kubelet-like gRPC client."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import pathlib
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import grpc

from devkit import clock as clocks
from devkit import trees
from nodeplugin import plugin
from nodeplugin.cache import layout
from nodeplugin.csi.gen import csi_pb2, csi_pb2_grpc
from nodeplugin.materialize import interface
from tests.unit.nodeplugin import fakes

MIB = 1 << 20
NAMESPACE = "team-a"


def mount_tmpfs(path: pathlib.Path, size_mib: int) -> pathlib.Path:
    """A fresh tmpfs of ``size_mib`` at ``path`` (the ``mount_guard`` fixture unmounts it)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0755", "tmpfs",
                    str(path)], check=True)
    return path


publish_tree = trees.publish_tree


def write_usage(cache: layout.Layout, used: Mapping[str, datetime.datetime]) -> None:
    """The plugin's usage records, as a plugin that ran before would have left them."""
    body = {"digests": {d: {"lastUsedTime": t.strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "referenced": False} for d, t in used.items()}}
    cache.state.mkdir(parents=True, exist_ok=True)
    (cache.state / "usage.json").write_text(json.dumps(body))


def used_bytes(path: pathlib.Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def total_bytes(path: pathlib.Path) -> int:
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize


class Writing:
    """A materializer whose attempts never end: each ``ensure`` holds a partial directory that
    it keeps "writing" (a running attempt, as collection sees it)."""

    def __init__(self, cache: layout.Layout) -> None:
        self._cache = cache
        self._running: dict[str, interface.Progress] = {}
        self.partials: dict[str, pathlib.Path] = {}

    def start(self, digest: str, size: int) -> pathlib.Path:
        partial = self._cache.new_partial(digest)
        (partial.path / "part.bin").write_bytes(b"\0" * size)
        (partial.path / layout.RESUMABLE).write_text("{}")
        self._running[digest] = interface.Progress(digest, interface.State.DOWNLOADING, size,
                                                   size * 2)
        self.partials[digest] = partial.path
        return partial.path

    async def ensure(self, request: interface.Request) -> interface.Progress:
        return self._running.get(request.digest) or interface.Progress(
            request.digest, interface.State.FAILED, reason=interface.Reason.SOURCE_UNAVAILABLE,
            message="this test materializes nothing")

    def running(self) -> list[interface.Progress]:
        return list(self._running.values())

    @property
    def downloaded_bytes(self) -> int:
        return 0

    def add_done_callback(self, callback: interface.DoneCallback) -> None:
        return None

    async def close(self) -> None:
        return None


class Node:
    """The assembled plugin with its fakes and a kubelet-like client."""

    def __init__(self, base: pathlib.Path, running: plugin.Plugin, api: fakes.FakeStoreApi,
                 clock: clocks.ManualClock, kubelet_dir: pathlib.Path) -> None:
        self.base = base
        self.plugin = running
        self.api = api
        self.clock = clock
        self.kubelet_dir = kubelet_dir
        self.channel = grpc.aio.insecure_channel(running.config.endpoint)
        self.csi = csi_pb2_grpc.NodeStub(self.channel)

    @property
    def cache(self) -> layout.Layout:
        return self.plugin.cache

    def target(self, pod: str) -> pathlib.Path:
        target = (self.kubelet_dir / "pods" / pod / "volumes" / "kubernetes.io~csi" / "model"
                  / "mount")
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def request(self, pod: str, digest: str, artifact: str) -> csi_pb2.NodePublishVolumeRequest:
        return csi_pb2.NodePublishVolumeRequest(
            volume_id=f"csi-{pod}",
            target_path=str(self.target(pod)),
            volume_capability=csi_pb2.VolumeCapability(
                mount=csi_pb2.VolumeCapability.MountVolume()),
            readonly=True,
            volume_context={
                "artifact": artifact, "artifactUID": f"uid-{artifact}", "manifestDigest": digest,
                "csi.storage.k8s.io/pod.namespace": NAMESPACE,
                "csi.storage.k8s.io/pod.name": f"pod-{pod}",
                "csi.storage.k8s.io/ephemeral": "true",
            },
        )  # fmt: skip

    async def mount(self, pod: str, digest: str, artifact: str) -> tuple[grpc.StatusCode, str]:
        try:
            await self.csi.NodePublishVolume(self.request(pod, digest, artifact), timeout=30)
        except grpc.aio.AioRpcError as err:
            return err.code(), err.details() or ""
        return grpc.StatusCode.OK, ""

    async def unmount(self, pod: str) -> None:
        await self.csi.NodeUnpublishVolume(csi_pb2.NodeUnpublishVolumeRequest(
            volume_id=f"csi-{pod}", target_path=str(self.target(pod))), timeout=30)

    def give_spec(self, spec: dict[str, Any], *, generation: int = 1) -> None:
        self.api.put(fakes.node_store(spec=spec, generation=generation))

    async def close(self) -> None:
        await self.channel.close()
        await self.plugin.stop(0)


@contextlib.asynccontextmanager
async def started(
    base: pathlib.Path,
    *,
    cache_dir: pathlib.Path,
    kubelet_dir: pathlib.Path,
    artifacts: Sequence[tuple[str, str] | tuple[str, str, dict[str, Any]]] = (),
    materializer: Callable[[layout.Layout], interface.Materializer] | None = None,
    imports: bool = True,
    read_mountinfo: Callable[[], str] | None = None,
    api: fakes.FakeStoreApi | None = None,
    clock: clocks.ManualClock | None = None,
    mount: Any = None,
    **config_options: Any,
) -> AsyncIterator[Node]:
    """The plugin over ``cache_dir``; ``artifacts`` are ``(name, digest)`` resolved in
    ``team-a`` (or ``(name, digest, spec)``, with more fields of its spec: its patterns);
    ``imports`` False takes content from the hub of ``config_options`` instead of
    ``base/imports``."""
    objects = []
    for item in artifacts:
        made = fakes.artifact_object(item[0], NAMESPACE, uid=f"uid-{item[0]}", digest=item[1])
        made["spec"].update(item[2] if len(item) > 2 else {})  # type: ignore[misc]
        objects.append(made)
    client = fakes.FakeClient([fakes.page(objects, "5")])
    clock = clock or clocks.ManualClock(datetime.datetime.now(datetime.UTC))
    api = api or fakes.FakeStoreApi()
    kubelet_dir.mkdir(parents=True, exist_ok=True)
    config = plugin.Config(
        node_name="node-1", endpoint=f"unix://{base}/csi.sock", root=str(cache_dir),
        kubelet_dir=str(kubelet_dir), import_dir=str(base / "imports") if imports else None,
        **config_options,
    )
    options: dict[str, Any] = {}
    if read_mountinfo is not None:
        options["read_mountinfo"] = read_mountinfo
    inner = materializer(layout.Layout(cache_dir)) if materializer is not None else None
    if mount is not None:
        options["mount"] = mount
    running = await plugin.start(config, client=client, store_api=api, clock=clock,
                                 materializer=inner, **options)
    node = Node(base, running, api, clock, kubelet_dir)
    try:
        await running.informer.wait_synced()
        await running.stock.settle()
        yield node
    finally:
        await node.close()
