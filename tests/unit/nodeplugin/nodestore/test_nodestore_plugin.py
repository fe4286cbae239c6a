"""The assembled plugin's node store on a manual clock (fake mounter, fake APIs): its own status
writes never trigger another report, a quiet node writes nothing, a mount is reported at once,
collection runs every five minutes, a recreated object gets the whole status again, and so does
one whose status the server lost (its store went back; the watch answered 410 or 504)."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

import kube
from devkit import clock as clocks
from nodeplugin import plugin
from nodeplugin.csi.gen import csi_pb2, csi_pb2_grpc
from nodeplugin.nodestore import collect, reporter
from tests.unit.nodeplugin import fakes

FILES = {"config.json": b"{}", "model.bin": b"\x03" * 4096}


class Node:
    def __init__(self, running: plugin.Plugin, api: fakes.FakeStoreApi,
                 clock: clocks.ManualClock, digest: str, tmp: pathlib.Path) -> None:
        self.plugin = running
        self.api = api
        self.clock = clock
        self.digest = digest
        self.tmp = tmp

    async def tick(self, seconds: float = reporter.TICK_SECONDS) -> None:
        self.clock.advance(seconds)
        await _settle(50)

    def request(self, pod: str) -> csi_pb2.NodePublishVolumeRequest:
        parent = self.tmp / "kubelet" / "pods" / pod / "volumes" / "kubernetes.io~csi" / "m"
        parent.mkdir(parents=True, exist_ok=True)
        return csi_pb2.NodePublishVolumeRequest(
            volume_id=f"csi-{pod}", target_path=str(parent / "mount"),
            volume_capability=csi_pb2.VolumeCapability(
                mount=csi_pb2.VolumeCapability.MountVolume()),
            volume_context={"artifact": "qwen", "artifactUID": "uid-1",
                            "manifestDigest": self.digest,
                            "csi.storage.k8s.io/pod.namespace": "team-a",
                            "csi.storage.k8s.io/ephemeral": "true"},
        )  # fmt: skip


@pytest.fixture
async def node(tmp_path: pathlib.Path) -> AsyncIterator[Node]:
    clock = clocks.ManualClock()
    async with fakes.started_plugin(tmp_path, FILES, clock) as (running, api, digest):
        yield Node(running, api, clock, digest, tmp_path)


async def _until(predicate: Any) -> None:
    async with asyncio.timeout(10):
        while not predicate():
            await asyncio.sleep(0.001)


async def test_own_writes_never_trigger_a_report_and_a_quiet_node_writes_nothing(
    node: Node,
) -> None:
    node.api.put(fakes.node_store())
    await _until(lambda: len(node.api.writes) == 1)
    assert node.api.writes[0]["observedGeneration"] == 1
    store = node.plugin.store
    assert store.reporter is not None
    for _ in range(int(300 / reporter.TICK_SECONDS)):  # five minutes of fake time
        await node.tick()
    assert len(node.api.writes) == 1
    assert store.reporter.writes == 1


async def test_a_mount_is_reported_at_once(node: Node) -> None:
    node.api.put(fakes.node_store())
    await _until(lambda: len(node.api.writes) == 1)
    async with grpc.aio.insecure_channel(node.plugin.config.endpoint) as channel:
        stub = csi_pb2_grpc.NodeStub(channel)
        request = node.request("p1")
        async with asyncio.timeout(10):
            while True:
                try:
                    await stub.NodePublishVolume(request)
                    break
                except grpc.aio.AioRpcError:
                    await asyncio.sleep(0.01)
        # No tick needed: the import's end and the reference are announced.
        await _until(lambda: any(m.get("referenced") for m in node.api.writes[-1]["models"]))
        entry = node.api.writes[-1]["models"][0]
        assert (entry["digest"], entry["state"]) == (node.digest, "Ready")


async def test_collection_runs_every_five_minutes(node: Node) -> None:
    node.api.put(fakes.node_store())
    await _until(lambda: node.plugin.collector.runs >= 1)  # the applied spec asked for one
    runs = node.plugin.collector.runs
    # Once it waits again, for five minutes from now:
    await _until(lambda: collect.PERIOD_SECONDS in node.clock.pending())
    await node.tick(collect.PERIOD_SECONDS - 1)
    assert node.plugin.collector.runs == runs
    await node.tick(1)
    await _until(lambda: node.plugin.collector.runs == runs + 1)


async def test_a_recreated_object_gets_the_whole_status_again(node: Node) -> None:
    node.api.put(fakes.node_store(uid="first"))
    await _until(lambda: len(node.api.writes) == 1)
    node.api.delete()
    await _until(lambda: not node.plugin.store.state.present)
    node.api.put(fakes.node_store(uid="second"))
    await _until(lambda: len(node.api.writes) == 2)
    assert node.api.writes[1] == node.api.writes[0] | {
        "conditions": node.api.writes[1]["conditions"]}


@pytest.mark.parametrize("answer", [
    kube.Expired(410, "Expired", "too old resource version: 176 (1177)"),
    kube.TooLargeResourceVersion(504, "Timeout",
                                 "Timeout: Too large resource version: 176, current: 6")])
async def test_a_store_that_went_back_gets_the_whole_status_again(
        node: Node, answer: kube.KubeError) -> None:
    # the same object (UID, generation) without the status the plugin wrote: the server's store
    # was replaced by an older copy or an empty one the worker filled again, so the watch the
    # plugin held fails; the relist finds it, and the whole status is written at once
    node.api.put(fakes.node_store())
    await _until(lambda: len(node.api.writes) == 1)
    node.api.roll(fakes.node_store(), answer)
    await _until(lambda: len(node.api.writes) == 2)
    assert node.api.writes[1] == node.api.writes[0] | {
        "conditions": node.api.writes[1]["conditions"]}
    assert node.api.store is not None and node.api.store["status"] == node.api.writes[1]


async def test_a_status_emptied_by_someone_else_is_written_again(node: Node) -> None:
    node.api.put(fakes.node_store())
    await _until(lambda: len(node.api.writes) == 1)
    node.api.put(fakes.node_store())  # same UID and generation, no status
    await _until(lambda: len(node.api.writes) == 2)
    assert node.api.writes[1]["observedGeneration"] == 1


async def _settle(rounds: int = 20) -> None:
    """Let the event loop run what became ready (no wall-clock waiting)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
