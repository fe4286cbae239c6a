"""The fleet simulator itself (bench/hollow): a handful of hollow node plugins, each with its
own Pod-bound identity, really list and watch through the real standalone API server, write their
NodeModelStore's status by the real reporter, feed the artifacts' node counts, and answer the
server's live-progress reads. Cheap: three nodes in one process, a dozen artifacts. The etcd
mode: two replicas on one real etcd, the nodes split between them, one replica leading the
controllers and each counting the nodes from its own view. The cluster mode: a real
kube-apiserver between the nodes and the server (the shared Kubernetes binaries; skipped,
naming what is missing, without them)."""

from __future__ import annotations

import dataclasses
import pathlib
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import yaml

from bench.hollow import cluster as clusters
from bench.hollow import fleet as fleets
from bench.hollow import node as hollow
from bench.hollow import scenario
from openapi import states

SHAPE = scenario.Shape(nodes=3, artifacts=12, namespaces=2, held=2, processes=1,
                       rollout_models=2)
GROUP = "/apis/worker.gpustack.ai/v1"


def _wait(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.1)
    return found


def _models(admin: httpx.Client, node: int) -> dict[str, str]:
    store = admin.get(f"{GROUP}/nodemodelstores/{fleets.node_name(node)}").json()
    return {m["digest"]: m["state"] for m in (store.get("status") or {}).get("models") or []}


def _artifact(admin: httpx.Client, index: int, sub: str = "") -> dict[str, Any]:
    namespace, name = fleets.artifact_key(index, SHAPE.namespaces)
    found: dict[str, Any] = admin.get(
        f"{GROUP}/namespaces/{namespace}/modelartifacts/{name}{sub}").json()
    return found


def _node_1_writes_node_0s_status(admin: httpx.Client, prepared: fleets.Prepared
                                   ) -> httpx.Response:
    """Node 1's own token patching node 0's NodeModelStore status."""
    config = yaml.safe_load(pathlib.Path(prepared.setups[0].nodes[1].kubeconfig).read_text())
    return admin.patch(
        f"{GROUP}/nodemodelstores/{fleets.node_name(0)}/status",
        headers={"Authorization": f"Bearer {config['users'][0]['user']['token']}",
                 "Content-Type": "application/merge-patch+json"},
        content=b'{"status": {"models": []}}')


def test_hollow_nodes_list_watch_write_status_and_answer_progress(tmp_path: pathlib.Path
                                                                  ) -> None:
    holds = scenario.holds(SHAPE)
    with scenario.server(SHAPE, tmp_path) as api, \
            fleets.running(api.prepared.setups) as fleet, api.servers[0].client() as admin:
        prepared = api.prepared
        fleet.ask("go")
        _wait("every node synced and wrote its status", lambda: fleet.ready() == SHAPE.nodes)
        for node in range(SHAPE.nodes):  # each node's own status, written with its own token
            assert _models(admin, node) == {fleets.digest(k): states.READY for k in holds[node]}

        # the identities are distinct: node 1's token may not write node 0's status
        refused = _node_1_writes_node_0s_status(admin, prepared)
        assert refused.status_code == 403, refused.text

        # a short download is published, reported, and counted in the artifact's status when
        # read, without a write of the artifact (no event for the plugins watching it)
        version = _artifact(admin, 0)["metadata"]["resourceVersion"]
        fleet.start_downloads([(0, fleets.digest(0), fleets.SIZE, 0.0, 1.0),
                               (1, fleets.digest(1), fleets.SIZE, 0.0, 3600.0)])
        _wait("node 0 reports the download Ready",
              lambda: _models(admin, 0).get(fleets.digest(0)) == states.READY)
        _wait("the artifact's count shows it",
              lambda: ((_artifact(admin, 0).get("status") or {}).get("nodes") or {}).get(
                  "ready") == 1)
        assert _artifact(admin, 0)["metadata"]["resourceVersion"] == version
        # the long one: the server reads node 1's live bytes from its HTTPS port
        _wait("node 1 reports its download",
              lambda: _models(admin, 1).get(fleets.digest(1)) == states.DOWNLOADING)
        progress = _wait("progress answered live by node 1",
                         lambda: (found := _artifact(admin, 1, "/progress")).get("live") == 1
                         and found)
        assert progress["downloading"] == 1

        # a touched artifact reaches every node's watch
        fleet.counts()
        namespace, name = fleets.artifact_key(5, SHAPE.namespaces)
        admin.patch(f"{GROUP}/namespaces/{namespace}/modelartifacts/{name}",
                    headers={"Content-Type": "application/merge-patch+json"},
                    content=b'{"metadata": {"annotations": {"%s": "%r"}}}' % (
                        hollow.SENT.encode(), time.time())).raise_for_status()
        seen: list[float] = []

        def arrived() -> bool:
            seen.extend(fleet.counts()["lags"])
            return len(seen) >= SHAPE.nodes

        _wait("every node saw the touch", arrived)
        assert len(seen) == SHAPE.nodes
        assert fleet.counts()["relists"] == 0


