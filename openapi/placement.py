"""Where a Pod mounting a model should run: the nodes warm for a digest, ranked and capped, as a
node-affinity term; and that term merged into a Pod's affinity as JSON Patch operations.

The one implementation of the rules, for the API server's Pod webhook
(``apiserver/endpoints/podwebhook.py``) and for callers that render Pods themselves
(``kube.gpustack.ModelManager.placement``):

- **A node is warm** for a digest while three things hold: its NodeModelStore lists the digest
  ``Ready``, the store's ``Ready`` condition is True (a store the plugin left behind keeps a stale
  entry), and the node runs the plugin now (its CSINode lists the driver; standalone, ``--node``).
- **At most 16 nodes** per term: those mounting the digest now first, then the most recently used
  (``lastUsedTime``, newest first; never used last), then by name.
- **One preferred term per digest** (weight ``WEIGHT``), naming the nodes by
  ``kubernetes.io/hostname``; a digest no node holds adds none. A preference never filters:
  kube-scheduler still weighs every node with room.
- **No term** for a Pod carrying Kueue's ``podset-preferred-topology`` (Kueue's topology
  placement ranks such a PodSet itself and would drop its affinity score).
- **Required on request**: a Pod annotated ``worker.gpustack.ai/require-warm-node: "true"`` gets
  one required expression per digest instead, ANDed into every required term it already has.
- **Merged, never replaced**: the Pod's own affinity stays as it was; a term equal to one it
  already carries is not added twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Iterable, Sequence
from typing import Final

from openapi import keys, states, volume, wire
from openapi.kinds import nodemodelstore

MAX_NODES: Final = 16
"""The most nodes one term names."""
WEIGHT: Final = 100
"""A preferred term's weight (kube allows 1 to 100)."""

AFFINITY: Final = "/spec/affinity"
NODE_AFFINITY: Final = "nodeAffinity"
PREFERRED: Final = "preferredDuringSchedulingIgnoredDuringExecution"
REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"

_RFC3339_SHAPE: Final = "0000-00-00T00:00:00Z"

Operation = wire.Obj
"""One JSON Patch (RFC 6902) operation."""


@dataclasses.dataclass(frozen=True, slots=True)
class Warm:
    """A node warm for one digest."""

    node: str
    mounting: bool
    """A Pod on the node mounts the digest now (``referenced``)."""
    last_used: str
    """``lastUsedTime`` (RFC 3339 in UTC to the second, ``...Z``: it sorts as text); ``""``
    when never used or unreadable."""


def lists_driver(csinode: wire.Readable) -> bool:
    """The CSINode lists the driver: the node plugin runs on its node now."""
    return any(wire.text(each, "name") == volume.DRIVER
               for each in wire.items(csinode, "spec", "drivers"))


def warm(store: wire.Readable, digest: str, plugin_nodes: Container[str]) -> Warm | None:
    """``store``'s node if it is warm for ``digest`` (the three rules above), else None."""
    node = wire.text(store, "metadata", "name")
    if not node or node not in plugin_nodes or not nodemodelstore.ready(store):
        return None
    found = nodemodelstore.entry(store, digest)
    if found is None or nodemodelstore.entry_state(found) != states.READY:
        return None
    used = nodemodelstore.entry_last_used(found)
    return Warm(node, nodemodelstore.entry_referenced(found),
                used if _sortable(used) else "")


def _sortable(moment: str) -> bool:
    """``moment`` has metav1.Time's shape (digits where the shape has zeros): it sorts as text."""
    return len(moment) == len(_RFC3339_SHAPE) and all(
        char.isdigit() if shape == "0" else char == shape
        for char, shape in zip(moment, _RFC3339_SHAPE, strict=True))


def ranked(found: Iterable[Warm], cap: int = MAX_NODES) -> list[str]:
    """The node names, mounting first, then most recently used, then by name; at most ``cap``."""
    order = sorted(found, key=lambda w: w.node)
    order.sort(key=lambda w: w.last_used, reverse=True)  # stable: names stay in order on ties
    order.sort(key=lambda w: not w.mounting)
    return [each.node for each in order[:cap]]


def warm_nodes(stores: Iterable[wire.Readable], digest: str,
               plugin_nodes: Container[str]) -> list[str]:
    """The ranked, capped names of the nodes warm for ``digest`` among ``stores``."""
    return ranked(w for w in (warm(s, digest, plugin_nodes) for s in stores) if w is not None)


