"""The scheduling gate of a Pod that must run where its model is warm (``keys.REQUIRE_WARM_NODE``)
and that no node holds yet: the JSON Patch operations that gate it at admission and release it
once nodes are warm.

- **Gated at admission** (kube 1.30+, the Pod webhook): the gate ``keys.WARM_NODE_GATE`` and the
  label ``keys.WAITING_FOR_WARM_NODE`` (the controller watches only the Pods it selects). A Pod
  may gain a gate only while it is created, never later.
- **Released in one patch** (``controllers/warmgate``): the required expressions ANDed into the
  Pod's required node-affinity terms (``placement.required_patch``: additions only, which is
  what kube lets a gated Pod change in its node affinity, KEP-3838), the gate removed and the
  label dropped. The patch first tests ``metadata.resourceVersion`` and the gate's place, so it
  applies to the Pod it was computed from or not at all.
"""

from __future__ import annotations

from typing import Final

from openapi import keys, placement, wire

GATES: Final = "/spec/schedulingGates"
LABELS: Final = "/metadata/labels"

Operation = placement.Operation


def _pointer(key: str) -> str:
    """``key`` as one JSON Pointer segment (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def gate_index(pod: wire.Readable) -> int | None:
    """Where ``keys.WARM_NODE_GATE`` is in the Pod's scheduling gates; None without it."""
    for index, gate in enumerate(wire.items(pod, "spec", "schedulingGates")):
        if wire.text(gate, "name") == keys.WARM_NODE_GATE:
            return index
    return None


def gated(pod: wire.Readable) -> bool:
    return gate_index(pod) is not None


def gate_patch(pod: wire.Readable) -> list[Operation]:
    """Operations adding the gate and the label to a Pod being created (nothing when it has the
    gate already)."""
    if gated(pod):
        return []
    gates = wire.dig(pod, "spec", "schedulingGates")
    gate = {"name": keys.WARM_NODE_GATE}
    operations: list[Operation] = [
        {"op": "add", "path": f"{GATES}/-", "value": gate} if isinstance(gates, list)
        else {"op": "add", "path": GATES, "value": [gate]}]
    labels = wire.dig(pod, "metadata", "labels")
    if isinstance(labels, dict):
        operations.append({"op": "add",
                           "path": f"{LABELS}/{_pointer(keys.WAITING_FOR_WARM_NODE)}",
                           "value": keys.REQUIRE_WARM_NODE_ON})
    else:
        operations.append({"op": "add", "path": LABELS,
                           "value": {keys.WAITING_FOR_WARM_NODE: keys.REQUIRE_WARM_NODE_ON}})
    return operations


def release_patch(pod: wire.Readable, expressions: list[wire.Obj]) -> list[Operation]:
    """Operations narrowing the Pod's required node affinity to ``expressions`` and removing the
    gate and the label, guarded by the Pod's resourceVersion; nothing when it is not gated."""
    index = gate_index(pod)
    if index is None:
        return []
    operations: list[Operation] = [
        {"op": "test", "path": "/metadata/resourceVersion",
         "value": wire.text(pod, "metadata", "resourceVersion")},
        {"op": "test", "path": f"{GATES}/{index}/name", "value": keys.WARM_NODE_GATE},
        *placement.required_patch(pod, expressions),
        {"op": "remove", "path": f"{GATES}/{index}"},
    ]
    if isinstance(wire.dig(pod, "metadata", "labels", keys.WAITING_FOR_WARM_NODE), str):
        operations.append({"op": "remove",
                           "path": f"{LABELS}/{_pointer(keys.WAITING_FOR_WARM_NODE)}"})
    return operations
