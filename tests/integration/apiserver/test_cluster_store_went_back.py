"""Cluster mode, the server's Pod replaced with an emptyDir store (its store.db and the mark file
beside it gone with the old Pod): the mark on the controllers' Lease in kube-apiserver survives,
so the new server continues numbering above every resourceVersion the old one handed out, tells
it with a Warning Event about that Lease, and answers every earlier version 410, so clients
list again. (The fixture control plane stands in for kube-apiserver; tests/e2e does it on the
real one with the chart.)"""

from __future__ import annotations

import json
import pathlib

from apiserver.cluster import revisionmark
from devkit.controlplane import ControlPlane
from devkit.controlplane import resources as kinds
from devkit.harness import aggregator, clustermode
from tests.support import kubeclient

NS = "team-a"
COLLECTION = f"/apis/worker.gpustack.ai/v1/namespaces/{NS}/modelartifacts"
LEASE = "model-manager-controllers"


def _mark(cp: ControlPlane) -> int:
    lease = cp.store.find(kinds.LEASES, clustermode.NAMESPACE, LEASE)
    assert lease is not None
    return int(lease["metadata"]["annotations"][revisionmark.ANNOTATION])


async def test_an_emptied_store_continues_above_the_mark_kept_on_the_lease(
        tmp_path: pathlib.Path) -> None:
    with ControlPlane(tmp_path / "cp") as cp:
        clustermode.prepare(cp)
        handed: list[int] = []
        with clustermode.running(cp, tmp_path / "first-pod") as server:
            async with server.aggregator() as agg:
                for name in ("a", "b", "c"):
                    created = await agg.request("POST", COLLECTION, aggregator.ADMIN,
                                                json=kubeclient.artifact(name, NS))
                    assert created.status_code == 201, created.text
                    handed.append(int(created.json()["metadata"]["resourceVersion"]))
                listed = await agg.get(COLLECTION, aggregator.ADMIN)
                handed.append(int(listed.json()["metadata"]["resourceVersion"]))
        held = max(handed)
        assert _mark(cp) >= held

        with clustermode.running(cp, tmp_path / "second-pod") as server:
            assert "behind the revision mark" in server.log()
            events, _ = cp.store.list(kinds.EVENTS, clustermode.NAMESPACE,
                                      lambda e: e.get("reason") == revisionmark.REASON)
            [event] = events
            assert event["type"] == "Warning"
            assert event["involvedObject"]["kind"] == "Lease"
            assert event["involvedObject"]["name"] == LEASE
            assert f"behind the revision mark {held}" in event["message"]
            async with server.aggregator() as agg:
                # a client holding a version of the old store: its watch answers 410
                watch = await agg.get(f"{COLLECTION}?watch=1&resourceVersion={held}",
                                      aggregator.ADMIN)
                [line] = [json.loads(text) for text in watch.text.splitlines()]
                assert line["type"] == "ERROR" and line["object"]["code"] == 410
                # its relist (from that version: any newer state will do) is the empty store
                relisted = await agg.get(f"{COLLECTION}?resourceVersion={held}",
                                         aggregator.ADMIN)
                assert relisted.status_code == 200 and relisted.json()["items"] == []
                assert int(relisted.json()["metadata"]["resourceVersion"]) > held
                created = await agg.request("POST", COLLECTION, aggregator.ADMIN,
                                            json=kubeclient.artifact("a", NS))
                fresh = int(created.json()["metadata"]["resourceVersion"])
            assert fresh > held  # never a version handed out before
        assert _mark(cp) >= fresh
