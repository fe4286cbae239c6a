"""The warm-up Pod: rendered to mount the artifact's CSI volume under a restricted context,
owned by the prefetch and bound to its node; one per cold node, a failure reported and retried."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, cast

import pytest

from controllers import config as settings
from controllers.prefetches import plan as prefetchplan
from controllers.prefetches import warmup
from controllers.runtime import informer
from tests.support import clock as manual

DIGEST = "sha256:" + "ab" * 32
PREFETCH: dict[str, Any] = {
    "metadata": {"name": "warm", "namespace": "team-a", "uid": "p-uid"},
    "spec": {"artifactRef": {"name": "qwen"}, "targets": {"nodeNames": ["node-1"]}},
}
ARTIFACT = prefetchplan.Artifact(DIGEST, uid="a-uid", secret="hf-token")


def test_the_pod_mounts_the_artifacts_volume_restricted_owned_and_bound() -> None:
    pod = warmup.render(PREFETCH, ARTIFACT, "node-1", "registry.local/tools:1")
    metadata, spec = pod["metadata"], pod["spec"]
    assert metadata["namespace"] == "team-a"
    assert metadata["name"] == warmup.pod_name("warm", "node-1")
    assert len(warmup.pod_name("x" * 253, "n" * 253)) <= 63
    assert metadata["labels"][warmup.COMPONENT_LABEL] == warmup.COMPONENT
    (owner,) = metadata["ownerReferences"]
    assert owner == {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelPrefetch",
                     "name": "warm", "uid": "p-uid", "controller": True,
                     "blockOwnerDeletion": False}
    assert spec["nodeName"] == "node-1" and spec["restartPolicy"] == "Never"
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
    delivery = warmup.WarmupPods(cast(informer.Informer, pods), create, delete, clock)
    assert await delivery.warm(PREFETCH, ARTIFACT, ["node-1", "node-2"]) == {}
    assert [p["spec"]["nodeName"] for p in created] == ["node-1", "node-2"]
    assert created[0]["spec"]["containers"][0]["image"] == settings.DEFAULT_WARMUP_IMAGE
    for pod in created:
        pods.objects[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = pod
    failed = created[1]
    failed["status"] = {"phase": "Failed", "containerStatuses": [
        {"state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}
    created.clear()
    failures = await delivery.warm(PREFETCH, ARTIFACT, ["node-1", "node-2"])
    assert created == [] and list(failures) == ["node-2"]
    assert "exit code 1 (Error)" in failures["node-2"]
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
                                 retry_seconds=30.0)
    await delivery.warm(PREFETCH, ARTIFACT, ["node-1"])
    assert "Evicted" in (await delivery.warm(PREFETCH, ARTIFACT, ["node-1"]))["node-1"]
    clock.advance(29.0)
    await delivery.warm(PREFETCH, ARTIFACT, ["node-1"])
    assert deleted == []
    clock.advance(1.0)
    await delivery.warm(PREFETCH, ARTIFACT, ["node-1"])
    assert deleted == [("team-a", warmup.pod_name("warm", "node-1"))]


def test_the_flag_parses_a_duration_defaulting_to_five_minutes() -> None:
    parser = argparse.ArgumentParser()
    settings.add_flags(parser, serving=False)
    assert parser.parse_args([]).prefetch_warmup_retry_interval == 300.0
    parsed = parser.parse_args(["--prefetch-warmup-retry-interval=1s"])
    assert parsed.prefetch_warmup_retry_interval == 1.0
    with pytest.raises(SystemExit):
        parser.parse_args(["--prefetch-warmup-retry-interval=0s"])
