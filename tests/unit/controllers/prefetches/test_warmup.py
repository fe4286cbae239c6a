"""The warm-up Pod: rendered to mount the artifact's CSI volume under a restricted context,
owned by the prefetch and pinned to its node by affinity (the scheduler's filters hold), with the
tolerations placement gives; one per cold node, none where placement holds it, a failure or the
scheduler's refusal reported and retried."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, cast

import pytest

from controllers import config as settings
from controllers.prefetches import placement, warmup
from controllers.prefetches import plan as prefetchplan
from controllers.runtime import informer
from devkit import clock as manual
from openapi import keys

DIGEST = "sha256:" + "ab" * 32
PREFETCH: dict[str, Any] = {
    "metadata": {"name": "warm", "namespace": "team-a", "uid": "p-uid"},
    "spec": {"artifactRef": {"name": "qwen"}, "targets": {"nodeNames": ["node-1"]}},
}
ARTIFACT = prefetchplan.Artifact(DIGEST, uid="a-uid", secret="hf-token")
GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


class _Where:
    """``warmup.Placement`` as placement would answer: ``held`` nodes get no Pod."""

    def __init__(self, held: dict[str, prefetchplan.Hold] | None = None,
                 tolerations: list[dict[str, Any]] | None = None) -> None:
        self.held = held or {}
        self.given = tolerations or []

    async def synced(self) -> None:
        return None

    def tolerations(self, node: str) -> list[dict[str, Any]] | prefetchplan.Hold:
        return self.held.get(node) or list(self.given)


def _node_of(pod: dict[str, Any]) -> str:
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (term,) = terms
    (field,) = term["matchFields"]
    assert (field["key"], field["operator"]) == ("metadata.name", "In")
    (node,) = field["values"]
    return str(node)


def test_the_pod_mounts_the_artifacts_volume_restricted_owned_and_placed_by_affinity() -> None:
    pod = warmup.render(PREFETCH, ARTIFACT, "node-1", "registry.local/tools:1", [GPU])
    metadata, spec = pod["metadata"], pod["spec"]
    assert metadata["namespace"] == "team-a"
    assert metadata["name"] == warmup.pod_name("warm", "node-1")
    assert len(warmup.pod_name("x" * 253, "n" * 253)) <= 63
    assert metadata["labels"][keys.COMPONENT] == keys.WARMUP
    (owner,) = metadata["ownerReferences"]
    assert owner == {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelPrefetch",
                     "name": "warm", "uid": "p-uid", "controller": True,
                     "blockOwnerDeletion": False}
    # the scheduler places it (taints, cordons, resources hold), on node-1 alone
    assert "nodeName" not in spec and _node_of(pod) == "node-1"
    assert spec["tolerations"] == [GPU]  # what placement gives, nothing more
    assert spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    assert container["image"] == "registry.local/tools:1"
    assert container["securityContext"] == {"allowPrivilegeEscalation": False,
                                            "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    (volume,) = spec["volumes"]
    assert volume["csi"] == {
        "driver": "model.csi.gpustack.ai", "readOnly": True,
        "volumeAttributes": {"artifact": "qwen", "artifactUID": "a-uid",
                             "manifestDigest": DIGEST},
        "nodePublishSecretRef": {"name": "hf-token"}}
    assert not any("kueue" in key for key in metadata["labels"])
    public = warmup.render(PREFETCH, prefetchplan.Artifact(DIGEST, uid="a-uid"), "n", "i")
    assert "nodePublishSecretRef" not in public["spec"]["volumes"][0]["csi"]
    assert public["spec"]["tolerations"] == []  # none given: it tolerates no taint


class _Pods:
    def __init__(self) -> None:
        self.synced = asyncio.Event()
        self.synced.set()
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((namespace, name))


async def test_one_pod_per_cold_node_and_a_failure_is_reported_then_retried() -> None:
    pods = _Pods()
    created: list[dict[str, Any]] = []
    deleted: list[tuple[str, str]] = []

    async def create(pod: dict[str, Any]) -> dict[str, Any]:
        created.append(pod)
        return pod

    async def delete(namespace: str, name: str) -> None:
        deleted.append((namespace, name))

    clock = manual.ManualClock()
    delivery = warmup.WarmupPods(cast(informer.Informer, pods), create, delete, clock, _Where())
    assert await delivery.warm(PREFETCH, ARTIFACT, ["node-1", "node-2"]) == {}
    assert [_node_of(p) for p in created] == ["node-1", "node-2"]
    assert created[0]["spec"]["containers"][0]["image"] == settings.DEFAULT_WARMUP_IMAGE
    for pod in created:
        pods.objects[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = pod
    failed = created[1]
    failed["status"] = {"phase": "Failed", "containerStatuses": [
        {"state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}
    created.clear()
    failures = await delivery.warm(PREFETCH, ARTIFACT, ["node-1", "node-2"])
    assert created == [] and list(failures) == ["node-2"]
    assert failures["node-2"].reason == "DeliveryFailed" and failures["node-2"].phase == "Failed"
    assert "exit code 1 (Error)" in failures["node-2"].message
    assert deleted == []
    clock.advance(settings.DEFAULT_WARMUP_RETRY)
    await delivery.warm(PREFETCH, ARTIFACT, ["node-2"])
    assert deleted == [("team-a", failed["metadata"]["name"])]
    # a Pod of an earlier prefetch of the same name is left to go with its owner
    other = {**PREFETCH, "metadata": {**PREFETCH["metadata"], "uid": "new-uid"}}
    assert await delivery.warm(other, ARTIFACT, ["node-1"]) == {} and created == []


async def test_the_retry_interval_is_the_setting() -> None:
    pods = _Pods()
    deleted: list[tuple[str, str]] = []

    async def create(pod: dict[str, Any]) -> dict[str, Any]:
        pods.objects[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = {
            **pod, "status": {"phase": "Failed", "reason": "Evicted"}}
        return pod

    async def delete(namespace: str, name: str) -> None:
        deleted.append((namespace, name))

    clock = manual.ManualClock()
    delivery = warmup.WarmupPods(cast(informer.Informer, pods), create, delete, clock,
                                 _Where(), retry_seconds=30.0)
    await delivery.warm(PREFETCH, ARTIFACT, ["node-1"])
    assert "Evicted" in (await delivery.warm(PREFETCH, ARTIFACT, ["node-1"]))["node-1"].message
    clock.advance(29.0)
    await delivery.warm(PREFETCH, ARTIFACT, ["node-1"])
    assert deleted == []
    clock.advance(1.0)
    await delivery.warm(PREFETCH, ARTIFACT, ["node-1"])
    assert deleted == [("team-a", warmup.pod_name("warm", "node-1"))]


def test_the_flag_parses_a_duration_defaulting_to_five_minutes() -> None:
    parser = argparse.ArgumentParser()
    settings.add_flags(parser)
    assert parser.parse_args([]).prefetch_warmup_retry_interval == 300.0
    parsed = parser.parse_args(["--prefetch-warmup-retry-interval=1s"])
    assert parsed.prefetch_warmup_retry_interval == 1.0
    with pytest.raises(SystemExit):
        parser.parse_args(["--prefetch-warmup-retry-interval=0s"])


async def test_a_held_node_gets_no_pod_and_says_why() -> None:
    pods = _Pods()
    created: list[dict[str, Any]] = []

    async def create(pod: dict[str, Any]) -> dict[str, Any]:
        created.append(pod)
        return pod

    async def delete(namespace: str, name: str) -> None:
        raise AssertionError("nothing to delete")

    hold = prefetchplan.Hold("TaintNotTolerated", "node-2 has the taint dedicated=infra:NoSchedule")
    where = _Where({"node-2": hold}, [GPU])
    delivery = warmup.WarmupPods(cast(informer.Informer, pods), create, delete,
                                 manual.ManualClock(), where)
    held = await delivery.warm(PREFETCH, ARTIFACT, ["node-1", "node-2"])
    assert held == {"node-2": hold}
    assert [_node_of(p) for p in created] == ["node-1"]
    assert created[0]["spec"]["tolerations"] == [GPU]


async def test_a_pod_the_scheduler_cannot_place_is_reported_then_made_again() -> None:
    pods = _Pods()
    deleted: list[tuple[str, str]] = []
    message = "0/3 nodes are available: 1 node(s) were unschedulable."

    async def create(pod: dict[str, Any]) -> dict[str, Any]:
        pods.objects[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = {
            **pod, "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": message}]}}
        return pod

    async def delete(namespace: str, name: str) -> None:
        deleted.append((namespace, name))
        pods.objects.pop((namespace, name))

    clock = manual.ManualClock()
    delivery = warmup.WarmupPods(cast(informer.Informer, pods), create, delete, clock,
                                 _Where(), retry_seconds=60.0)
    assert await delivery.warm(PREFETCH, ARTIFACT, ["node-1"]) == {}  # just made
    held = (await delivery.warm(PREFETCH, ARTIFACT, ["node-1"]))["node-1"]
    assert (held.phase, held.reason) == ("Failed", "Unschedulable")
    assert message in held.message and warmup.pod_name("warm", "node-1") in held.message
    clock.advance(60.0)
    await delivery.warm(PREFETCH, ARTIFACT, ["node-1"])  # not retried forever in silence:
    assert deleted == [("team-a", warmup.pod_name("warm", "node-1"))]  # made afresh next
    assert await delivery.warm(PREFETCH, ARTIFACT, ["node-1"]) == {}
    assert pods.objects  # a fresh Pod, with the placement of now


def test_the_scheduler_s_refusal_is_read_from_the_pod() -> None:
    pending = {"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/1 nodes are available: 1 Insufficient memory."}]}}
    assert "Insufficient memory" in placement.scheduling_failure(pending)
    assert placement.scheduling_failure({"status": {"phase": "Pending"}}) == ""
    assert placement.scheduling_failure({"status": {"phase": "Running"}}) == ""
    gated = {"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}}
    assert placement.scheduling_failure(gated) == ""
