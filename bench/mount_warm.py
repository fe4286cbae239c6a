"""mount-warm: 1,000 NodePublishVolume calls of a published digest, 50 at a time, each to a new
target, then 1,000 NodeUnpublishVolume; baseline: the same calls against a no-op servicer. Also
against today's plugin (``today``: the plugin before issue 34, which checked no tree before a
mount; ``bench.start_trees`` runs it), on a cache and kubelet directory of its own, as
``mount-warm-today``.

The plugin runs as its own process against the real standalone API server, with real bind mounts
(root needed). ``python -m bench.mount_warm noop|floor SOCKET BASE`` is a baseline's servicer
process: ``noop`` answers at once (the target's baseline); ``floor`` does only the kernel work the
CSI spec leaves to every plugin (``mkdir`` and one bind; ``umount2`` and ``rmdir``), so the
plugin's figure against it is what its own checks and records cost (reported, not a target).

Each phase runs in 5 interleaved rounds of 200 calls (plugin, no-op, floor, plugin, ...; the order
rotated each round): the figures are the p99s of all 1,000 calls pooled over the rounds, and each
round's own p99s give the per-round ratios and their spread.

Where the kubelet directory lives (``BENCH_KUBELET_FS``):

- ``ext4-nojournal`` (the default): an ext4 made like this machine's own disk (no journal;
  ``mkfs.ext4 -O ^has_journal``, defaults otherwise), fresh for each run, loop-mounted from an
  image in ``/dev/shm``. Fresh, because on an ext4 without a journal each new inode (every
  target's ``mkdir``) first scans past the inodes deleted in the last one to five minutes
  (``recently_deleted`` in ext4's ``find_inode_bit``), and each run's own cleanup deletes about
  15,000 directories: on a shared filesystem one run's figure depended on the run before it
  (a ``mkdir`` cost 40-570 us of CPU). In memory, so that the kernel's ext4 code does the work
  of every ``mkdir``, ``rmdir`` and mount while this virtual machine's disk is not measured (as
  the download benchmarks serve from memory to measure the plugin, not the hub).
- ``ext4``: the same, journaled (``mkfs.ext4``'s defaults, as a node's ``/var/lib/kubelet``
  usually is): every ``mkdir`` and ``rmdir`` also opens a journal handle, and the journal's
  commits hold one up now and then (5-11 ms under this load, about once a second, whichever
  servicer's round it falls in).
- ``ext4-disk``: the journaled one with its image on the workspace's disk: the commits then
  wait on that disk through the loop device (a ``mkdir`` held 10-15 ms now and then).
- ``here``: the workspace's own filesystem, shared with everything else on the machine.

Each image has its inode tables and journal written at ``mkfs`` time, as on a filesystem made
long ago (not by a kernel thread in the background during the run). Without ``/dev/shm`` the
image goes beside the workspace. ``docs/performance.md`` has the figures of all four.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import ctypes.util
import hashlib
import os
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
from openapi import anchors, reasons, resources, sources, volume, wire
from openapi.kinds import modelartifact

REPO = pathlib.Path(__file__).resolve().parents[1]
CALLS = 1000
CONCURRENCY = 50
GROUP = f"/apis/{resources.GROUP_VERSION}"


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
    from devkit.harness import apiserver  # the same harness the integration tests use

    server = apiserver.start(base / "apiserver")
    try:
        yield server
    finally:
        server.stop()


def resolved_artifact(server: Any, namespace: str, name: str, digest: str) -> str:
    """Create and resolve an artifact (status written as the worker); returns its UID."""
    body = {"apiVersion": resources.GROUP_VERSION, "kind": resources.MODEL_ARTIFACT.kind,
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"source": {sources.HUGGING_FACE: {"repository": f"org/{name}"}}}}
    with server.client() as client:
        obj = client.post(f"{GROUP}/namespaces/{namespace}/modelartifacts", json=body).json()
    obj["status"] = {
        "resolved": modelartifact.Resolved(revision="c" * 40, manifestDigest=digest,
                                           digestSource=anchors.DIGEST_FROM_HUB, fileCount=1,
                                           sizeBytes=1),
        "conditions": [wire.Condition(type=reasons.RESOLVED, status=wire.TRUE,
                                      reason=reasons.RESOLVED, message="",
                                      lastTransitionTime="2026-01-01T00:00:00Z")],
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
        volume_context={**volume.context(volume.attributes(name, uid, digest)),
                        volume.POD_NAMESPACE: namespace, volume.EPHEMERAL: "true"},
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


class _Floor(csi_pb2_grpc.NodeServicer):  # type: ignore[misc]
    """What the CSI spec leaves to every plugin, and nothing else: publish creates the target and
    binds a read-only tree on it (one bind, from a read-only mount), unpublish unmounts and
    removes it. No checks, no records: the floor a Python plugin's own work stands on."""

    def __init__(self, tree: bytes) -> None:
        self._tree = tree
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

    async def NodePublishVolume(self, request: Any, context: Any) -> Any:
        os.mkdir(request.target_path, 0o750)
        if self._libc.mount(self._tree, os.fsencode(request.target_path), None, mounter.MS_BIND,
                            None) != 0:
            raise OSError(ctypes.get_errno(), "bind")
        return csi_pb2.NodePublishVolumeResponse()

    async def NodeUnpublishVolume(self, request: Any, context: Any) -> Any:
        if self._libc.umount2(os.fsencode(request.target_path), 0) != 0:
            raise OSError(ctypes.get_errno(), "unmount")
        os.rmdir(request.target_path)
        return csi_pb2.NodeUnpublishVolumeResponse()