ETCD_SHAPE = dataclasses.replace(SHAPE, nodes=2, replicas=2)


def _touch(admin: httpx.Client, index: int) -> None:
    namespace, name = fleets.artifact_key(index, SHAPE.namespaces)
    admin.patch(f"{GROUP}/namespaces/{namespace}/modelartifacts/{name}",
                headers={"Content-Type": "application/merge-patch+json"},
                content=b'{"metadata": {"annotations": {"%s": "%r"}}}' % (
                    hollow.SENT.encode(), time.time())).raise_for_status()


def test_etcd_mode_splits_the_nodes_over_two_replicas_each_counting_them(
        tmp_path: pathlib.Path) -> None:
    holds = scenario.holds(ETCD_SHAPE)
    with scenario.server(ETCD_SHAPE, tmp_path) as api, \
            fleets.running(api.prepared.setups) as fleet, \
            api.servers[0].client() as first, api.servers[1].client() as second:
        assert api.member is not None and len(api.servers) == 2
        fleet.ask("go")
        _wait("every node synced and wrote its status", lambda: fleet.ready() == 2)
        for node, own in ((0, first), (1, second)):  # node i talks to replica i
            config = yaml.safe_load(pathlib.Path(
                api.prepared.setups[0].nodes[node].kubeconfig).read_text())
            assert config["clusters"][0]["cluster"]["server"] == api.servers[node].url
            # each replica serves what the other's node wrote (one etcd)
            assert _models(second if own is first else first, node) == {
                fleets.digest(k): states.READY for k in holds[node]}
        leader = _wait("one replica holds the controllers' Lease",
                       lambda: (found := api.leader()) is not None and str(found))
        assert leader in ("0", "1")

        # node 1 (on replica 1) downloads; replica 0 counts it from its own view of the stores
        fleet.start_downloads([(1, fleets.digest(0), fleets.SIZE, 0.0, 1.0)])
        _wait("replica 0 counts it",
              lambda: ((_artifact(first, 0).get("status") or {}).get("nodes") or {}).get(
                  "ready") == 1)

        fleet.counts()
        _touch(first, 5)  # written through replica 0, watched by a node on each replica
        seen: list[float] = []

        def arrived() -> bool:
            seen.extend(fleet.counts()["lags"])
            return len(seen) >= 2

        _wait("both nodes saw the touch", arrived)
        assert len(seen) == 2
        assert fleet.counts()["relists"] == 0


CLUSTER_SHAPE = dataclasses.replace(SHAPE, cluster=True)


def test_cluster_mode_puts_kube_apiserver_between_every_node_and_the_server(
        tmp_path: pathlib.Path) -> None:
    """Each hollow node calls a real kube-apiserver with its own Pod-bound token; the server sits
    behind the aggregator as the chart installs it: the nodes list, watch and write their status
    through it, a node cannot write another's, and a download shows in the count read there."""
    missing = clusters.missing()
    if missing:
        pytest.skip(f"cluster mode needs {', '.join(missing)}")
    holds = scenario.holds(CLUSTER_SHAPE)
    with scenario.server(CLUSTER_SHAPE, tmp_path) as api, \
            fleets.running(api.prepared.setups) as fleet, api.servers[0].client() as admin:
        assert api.servers[0].url == clusters.KAS  # the admin, too, reads through kube-apiserver
        fleet.ask("go")
        _wait("every node synced and wrote its status",
              lambda: fleet.ready() == CLUSTER_SHAPE.nodes, timeout=180)
        for node in range(CLUSTER_SHAPE.nodes):
            config = yaml.safe_load(pathlib.Path(
                api.prepared.setups[0].nodes[node].kubeconfig).read_text())
            assert config["clusters"][0]["cluster"]["server"] == clusters.KAS
            assert _models(admin, node) == {fleets.digest(k): states.READY for k in holds[node]}
        refused = _node_1_writes_node_0s_status(admin, api.prepared)
        assert refused.status_code == 403, refused.text
        version = _artifact(admin, 0)["metadata"]["resourceVersion"]
        fleet.start_downloads([(2, fleets.digest(0), fleets.SIZE, 0.0, 1.0)])
        _wait("the count read through kube-apiserver shows it",
              lambda: ((_artifact(admin, 0).get("status") or {}).get("nodes") or {}).get(
                  "ready") == 1, timeout=120)
        assert _artifact(admin, 0)["metadata"]["resourceVersion"] == version
        assert fleet.counts()["relists"] == 0
