"""Where a warm-up Pod may go: the node plugin DaemonSet's tolerations, the node's taints, and
the scheduler's verdict (cluster mode; ``warmup.py`` renders and creates the Pods).

A warm-up Pod is a tenant's Pod: it must not land where the scheduler would never put one.

- **Only the plugin's reach.** The tolerations come from the DaemonSet that runs the node plugin
  on that node (the controller owner of the plugin Pod there, read from the cluster). A node
  whose taints (``NoSchedule``, ``NoExecute``) that DaemonSet does not tolerate is not a target:
  the plugin cannot run there.
- **Only keyed tolerations are carried.** The Pod carries the DaemonSet's tolerations that name a
  taint key, except the node conditions' (``node.kubernetes.io/...``: a cordon, not-ready,
  pressure hold for it as for any Pod). A toleration without a key tolerates every taint: that is
  how a node plugin is made to reach every node, and not what a tenant's Pod may do, so it is
  never carried (the chart's default plugin toleration is one: warm-up Pods then tolerate no
  taint). A node with a taint the carried tolerations do not cover gets no warm-up Pod.
- **The scheduler decides the rest.** The Pod names its node by node affinity
  (``requiredDuringSchedulingIgnoredDuringExecution``, ``metadata.name`` in ``matchFields``, as
  the DaemonSet controller pins its Pods), never ``nodeName``, so kube-scheduler's filters hold:
  cordons, resources, conditions. A Pod it cannot place (``PodScheduled=False``,
  ``Unschedulable``) is reported with the scheduler's message (``scheduling_failure``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from controllers.prefetches import plan as prefetchplan
from controllers.runtime import informer
from controllers.sources import plugins
from openapi import reasons, states, wire

Hold = prefetchplan.Hold
CONDITION_PREFIX = "node.kubernetes.io/"
"""The taints the node lifecycle controller and ``kubectl cordon`` set for a node's state."""
FILTERING = ("NoSchedule", "NoExecute")
"""The effects the scheduler filters on (``PreferNoSchedule`` only scores)."""
NODE_INDEX = "warmup-node"


def _list(value: Any) -> list[wire.Obj]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def tolerates(toleration: wire.Obj, taint: wire.Obj) -> bool:
    """kube's ``Toleration.ToleratesTaint``: the effect (an empty one matches every effect), the
    key (an empty key with ``Exists`` matches every key), then ``Exists`` or ``Equal`` on the
    value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated(taints: Iterable[wire.Obj], tolerations: Sequence[wire.Obj]) -> list[wire.Obj]:
    """The filtering taints no toleration covers."""
    return [t for t in taints if t.get("effect") in FILTERING
            and not any(tolerates(each, t) for each in tolerations)]


def carried(tolerations: Iterable[wire.Obj]) -> list[wire.Obj]:
    """The DaemonSet's tolerations a warm-up Pod carries: keyed, and not a node condition's."""
    kept = []
    for toleration in tolerations:
        key = toleration.get("key") or ""
        if key and not key.startswith(CONDITION_PREFIX):
            kept.append({k: v for k, v in toleration.items()
                         if k in ("key", "operator", "value", "effect", "tolerationSeconds")
                         and v is not None})
    return kept


def describe(taint: wire.Obj) -> str:
    value = f"={taint.get('value')}" if taint.get("value") else ""
    return f"{str(taint.get('key'))[:317]}{value[:64]}:{taint.get('effect')}"


def affinity(node: str) -> wire.Obj:
    """Node affinity to ``node`` alone, the way the DaemonSet controller pins its Pods."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}


def scheduling_failure(pod: wire.Obj) -> str:
    """The scheduler's message while it cannot place the Pod, empty otherwise."""
    status = pod.get("status") or {}
    if status.get("phase") not in (None, "", "Pending") or (pod.get("spec") or {}).get("nodeName"):
        return ""
    for condition in _list(status.get("conditions")):
        if (condition.get("type") == "PodScheduled" and condition.get("status") == "False"
                and condition.get("reason") == "Unschedulable"):
            return str(condition.get("message") or "no node fits it")[:1024]
    return ""


class PluginPlacement:
    """What the informers say of one node: the tolerations its warm-up Pod carries, or why it
    gets none. Over the plugin Pods (namespace and selector of the plugin), the DaemonSets of
    the plugin's namespace and the Nodes."""

    def __init__(self, plugin_pods: informer.Informer, daemonsets: informer.Informer,
                 nodes: informer.Informer) -> None:
        self._pods = plugin_pods
        self._daemonsets = daemonsets
        self._nodes = nodes
        plugin_pods.add_index(NODE_INDEX, plugins.node_of)

    async def synced(self) -> None:
        for each in (self._pods, self._daemonsets, self._nodes):
            await each.synced.wait()

    def _daemonset(self, node: str) -> wire.Obj | None:
        for pod in self._pods.by_index(NODE_INDEX, node):
            metadata = pod.get("metadata") or {}
            if metadata.get("deletionTimestamp"):
                continue
            for owner in _list(metadata.get("ownerReferences")):
                if owner.get("kind") == "DaemonSet" and owner.get("controller"):
                    found = self._daemonsets.get(str(metadata.get("namespace") or ""),
                                                 str(owner.get("name") or ""))
                    if found is not None:
                        return found
        return None

    def tolerations(self, node: str) -> list[wire.Obj] | Hold:
        """The warm-up Pod's tolerations on ``node``, or why it gets no Pod."""
        daemonset = self._daemonset(node)
        if daemonset is None:
            return Hold(reasons.NO_NODE_PLUGIN, f"no node plugin Pod of a DaemonSet runs on "
                        f"{node} now; its warm-up waits for one", phase=states.PENDING)
        template = ((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}
        tolerations = _list(template.get("tolerations"))
        found = self._nodes.get("", node)
        taints = _list(((found or {}).get("spec") or {}).get("taints"))
        plugin = untolerated([t for t in taints
                              if not str(t.get("key") or "").startswith(CONDITION_PREFIX)],
                             tolerations)
        name = (daemonset.get("metadata") or {}).get("name")
        if plugin:
            return Hold(reasons.TAINT_NOT_TOLERATED,
                        f"{node} has the taint {describe(plugin[0])}, which the node plugin "
                        f"DaemonSet {name} does not tolerate: not a target for a warm-up Pod")
        kept = carried(tolerations)
        blocked = untolerated([t for t in taints
                               if not str(t.get("key") or "").startswith(CONDITION_PREFIX)],
                              kept)
        if blocked:
            return Hold(reasons.TAINT_NOT_TOLERATED,
                        f"{node} has the taint {describe(blocked[0])}, which a warm-up Pod does "
                        f"not tolerate (it carries only the keyed tolerations of the node "
                        f"plugin DaemonSet {name}): no warm-up Pod is made there")
        return kept
