"""The fleet simulator itself (bench/hollow): a handful of hollow node plugins, each with its
own Pod-bound identity, really list and watch through the real standalone API server, write their
NodeModelStore's status by the real reporter, feed the real aggregation, and answer the server's
live-progress reads. Cheap: three nodes in one process, a dozen artifacts."""

from __future__ import annotations

import pathlib
import time
from collections.abc import Callable
from typing import Any

import httpx
import yaml

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


def test_hollow_nodes_list_watch_write_status_and_answer_progress(tmp_path: pathlib.Path
                                                                  ) -> None:
    holds = scenario.holds(SHAPE)
    with scenario.server(SHAPE, tmp_path) as (server, prepared), \
            fleets.running(prepared.setups) as fleet, server.client() as admin:
        fleet.ask("go")
        _wait("every node synced and wrote its status", lambda: fleet.ready() == SHAPE.nodes)
        for node in range(SHAPE.nodes):  # each node's own status, written with its own token
            assert _models(admin, node) == {fleets.digest(k): states.READY for k in holds[node]}

        # the identities are distinct: node 1's token may not write node 0's status
        config = yaml.safe_load(pathlib.Path(prepared.setups[0].nodes[1].kubeconfig).read_text())
        refused = admin.patch(
            f"{GROUP}/nodemodelstores/{fleets.node_name(0)}/status",
            headers={"Authorization": f"Bearer {config['users'][0]['user']['token']}",
                     "Content-Type": "application/merge-patch+json"},
            content=b'{"status": {"models": []}}')
        assert refused.status_code == 403, refused.text

        # a short download is published, reported, and aggregated into the artifact's status
        fleet.start_downloads([(0, fleets.digest(0), fleets.SIZE, 0.0, 1.0),
                               (1, fleets.digest(1), fleets.SIZE, 0.0, 3600.0)])
        _wait("node 0 reports the download Ready",
              lambda: _models(admin, 0).get(fleets.digest(0)) == states.READY)
        _wait("the aggregation counts it",
              lambda: ((_artifact(admin, 0).get("status") or {}).get("nodes") or {}).get(
                  "ready") == 1)
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
