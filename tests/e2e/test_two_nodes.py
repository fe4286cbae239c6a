"""Pods land where the weights are, on two real nodes (issue 37): the rig's node A and ``vm2``
(``node-ns-up``: its own network and mount namespaces, containerd, kubelet and cache directory,
joining the same kube-apiserver; the chart's DaemonSet runs a plugin on each).

A ModelPrefetch warms A; ten Pods naming only the artifact, with room on both nodes, each get
the filled attributes and the preferred term, all run on A, and the hub serves no byte. With A
cordoned ten more run on B, which downloads the model once. One cluster for the module; skipped,
naming what is missing, where the machine has no ``node-ns-up``."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from devkit import fixturehub
from devkit.realnode import deploy, objects, release_values, rig, twonodes
from openapi import placement

pytestmark = [pytest.mark.integration, pytest.mark.root]

TENANT = "place-a"
ARTIFACT = "placed"
REPOSITORY = "e2e/two-nodes"
FILES: dict[str, bytes | int] = {"config.json": b'{"model_type": "two-nodes"}\n',
                                 "model.safetensors": 4 << 20}
SIZE = sum(len(c) if isinstance(c, bytes) else c for c in FILES.values())
REPLICAS = 10
NODE_B = twonodes.NODE_B

_json = objects.json_of


@pytest.fixture(scope="module")
def cluster(images: dict[str, Any], timings: dict[str, float]) -> Iterator[rig.Rig]:
    lacking = rig.missing_more_nodes()
    if lacking:
        pytest.skip("a second real node needs: " + ", ".join(lacking))
    node = rig.Rig()
    try:
        twonodes.up(node, images, timings)
        yield node
    finally:
        started = time.monotonic()
        node.down()
        timings["down"] = time.monotonic() - started
        print("\n[e2e two nodes] timings (s): "
              + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()), file=sys.stderr)


@pytest.fixture(scope="module")
def release(cluster: rig.Rig, hub: fixturehub.Hub, timings: dict[str, float]) -> str:
    started = time.monotonic()
    deploy.install(cluster, twonodes.values(hub, cluster), "values-two-nodes.yaml")
    timings["helm install"] = time.monotonic() - started
    return release_values.RELEASE


@pytest.fixture(scope="module")
def installed(cluster: rig.Rig, hub: fixturehub.Hub, release: str) -> rig.Rig:
    hub.add_repo(REPOSITORY, FILES)
    twonodes.wait_both_ready(cluster)
    cluster.kubectl("create", "namespace", TENANT)
    return cluster


def _replica(name: str) -> str:
    return objects.pod(name, TENANT, "cat /models/config.json && exec sleep 3600",
                       attributes={"artifact": ARTIFACT}, label="placed")


def _placed(cluster: rig.Rig, names: list[str]) -> dict[str, str]:
    """Each Pod's node once all run."""
    def running() -> dict[str, str] | None:
        pods = {p["metadata"]["name"]: p for p in _json(
            cluster, "get", "pods", "-n", TENANT, "-l", "e2e=placed")["items"]}
        if not all(pods.get(n, {}).get("status", {}).get("phase") == "Running" for n in names):
            return None
        return {n: pods[n]["spec"]["nodeName"] for n in names}

    found = cluster.wait(f"{len(names)} Pods Running", running, timeout=240, namespace=TENANT)
    assert isinstance(found, dict)
    return found


def test_ten_pods_naming_only_the_artifact_run_on_the_warm_node(
        installed: rig.Rig, hub: fixturehub.Hub) -> None:
    node_a, node_b = installed.node_name, installed.extra[NODE_B]
    attributes = objects.artifact(installed, TENANT, ARTIFACT, REPOSITORY)
    twonodes.prefetch(installed, TENANT, "warm", ARTIFACT, node_a)
    served = hub.bytes_served(REPOSITORY)
    assert served == SIZE, served
    names = [f"on-a-{i}" for i in range(REPLICAS)]
    for name in names:
        installed.apply(_replica(name))
    for name in names:
        pod = _json(installed, "get", "pod", name, "-n", TENANT)
        [model] = [v for v in pod["spec"]["volumes"] if v.get("csi")]
        assert model["csi"]["volumeAttributes"] == attributes
        assert pod["spec"]["affinity"]["nodeAffinity"][placement.PREFERRED] == [
            placement.preferred_term([node_a])]
    assert set(_placed(installed, names).values()) == {node_a}, node_b
    assert hub.bytes_served(REPOSITORY) == served  # no hub byte for ten Pods


def test_with_the_warm_node_cordoned_they_run_on_the_other_which_downloads_once(
        installed: rig.Rig, hub: fixturehub.Hub) -> None:
    node_a, node_b = installed.node_name, installed.extra[NODE_B]
    served = hub.bytes_served(REPOSITORY)
    installed.kubectl("cordon", node_a)
    try:
        names = [f"on-b-{i}" for i in range(REPLICAS)]
        for name in names:
            installed.apply(_replica(name))
        assert set(_placed(installed, names).values()) == {node_b}
        assert hub.bytes_served(REPOSITORY) == served + SIZE  # one copy, for ten Pods
    finally:
        installed.kubectl("uncordon", node_a)