def expression(nodes: Sequence[str]) -> wire.Obj:
    """A node selector requirement naming ``nodes`` by hostname."""
    return {"key": keys.HOSTNAME, "operator": "In", "values": list(nodes)}


def preferred_term(nodes: Sequence[str]) -> wire.Obj:
    """The preferred scheduling term for one digest's warm ``nodes`` (not empty)."""
    return {"weight": WEIGHT, "preference": {"matchExpressions": [expression(nodes)]}}


def annotation(pod: wire.Readable, key: str) -> str | None:
    found = wire.dig(pod, "metadata", "annotations", key)
    return found if isinstance(found, str) else None


def kueue_places(pod: wire.Readable) -> bool:
    """Kueue places this Pod's PodSet by topology: it gets no term."""
    return annotation(pod, keys.KUEUE_PREFERRED_TOPOLOGY) is not None


def requires_warm(pod: wire.Readable) -> bool:
    """The Pod opted in to run only where its digests are warm."""
    return annotation(pod, keys.REQUIRE_WARM_NODE) == keys.REQUIRE_WARM_NODE_ON


def _node_affinity(pod: wire.Readable) -> tuple[bool, wire.Readable | None]:
    """(``spec.affinity`` is an object, ``spec.affinity.nodeAffinity`` if an object)."""
    affinity = wire.dig(pod, "spec", "affinity")
    if not isinstance(affinity, dict):
        return False, None
    found = affinity.get(NODE_AFFINITY)
    return True, found if isinstance(found, dict) else None


def _add(path: str, value: object) -> Operation:
    return {"op": "add", "path": path, "value": value}


def _under_node_affinity(pod: wire.Readable, field: str, value: object) -> Operation:
    """Adds ``field`` (absent or null) under the Pod's node affinity, creating what is missing."""
    has_affinity, node_affinity = _node_affinity(pod)
    if not has_affinity:
        return _add(AFFINITY, {NODE_AFFINITY: {field: value}})
    if node_affinity is None:
        return _add(f"{AFFINITY}/{NODE_AFFINITY}", {field: value})
    return _add(f"{AFFINITY}/{NODE_AFFINITY}/{field}", value)


def preferred_patch(pod: wire.Readable, terms: Sequence[wire.Obj]) -> list[Operation]:
    """Operations appending ``terms`` to the Pod's preferred node-affinity terms (those it
    already carries kept first and unchanged; an equal one not added again)."""
    _, node_affinity = _node_affinity(pod)
    existing = (node_affinity or {}).get(PREFERRED)
    have = existing if isinstance(existing, list) else None
    new = [term for term in terms if have is None or term not in have]
    if not new:
        return []
    if have is None:
        return [_under_node_affinity(pod, PREFERRED, new)]
    path = f"{AFFINITY}/{NODE_AFFINITY}/{PREFERRED}/-"
    return [_add(path, term) for term in new]


def required_patch(pod: wire.Readable, expressions: Sequence[wire.Obj]) -> list[Operation]:
    """Operations ANDing ``expressions`` into every required node selector term of the Pod (its
    terms are ORed, so each must hold them); one new term when it has none."""
    if not expressions:
        return []
    _, node_affinity = _node_affinity(pod)
    required = (node_affinity or {}).get(REQUIRED)
    terms = wire.dig(required, "nodeSelectorTerms")
    if not isinstance(required, dict) or not isinstance(terms, list) or not terms:
        value = {"nodeSelectorTerms": [{"matchExpressions": list(expressions)}]}
        if isinstance(required, dict):
            return [_add(f"{AFFINITY}/{NODE_AFFINITY}/{REQUIRED}/nodeSelectorTerms",
                         value["nodeSelectorTerms"])]
        return [_under_node_affinity(pod, REQUIRED, value)]
    operations: list[Operation] = []
    base = f"{AFFINITY}/{NODE_AFFINITY}/{REQUIRED}/nodeSelectorTerms"
    for index, term in enumerate(terms):
        if not isinstance(term, dict):
            continue
        held = term.get("matchExpressions")
        if isinstance(held, list):
            operations.extend(_add(f"{base}/{index}/matchExpressions/-", each)
                              for each in expressions if each not in held)
        else:
            operations.append(_add(f"{base}/{index}/matchExpressions", list(expressions)))
    return operations
