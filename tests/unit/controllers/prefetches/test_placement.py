"""Where a warm-up Pod may go: the plugin DaemonSet's tolerations (keyed ones only, never a node
condition's), the node's taints, the plugin Pod that says which DaemonSet runs there."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from controllers.prefetches import placement
from controllers.prefetches import plan as prefetchplan
from controllers.runtime import client as clients
from controllers.runtime import informer
from devkit import clock as manual
from tests.unit.controllers.fakes import Listed

NS = "gpustack-system"
GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
EVERY = {"operator": "Exists"}


def _daemonset(name: str, tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"namespace": NS, "name": name, "resourceVersion": "1"},
            "spec": {"template": {"spec": {"tolerations": tolerations}}}}


def _plugin_pod(node: str, daemonset: str = "model-manager-node") -> dict[str, Any]:
    return {"metadata": {"namespace": NS, "name": f"plugin-{node}", "resourceVersion": "1",
                         "ownerReferences": [{"kind": "DaemonSet", "name": daemonset,
                                              "controller": True}]},
            "spec": {"nodeName": node}}


def _node(name: str, *taints: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": "1"},
            "spec": {"taints": list(taints)}}


@contextlib.asynccontextmanager
async def _placement(objects: dict[str, list[dict[str, Any]]]
                     ) -> AsyncIterator[placement.PluginPlacement]:
    api = Listed(objects)
    clock = manual.ManualClock()
    found = [informer.Informer(api, resource, clock)
             for resource in (clients.PODS, clients.DAEMON_SETS, clients.NODES)]
    where = placement.PluginPlacement(*found)
    tasks = [asyncio.create_task(each.run()) for each in found]
    try:
        async with asyncio.timeout(10):
            await where.synced()
        yield where
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _hold(found: list[dict[str, Any]] | prefetchplan.Hold) -> prefetchplan.Hold:
    assert isinstance(found, prefetchplan.Hold), found
    return found


async def test_a_wildcard_toleration_is_never_carried_so_a_tainted_node_gets_no_pod() -> None:
    """The chart's default: the plugin tolerates every taint; a warm-up Pod none."""
    dedicated = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
    async with _placement({
        "daemonsets": [_daemonset("model-manager-node", [EVERY])],
        "pods": [_plugin_pod(n) for n in ("plain", "infra", "soft")],
        "nodes": [_node("plain"), _node("infra", dedicated),
                  _node("soft", {"key": "x", "effect": "PreferNoSchedule"})]}) as where:
        assert where.tolerations("plain") == []
        held = _hold(where.tolerations("infra"))
        assert (held.phase, held.reason) == ("Failed", "TaintNotTolerated")
        assert "dedicated=infra:NoSchedule" in held.message and "keyed tolerations" in held.message
        assert where.tolerations("soft") == []  # PreferNoSchedule only scores


async def test_keyed_tolerations_are_carried_and_condition_taints_are_the_scheduler_s() -> None:
    cordon = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    keyed = [GPU, {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},
             {"key": "team", "operator": "Equal", "value": "a", "effect": "NoExecute",
              "tolerationSeconds": 60}]
    async with _placement({
        "daemonsets": [_daemonset("model-manager-node", [*keyed, EVERY])],
        "pods": [_plugin_pod(n) for n in ("gpu", "cordoned", "team-b")],
        "nodes": [_node("gpu", {"key": "nvidia.com/gpu", "value": "present",
                                "effect": "NoSchedule"}),
                  _node("cordoned", cordon),
                  _node("team-b", {"key": "team", "value": "b", "effect": "NoExecute"})]}) as where:
        carried = [GPU, keyed[2]]  # never the cordon's, nor the wildcard
        assert where.tolerations("gpu") == carried
        assert where.tolerations("cordoned") == carried  # the scheduler holds it there
        assert "team=b:NoExecute" in _hold(where.tolerations("team-b")).message


async def test_a_node_the_plugin_cannot_run_on_is_not_a_target() -> None:
    async with _placement({
        "daemonsets": [_daemonset("model-manager-node", [GPU])],
        "pods": [_plugin_pod("gpu"), _plugin_pod("infra"),
                 _plugin_pod("orphan", daemonset="gone")],
        "nodes": [_node("gpu", {"key": "nvidia.com/gpu", "effect": "NoSchedule"}),
                  _node("infra", {"key": "dedicated", "effect": "NoSchedule"}),
                  _node("orphan"), _node("bare")]}) as where:
        assert where.tolerations("gpu") == [GPU]
        held = _hold(where.tolerations("infra"))
        assert held.reason == "TaintNotTolerated" and "DaemonSet model-manager-node" in held.message
        for node in ("orphan", "bare"):  # no plugin Pod of a known DaemonSet runs there now
            waiting = _hold(where.tolerations(node))
            assert (waiting.phase, waiting.reason) == ("Pending", "NoNodePlugin")


def test_toleration_matching_is_kubes() -> None:
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    assert placement.tolerates({"operator": "Exists"}, taint)
    assert placement.tolerates({"key": "k", "operator": "Exists"}, taint)
    assert placement.tolerates({"key": "k", "value": "v"}, taint)  # Equal by default
    assert not placement.tolerates({"key": "k", "value": "w"}, taint)
    assert not placement.tolerates({"key": "k", "operator": "Exists", "effect": "NoExecute"},
                                   taint)
    assert not placement.tolerates({"value": "v"}, taint)  # Equal needs a key
    assert not placement.tolerates({"key": "k", "operator": "Lt"}, taint)