class _NoopIdentity(csi_pb2_grpc.IdentityServicer):  # type: ignore[misc]
    async def Probe(self, request: Any, context: Any) -> Any:
        return csi_pb2.ProbeResponse()


def _floor_tree(base: pathlib.Path) -> bytes:
    """A small tree seen through a read-only, nosuid, nodev bind of it, for the floor to bind."""
    tree, seen = base / "floor-tree", base / "floor-view"
    tree.mkdir()
    (tree / "model.bin").write_bytes(b"\x01" * 65536)
    seen.mkdir()
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    for source, flags in ((bytes(tree), mounter.MS_BIND),
                          (None, mounter.MS_BIND | mounter.MS_REMOUNT | mounter.MS_RDONLY
                           | mounter.MS_NOSUID | mounter.MS_NODEV)):
        if libc.mount(source, bytes(seen), None, flags, None) != 0:
            raise OSError(ctypes.get_errno(), "floor view")
    return bytes(seen)


async def _serve(socket: str, node: Any) -> None:
    server = grpc.aio.server()
    csi_pb2_grpc.add_NodeServicer_to_server(node, server)
    csi_pb2_grpc.add_IdentityServicer_to_server(_NoopIdentity(), server)
    server.add_insecure_port(f"unix:{socket}")
    await server.start()
    await server.wait_for_termination()


KUBELET_FILESYSTEMS = ("ext4-nojournal", "ext4", "ext4-disk", "here")
RAM = pathlib.Path("/dev/shm")


@contextlib.contextmanager
def kubelet_filesystem(directory: pathlib.Path) -> Iterator[str]:
    """Make ``directory`` the kubelet directory on the filesystem ``BENCH_KUBELET_FS`` names;
    yields that name (the figure depends on it)."""
    kind = os.environ.get("BENCH_KUBELET_FS", "ext4-nojournal")
    if kind not in KUBELET_FILESYSTEMS:
        raise SystemExit(f"BENCH_KUBELET_FS must be one of {', '.join(KUBELET_FILESYSTEMS)}, "
                         f"not {kind!r}")
    directory.mkdir(parents=True, exist_ok=True)
    if kind == "here":
        yield kind
        return
    beside = kind == "ext4-disk" or not RAM.is_dir()
    with tempfile.TemporaryDirectory(prefix="bench-kubelet-",
                                     dir=directory.parent if beside else RAM) as images:
        image = pathlib.Path(images) / "kubelet-fs.img"
        with image.open("wb") as f:
            f.truncate(512 << 20)
        features = ["-O", "^has_journal"] if kind == "ext4-nojournal" else []
        subprocess.run(["mkfs.ext4", "-q", "-F", *features,
                        "-E", "lazy_itable_init=0,lazy_journal_init=0", str(image)], check=True)
        subprocess.run(["mount", "-o", "loop", str(image), str(directory)], check=True)
        try:
            yield kind if not beside or kind == "ext4-disk" else f"{kind} (image on disk)"
        finally:
            unmount_under(directory)
            if os.path.ismount(directory):
                subprocess.run(["umount", str(directory)], check=False)


ROUNDS = 5
"""The 1,000 calls run in rounds alternating with the baselines', so all see the same load on a
shared machine (each baseline servicer runs beside the plugin, in its own process)."""
BASELINES = ("noop", "floor")
SETTLE = 0.25
"""Seconds of quiet before each round, and each round's servicer order rotated: an unmounting
round leaves the kernel work to do after it (freeing the mounts, after an RCU grace period),
which would otherwise fall on whichever round comes next."""


