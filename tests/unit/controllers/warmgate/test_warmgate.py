"""The warm-gate controller (``controllers.warmgate``): a gated Pod waits with one Event while a
digest is cold, is released in one patch (the required term, the gate and the label) once nodes
hold every digest, stays gated with a Warning when its artifact is gone or re-created, and is
looked at again when a node's entry for its digest changes."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import jsonpatch

from controllers.runtime import client as clients
from controllers.runtime import errors, informer
from controllers.warmgate import controller as warmgate
from devkit import clock as manual
from openapi import keys, placement, reasons, volume
from tests.unit.controllers.conftest import Events
from tests.unit.controllers.fakes import Listed

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
KEY = ("team", "web-0")


def artifact(name: str = "qwen", digest: str = DIGEST, uid: str = "uid-qwen") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team", "uid": uid},
            "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2-0.5B"}}},
            "status": {"resolved": {"manifestDigest": digest}}}


def gated_pod(*volumes: tuple[str, str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "web-0", "namespace": "team", "uid": "pod-uid",
                         "resourceVersion": "5",
                         "labels": {keys.WAITING_FOR_WARM_NODE: keys.REQUIRE_WARM_NODE_ON}},
            "spec": {"schedulingGates": [{"name": keys.WARM_NODE_GATE}],
                     "containers": [{"name": "c", "image": "busybox"}],
                     "volumes": [{"name": f"m{i}", "csi": {
                         "driver": volume.DRIVER, "volumeAttributes": {
                             volume.ARTIFACT: name, volume.ARTIFACT_UID: uid,
                             volume.MANIFEST_DIGEST: digest}}}
                         for i, (name, uid, digest) in enumerate(volumes)]}}


class Warm:
    def __init__(self) -> None:
        self.nodes: dict[str, list[str]] = {}
        self.listeners: list[Callable[[str], None]] = []

    def warm_nodes(self, digest: str) -> list[str]:
        return self.nodes.get(digest, [])

    def subscribe(self, listener: Callable[[str], None]) -> None:
        self.listeners.append(listener)


class Patcher:
    """Applies the JSON Patch to the Pod it holds, as kube-apiserver would (a failed test: 422)."""

    def __init__(self, pod: dict[str, Any]) -> None:
        self.pod = copy.deepcopy(pod)
        self.patches: list[list[dict[str, Any]]] = []

    async def patch_pod(self, namespace: str, name: str,
                        operations: list[dict[str, Any]]) -> None:
        self.patches.append(operations)
        try:
            self.pod = jsonpatch.apply_patch(self.pod, operations)
        except jsonpatch.JsonPatchTestFailed as exc:
            raise errors.ApiError(str(exc), code=422) from None


class World:
    def __init__(self, pod: dict[str, Any], artifacts: list[dict[str, Any]]) -> None:
        clock = manual.ManualClock()
        self.pods = informer.Informer(Listed({"pods": [pod]}), clients.PODS, clock)
        self.artifacts = informer.Informer(Listed({"modelartifacts": artifacts}),
                                           clients.MODEL_ARTIFACTS, clock)
        self.warm = Warm()
        self.events = Events()
        self.patcher = Patcher(pod)
        self.gate = warmgate.WarmGate(self.pods, self.patcher, self.warm, self.warm,
                                      self.artifacts, self.events, clock)

    async def __aenter__(self) -> World:
        self.tasks = [asyncio.create_task(self.pods.run()),
                      asyncio.create_task(self.artifacts.run())]
        await self.pods.synced.wait()
        await self.artifacts.synced.wait()
        return self

    async def __aexit__(self, *_: object) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def test_waits_with_one_event_then_is_released_once_a_node_is_warm() -> None:
    async def scenario() -> None:
        async with World(gated_pod(("qwen", "uid-qwen", DIGEST)), [artifact()]) as world:
            for _ in range(2):  # looked at twice while cold: one Event, no patch
                result = await world.gate.reconcile(KEY)
                assert result.requeue_after == warmgate.RECHECK_SECONDS
            assert world.patcher.patches == []
            ((kind, reason, message),) = world.events.seen
            assert (kind, reason) == ("Normal", reasons.WAITING_FOR_WARM_NODE)
            assert f"no node holds {DIGEST} Ready yet" in message
            assert keys.WARM_NODE_GATE in message
            # a node's entry for the digest changes: the Pod is queued again
            world.gate.controller.open()  # a run starts with every key: take it, finish it
            queue = world.gate.controller.queue
            assert await queue.get() == KEY and len(queue) == 0
            queue.done(KEY)
            world.warm.nodes[DIGEST] = ["node-b", "node-a"]
            for listener in world.warm.listeners:
                listener(DIGEST)
            assert await asyncio.wait_for(queue.get(), 10) == KEY
            assert (await world.gate.reconcile(KEY)).requeue_after is None
            released = world.patcher.pod
            assert released["spec"]["schedulingGates"] == []
            assert keys.WAITING_FOR_WARM_NODE not in released["metadata"]["labels"]
            assert released["spec"]["affinity"]["nodeAffinity"][placement.REQUIRED] == {
                "nodeSelectorTerms": [{"matchExpressions": [
                    placement.expression(["node-b", "node-a"])]}]}
            assert world.events.seen[-1][:2] == ("Normal", reasons.WARM_NODE_FOUND)
            assert "node-a, node-b" in world.events.seen[-1][2]
            assert world.gate.released == 1

    asyncio.run(scenario())


def test_every_digest_must_be_warm_before_the_release() -> None:
    async def scenario() -> None:
        pod = gated_pod(("qwen", "uid-qwen", DIGEST), ("llama", "uid-llama", OTHER))
        async with World(pod, [artifact(), artifact("llama", OTHER, "uid-llama")]) as world:
            world.warm.nodes[DIGEST] = ["node-a"]
            await world.gate.reconcile(KEY)
            assert world.patcher.patches == []
            assert f"no node holds {OTHER}" in world.events.seen[-1][2]
            world.warm.nodes[OTHER] = ["node-a"]
            await world.gate.reconcile(KEY)
            (term,) = world.patcher.pod["spec"]["affinity"]["nodeAffinity"][
                placement.REQUIRED]["nodeSelectorTerms"]
            assert term["matchExpressions"] == [placement.expression(["node-a"])] * 2

    asyncio.run(scenario())


def test_a_pod_whose_artifact_is_gone_or_recreated_stays_gated_with_a_warning() -> None:
    async def scenario() -> None:
        for artifacts, said in (([], "ModelArtifact 'qwen' is gone"),
                                ([artifact(uid="uid-new")], "was re-created (UID uid-new")):
            async with World(gated_pod(("qwen", "uid-qwen", DIGEST)), artifacts) as world:
                world.warm.nodes[DIGEST] = ["node-a"]
                assert (await world.gate.reconcile(KEY)).requeue_after is None
                assert world.patcher.patches == []
                ((kind, reason, message),) = world.events.seen
                assert (kind, reason) == ("Warning", reasons.MODEL_ARTIFACT_GONE)
                assert said in message and "stays gated" in message

    asyncio.run(scenario())


def test_a_pod_changed_since_it_was_read_is_looked_at_again() -> None:
    async def scenario() -> None:
        async with World(gated_pod(("qwen", "uid-qwen", DIGEST)), [artifact()]) as world:
            world.patcher.pod["metadata"]["resourceVersion"] = "6"  # changed in the API
            world.warm.nodes[DIGEST] = ["node-a"]
            assert (await world.gate.reconcile(KEY)).retry is True
            assert world.patcher.pod["spec"]["schedulingGates"] == [
                {"name": keys.WARM_NODE_GATE}]
            assert world.gate.released == 0

    asyncio.run(scenario())


def test_a_pod_without_the_gate_is_left_alone() -> None:
    async def scenario() -> None:
        pod = gated_pod(("qwen", "uid-qwen", DIGEST))
        pod["spec"]["schedulingGates"] = [{"name": "example.com/other"}]
        async with World(pod, [artifact()]) as world:
            world.warm.nodes[DIGEST] = ["node-a"]
            assert (await world.gate.reconcile(KEY)).requeue_after is None
            assert world.patcher.patches == [] and world.events.seen == []

    asyncio.run(scenario())
