"""Shared setup of the cluster-mode tests: the fixture control plane with the chart's grants,
tenants, and objects stored before the server starts (clients cannot create NodeModelStores)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import pathlib
from typing import Any

from apiserver.registry import build
from apiserver.storage import sqlite
from devkit import admitting
from devkit.controlplane import ControlPlane, Role, Rule, Subject, UserInfo
from devkit.controlplane import resources as kinds
from devkit.harness.aggregator import ALICE, PLUGIN_A

G = "/apis/worker.gpustack.ai/v1"
GROUP = "worker.gpustack.ai"
GETTER = UserInfo("getter", uid="getter-uid", groups=("getters", "system:authenticated"))
PLUGIN_POD = ("plugin-a", "1db066b1-1edf-4efb-a324-75448ef128f2")


def artifact(name: str, namespace: str, source: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"source": source or {"huggingFace": {"repository": "Qwen/Qwen2.5-0.5B"}}}}


def grant_chart_and_tenants(cp: ControlPlane) -> None:
    """What the chart and an administrator create: the plugin's and the worker's roles for
    this API, alice's model-artifact-reader Role in team-a, a get-only Role for getters."""
    cp.policy.grant(Subject("ServiceAccount", "model-manager-node", "gpustack-system"), [
        Rule(("get", "list", "watch"), (GROUP,), ("modelartifacts", "nodemodelstores")),
        Rule(("get", "update", "patch"), (GROUP,), ("nodemodelstores/status",)),
    ], name="model-manager-node")  # fmt: skip
    cp.policy.grant(Subject("ServiceAccount", "model-manager-worker", "gpustack-system"), [
        Rule(("get", "list", "watch"), (GROUP,), ("modelartifacts",)),
        Rule(("get", "update", "patch"), (GROUP,), ("modelartifacts/status",)),
        Rule(("get", "list", "watch", "create", "update", "patch", "delete"), (GROUP,),
             ("nodemodelstores",)),
    ], name="model-manager-worker")  # fmt: skip
    cp.policy.add_role(Role("model-artifact-reader", (Rule(
        ("get", "list", "watch"), (GROUP,), ("modelartifacts", "modelartifacts/progress")),),
        namespace="team-a"))
    cp.policy.bind("model-artifact-reader", [ALICE.name], namespace="team-a", role_kind="Role",
                   name="alice-reader")
    cp.policy.grant(Subject("Group", "getters"), Rule(("get",), (GROUP,), ("modelartifacts",)),
                    namespace="team-a", name="getters")
    cp.seed(kinds.PODS, {"metadata": {"name": PLUGIN_POD[0], "namespace": "gpustack-system",
                                      "uid": PLUGIN_POD[1]},
                         "spec": {"nodeName": "node-a", "containers": [{"name": "p",
                                                                        "image": "p"}]}})
    assert PLUGIN_A.extra  # the recorded plugin identity carries its Pod and node


def seed_store(data_dir: pathlib.Path) -> None:
    """NodeModelStores node-a and node-b and artifacts qwen in team-a and team-b, stored before
    the server starts (through the registry, every rule applied)."""

    async def seed() -> None:
        store = sqlite.Store(data_dir / "store.db")
        await store.start()
        try:
            registry = build.build(store, admission=admitting.standalone())
            for node in ("node-a", "node-b"):
                await registry.nodemodelstores.create({"metadata": {"name": node}, "spec": {}})
            for namespace in ("team-a", "team-b"):
                await registry.modelartifacts.create(artifact("qwen", namespace),
                                                     namespace=namespace)
        finally:
            await store.close()

    data_dir.mkdir(parents=True, exist_ok=True)
    # a loop of its own in a thread: callers may be async tests with a loop running
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, seed()).result()