async def _run(base: pathlib.Path) -> dict[str, Any]:
    import_dir = base / "imports"
    digest = local.write_import(import_dir, {"config.json": b"{}", "model.bin": b"\x01" * 65536})
    latencies: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    per_round: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(api_server(base))
        uid = resolved_artifact(server, "bench", "warm", digest)
        plugin_dir = base / "plugin"
        plugin_dir.mkdir()
        kubelet = plugin_dir / "kubelet"
        kubelet_fs = stack.enter_context(kubelet_filesystem(kubelet))
        sockets = {"plugin": plugin_dir / "csi.sock"}
        for name in BASELINES:
            sockets[name] = base / f"{name}.sock"
            servicer = subprocess.Popen([sys.executable, "-m", "bench.mount_warm", name,
                                         str(sockets[name]), str(base)], cwd=REPO)
            stack.callback(stop, servicer)
        process = start_plugin(plugin_dir, server.kubeconfig, import_dir)
        stack.callback(unmount_under, plugin_dir)
        stack.callback(stop, process)
        # today's plugin: its own cache, its kubelet directory inside the same filesystem
        today_dir = base / "today"
        (kubelet / "today").mkdir()
        sockets["today"] = today_dir / "csi.sock"
        today = subprocess.Popen(
            [sys.executable, "-m", "bench.start_trees", "today", "--node-name", "bench",
             "--endpoint", f"unix://{sockets['today']}", "--root", str(today_dir / "cache"),
             "--kubelet-dir", str(kubelet / "today"), "--kubeconfig", str(server.kubeconfig),
             "--import-dir", str(import_dir), "--log-level", "WARNING"], cwd=REPO)
        stack.callback(stop, today)
        for socket in sockets.values():
            await wait_serving(socket)
        for name in ("plugin", "today"):
            async with grpc.aio.insecure_channel(f"unix:{sockets[name]}") as channel:
                stub = csi_pb2_grpc.NodeStub(channel)
                warm = publish_request(kubelet if name == "plugin" else kubelet / name,
                                       "warm-up", "bench", "warm", uid, digest)
                await publish_until_ok(stub, warm)  # materialize once: now it is warm
                await stub.NodeUnpublishVolume(csi_pb2.NodeUnpublishVolumeRequest(
                    volume_id=warm.volume_id, target_path=warm.target_path))
        # The baselines' targets lie on the same filesystem as the plugin's.
        requests = {name: [publish_request(kubelet / name if name != "plugin" else kubelet,
                                           f"pod-{i}", "bench", "warm", uid, digest)
                           for i in range(CALLS)] for name in sockets}
        share = CALLS // ROUNDS
        names = list(sockets)
        # All 1,000 publishes (1,000 live mounts each), then all unpublishes, each phase in
        # rounds alternating between the plugin and the baselines, the same calls to each.
        for phase in ("publish", "unpublish"):
            for r in range(ROUNDS):
                batch = slice(r * share, (r + 1) * share)
                for name in names[r % len(names):] + names[:r % len(names)]:
                    await asyncio.sleep(SETTLE)
                    timed = await _timed(sockets[name], phase, requests[name][batch])
                    latencies[(name, phase)] += timed
                    per_round[(name, phase)].append(p99(timed))
    figures: dict[str, Any] = {"kubelet_fs": kubelet_fs}
    for (name, phase), values in latencies.items():
        prefix = "" if name == "plugin" else f"{name}_"
        figures[f"{prefix}p99_{phase}_ms"] = p99(values)
        figures[f"{prefix}p50_{phase}_ms"] = statistics.median(values)
        figures[f"{prefix}p99_{phase}_rounds_ms"] = [round(v, 3) for v in per_round[(name, phase)]]
    return figures


def main() -> None:
    with workspace() as base:
        figures = asyncio.run(_run(base))
    params = {"calls": CALLS, "concurrency": CONCURRENCY, "rounds": ROUNDS,
              "target": "p99 <= 1.5x the no-op servicer's (ratio >= 0.67)",
              **{k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}}

    def rounds(phase: str, baseline: str) -> list[tuple[float, float]]:
        return list(zip(figures[f"p99_{phase}_rounds_ms"],
                        figures[f"{baseline}_p99_{phase}_rounds_ms"], strict=True))

    result.report(
        "mount-warm", figures["p99_publish_ms"], "ms", figures["noop_p99_publish_ms"],
        higher_is_better=False, params=params, rounds=rounds("publish", "noop"),
    )
    result.report(
        "mount-warm-unpublish", figures["p99_unpublish_ms"], "ms",
        figures["noop_p99_unpublish_ms"], higher_is_better=False, params=params,
        rounds=rounds("unpublish", "noop"),
    )
    # Against today's plugin (no tree checked before a mount): what the check costs a warm mount.
    for phase, name in (("publish", "mount-warm-today"), ("unpublish", "mount-warm-today-unp")):
        result.report(name, figures[f"p99_{phase}_ms"], "ms", figures[f"today_p99_{phase}_ms"],
                      higher_is_better=False, params=params, rounds=rounds(phase, "today"))
    # Not targets: the plugin against the floor of the kernel work any plugin must do.
    for phase, name in (("publish", "mount-warm-floor"), ("unpublish", "mount-warm-floor-unp")):
        result.report(name, figures[f"p99_{phase}_ms"], "ms", figures[f"floor_p99_{phase}_ms"],
                      higher_is_better=False, params=params, rounds=rounds(phase, "floor"))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "noop":
        asyncio.run(_serve(sys.argv[2], _Noop()))
    elif len(sys.argv) == 4 and sys.argv[1] == "floor":
        asyncio.run(_serve(sys.argv[2], _Floor(_floor_tree(pathlib.Path(sys.argv[3])))))
    else:
        main()
