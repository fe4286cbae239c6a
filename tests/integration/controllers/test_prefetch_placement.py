"""Warm-up Pods respect placement (issue 35, item 2), in cluster mode: the real API server with
the chart's args and RBAC over the fixture control plane, three nodes running the plugin (its
DaemonSet as the chart renders it: one wildcard toleration), and a tenant's ModelPrefetch
naming all three.

Before the fix every node got a Pod with ``spec.nodeName`` and a toleration of every taint, so a
tenant could place one on a dedicated node. Now: the plain node gets a Pod pinned by node
affinity with no toleration (the scheduler binds it); the node tainted ``dedicated=infra``
(which the plugin tolerates only by wildcard) gets none, and the status counts it failed for
that reason (``TaintNotTolerated``); the cordoned node gets a Pod the scheduler refuses, and once
the scheduler says so (``PodScheduled=False/Unschedulable``, written here as kube-scheduler
would: the fixture runs no scheduler) it is counted failed for that reason (``Unschedulable``).
The tenant's status names no node (issue 39): counts and the reasons' tally only.
``tests/e2e/test_two_nodes.py`` has the real scheduler's side.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from controllers.prefetches import warmup
from devkit import chartrbac, fixturehub, helm
from devkit.controlplane import ADMIN_TOKEN, ControlPlane, resources
from devkit.harness import clustermode
from devkit.harness.apiserver import free_port
from tests.integration.apiserver import cluster
from tests.support import pools, waiting

NS = helm.NAMESPACE
TENANT = "team-a"
DRIVER = "model.csi.gpustack.ai"
DEDICATED = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
CORDON = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
SCHEDULER_SAYS = ("0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't "
                  "match Pod's node affinity/selector.")
CONTAINER_FLAGS = ("--bind", "--port", "--data-dir", "--tls-cert-file", "--tls-private-key-file")


def _seed(cp: ControlPlane, docs: list[dict[str, Any]]) -> None:
    chartrbac.install(cp, docs)
    cp.add_token(clustermode.WORKER_TOKEN, clustermode.WORKER)
    cp.seed(resources.CONFIGMAPS, helm.one(docs, "ConfigMap"))
    daemonset = helm.one(docs, "DaemonSet")
    assert daemonset["spec"]["template"]["spec"]["tolerations"] == [{"operator": "Exists"}]
    cp.seed(resources.DAEMONSETS, {**daemonset, "metadata": {**daemonset["metadata"],
                                                             "uid": "ds-uid"}})
    nodes = {"node-plain": {}, "node-infra": {"taints": [DEDICATED]},
             "node-cordoned": {"unschedulable": True, "taints": [CORDON]}}
    for index, (node, spec) in enumerate(nodes.items()):
        cp.seed(resources.NODES, {"metadata": {"name": node}, "spec": spec})
        cp.seed(resources.CSINODES, {"metadata": {"name": node},
                                     "spec": {"drivers": [{"name": DRIVER, "nodeID": node}]}})
        cp.set_configz(node, {"evictionHard": {"nodefs.available": "10%"}})
        template = daemonset["spec"]["template"]
        cp.seed(resources.PODS, {
            "metadata": {"name": f"model-manager-node-{index}", "namespace": NS,
                         "uid": f"plugin-pod-{index}", "labels": template["metadata"]["labels"],
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                              "name": daemonset["metadata"]["name"],
                                              "uid": "ds-uid", "controller": True}]},
            "spec": {**template["spec"], "nodeName": node},
            "status": {"phase": "Running", "podIP": "127.0.0.1",
                       "conditions": [{"type": "Ready", "status": "True"}]}})


@pytest.fixture
def world(tmp_path: pathlib.Path) -> Iterator[tuple[ControlPlane, fixturehub.Hub]]:
    with ControlPlane(tmp_path / "cp", namespaces=(NS, TENANT)) as cp, \
            fixturehub.run(tls=True) as hub:
        hub.add_repo("org/open", {"config.json": b"{}", "w.bin": 4096})
        yield cp, hub


def _degraded(status: dict[str, Any]) -> str:
    found = [c for c in status.get("conditions") or [] if c["type"] == "Degraded"]
    return str(found[0]["message"]) if found else ""


def _node_of(pod: dict[str, Any]) -> str:
    (term,) = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchFields"][0]["key"] == "metadata.name"
    (node,) = term["matchFields"][0]["values"]
    return str(node)


async def test_warm_up_pods_go_only_where_the_scheduler_would_put_them(
        world: tuple[ControlPlane, fixturehub.Hub], tmp_path: pathlib.Path) -> None:
    cp, hub = world
    docs = helm.template(sets=[
        f"settings.model-artifact-huggingface-endpoint={hub.endpoint}"]).docs()
    _seed(cp, docs)
    args = helm.expanded_args(helm.container(docs, "Deployment", "apiserver"))
    kept = [a for a in args if a.partition("=")[0] not in CONTAINER_FLAGS]
    server = clustermode.start(cp, tmp_path / "server", extra_args=[
        *kept, f"--plugin-secure-port={free_port()}", f"--huggingface-endpoint={hub.endpoint}",
        f"--hub-ca-bundle={hub.ca_bundle}", "--prefetch-warmup-retry-interval=1h"])
    try:
        with server.client(ADMIN_TOKEN) as http:
            created = http.post(f"{cluster.G}/namespaces/{TENANT}/modelartifacts",
                                json=cluster.artifact("open", TENANT, {
                                    "huggingFace": {"repository": "org/open"}}))
            assert created.status_code == 201, created.text
            # the administrator's grant: the three nodes in one store (the fixture's Nodes
            # carry no labels, so the prefetch takes every node of the binding's stores)
            pools.setup(http, TENANT, ["node-plain", "node-infra", "node-cordoned"])
            created = http.post(f"{cluster.G}/namespaces/{TENANT}/modelprefetches", json={
                "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelPrefetch",
                "metadata": {"name": "warm", "namespace": TENANT},
                "spec": {"artifactRef": {"name": "open"}, "bindingRef": {"name": "grant"}}})
            assert created.status_code == 201, created.text

            def status() -> dict[str, Any]:
                found = http.get(f"{cluster.G}/namespaces/{TENANT}/modelprefetches/warm")
                return dict(found.json().get("status") or {})

            def pods() -> dict[str, dict[str, Any]]:
                found = (cp.get(resources.PODS, warmup.pod_name("warm", node), TENANT)
                         for node in ("node-plain", "node-infra", "node-cordoned"))
                return {_node_of(p): p for p in found if p is not None}

            await waiting.until(
                lambda: "TaintNotTolerated (1)" in _degraded(status()) and len(pods()) == 2,
                guard=60, what="the warm-up Pods and the tainted node counted")
            made = pods()
            assert sorted(made) == ["node-cordoned", "node-plain"]  # none on node-infra
            for pod in made.values():
                assert "nodeName" not in pod["spec"]  # the scheduler binds it, or does not
                assert pod["spec"]["tolerations"] == []  # no taint tolerated: not by wildcard
            assert status()["failedNodes"] == 1 and status()["desiredNodes"] == 3
            # kube-scheduler cannot place the cordoned node's Pod, and says so on the Pod
            cordoned = made["node-cordoned"]
            cp.put(resources.PODS, {**cordoned, "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": SCHEDULER_SAYS}]}})
            await waiting.until(
                lambda: "Unschedulable (1)" in _degraded(status()), guard=60,
                what="the cordoned node counted")
            final = status()
            assert final["failedNodes"] == 2 and final["readyNodes"] == 0
            assert final["downloadingNodes"] == 0  # node-plain: scheduled, warming (pending)
            assert "nodes" not in final
            assert "node-" not in _degraded(final)  # reasons counted, no node named
    finally:
        server.stop()
    refused = [f"{r.method} {r.path} -> {r.code}" for r in cp.recorder.requests()
               if r.user == clustermode.WORKER.name and r.code in (401, 403)]
    assert refused == []
