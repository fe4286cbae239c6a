"""restart-refs: restart the plugin (kill -9, start) with 1,000 live bind mounts of 50 digests and
time it from spawn until it serves a publish (references rebuilt from mountinfo, artifacts listed).

Baseline in the same run: the same restart with no live mounts (same cache, same artifacts), so the
ratio shows what rebuilding 1,000 references costs. Target: serving in <= 2 s.

The two run in 3 interleaved rounds (with mounts, without, with, without ...): after each restart
with mounts the 1,000 are unmounted, and after each restart without they are published again
through the plugin (not timed). Reported: the medians of each side's rounds and each round's ratio.
"""

from __future__ import annotations

import asyncio
import pathlib
import statistics
import time
from typing import Any

import grpc

from bench import mount_warm, result
from nodeplugin.cache import refs
from nodeplugin.csi.gen import csi_pb2, csi_pb2_grpc
from nodeplugin.materialize import local

DIGESTS = 50
MOUNTS = 1000
ROUNDS = 3


def _live(kubelet: pathlib.Path) -> int:
    prefix = str(kubelet.resolve()) + "/"
    return sum(1 for m in refs.parse_mountinfo(refs.read_mountinfo())
               if m.mount_point.startswith(prefix))


async def _restart_until_serving(
    plugin_dir: pathlib.Path, server: Any, import_dir: pathlib.Path,
    probe: csi_pb2.NodePublishVolumeRequest, process: Any,
) -> tuple[float, Any]:
    mount_warm.stop(process, hard=True)
    began = time.perf_counter()
    process = mount_warm.start_plugin(plugin_dir, server.kubeconfig, import_dir)
    await mount_warm.wait_serving(plugin_dir / "csi.sock")
    async with grpc.aio.insecure_channel(f"unix:{plugin_dir}/csi.sock") as channel:
        await mount_warm.publish_until_ok(csi_pb2_grpc.NodeStub(channel), probe)
    return time.perf_counter() - began, process


async def _run(base: pathlib.Path) -> dict[str, Any]:
    import_dir = base / "imports"
    digests = [
        local.write_import(import_dir, {"config.json": b"{}", "model.bin": bytes([i]) * 4096})
        for i in range(DIGESTS)
    ]
    plugin_dir = base / "plugin"
    plugin_dir.mkdir()
    kubelet = plugin_dir / "kubelet"
    with mount_warm.api_server(base) as server:
        uids = [mount_warm.resolved_artifact(server, "bench", f"m{i}", d)
                for i, d in enumerate(digests)]
        requests = [
            mount_warm.publish_request(kubelet, f"pod-{n}", "bench", f"m{n % DIGESTS}",
                                       uids[n % DIGESTS], digests[n % DIGESTS])
            for n in range(MOUNTS)
        ]
        probe = mount_warm.publish_request(kubelet, "probe", "bench", "m0", uids[0], digests[0])
        process = mount_warm.start_plugin(plugin_dir, server.kubeconfig, import_dir)
        try:
            await mount_warm.wait_serving(plugin_dir / "csi.sock")
            async with grpc.aio.insecure_channel(f"unix:{plugin_dir}/csi.sock") as channel:
                stub = csi_pb2_grpc.NodeStub(channel)
                gate = asyncio.Semaphore(50)

                async def one(request: csi_pb2.NodePublishVolumeRequest) -> None:
                    async with gate:
                        await mount_warm.publish_until_ok(stub, request)

                await asyncio.gather(*(one(r) for r in requests))
                await one(probe)
                await stub.NodeUnpublishVolume(csi_pb2.NodeUnpublishVolumeRequest(
                    volume_id=probe.volume_id, target_path=probe.target_path))
            assert _live(kubelet) == MOUNTS
            loaded: list[float] = []
            empty: list[float] = []
            for r in range(ROUNDS):
                seconds, process = await _restart_until_serving(
                    plugin_dir, server, import_dir, probe, process)
                loaded.append(seconds)
                async with grpc.aio.insecure_channel(f"unix:{plugin_dir}/csi.sock") as channel:
                    await csi_pb2_grpc.NodeStub(channel).NodeUnpublishVolume(
                        csi_pb2.NodeUnpublishVolumeRequest(volume_id=probe.volume_id,
                                                           target_path=probe.target_path))
                assert _live(kubelet) == MOUNTS  # the rebuilt table stacked nothing
                mount_warm.unmount_under(kubelet)
                seconds, process = await _restart_until_serving(
                    plugin_dir, server, import_dir, probe, process)
                empty.append(seconds)
                mount_warm.unmount_under(kubelet)
                if r + 1 < ROUNDS:  # the next round's 1,000 mounts, through the plugin again
                    async with grpc.aio.insecure_channel(
                            f"unix:{plugin_dir}/csi.sock") as channel:
                        stub = csi_pb2_grpc.NodeStub(channel)
                        await asyncio.gather(*(one(request) for request in requests))
                    assert _live(kubelet) == MOUNTS
        finally:
            mount_warm.stop(process)
    return {"with_mounts_s": statistics.median(loaded), "no_mounts_s": statistics.median(empty),
            "rounds_with_mounts": [round(x, 3) for x in loaded],
            "rounds_no_mounts": [round(x, 3) for x in empty]}


def main() -> None:
    with mount_warm.workspace() as base:
        figures = asyncio.run(_run(base))
    result.report(
        "restart-refs", figures["with_mounts_s"], "s", figures["no_mounts_s"],
        higher_is_better=False,
        params={"mounts": MOUNTS, "digests": DIGESTS, "rounds": ROUNDS, "target_s": 2.0,
                **figures},
        rounds=list(zip(figures["rounds_with_mounts"], figures["rounds_no_mounts"], strict=True)),
    )


if __name__ == "__main__":
    main()
