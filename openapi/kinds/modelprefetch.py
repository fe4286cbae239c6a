"""ModelPrefetch: the view of the kind and the one reader of each field other parts read.

The upstream shape (issue 39): ``artifactRef``, ``bindingRef``, ``placement.nodeSelector`` (a
label selector), ``minReady`` and ``retention``; the status carries counts and conditions and
names no node. ``targets`` is the shape before it, converted on every write (``upgraded``) and
never stored.

Readers never raise on a missing or mistyped field (admission refused it; a stored object that no
longer reads well reads as unset).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, TypedDict

from openapi import keys, reasons, resources, wire

KIND: Final = resources.MODEL_PREFETCH.kind
CONDITIONS: Final = reasons.PREFETCH_CONDITIONS

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]


class ArtifactRef(TypedDict):
    name: str


class BindingRef(TypedDict):
    name: str


class _RequirementRequired(TypedDict):
    key: str
    operator: Operator


class Requirement(_RequirementRequired, total=False):
    values: list[str]


class LabelSelector(TypedDict, total=False):
    matchLabels: dict[str, str]
    matchExpressions: list[Requirement]


class Placement(TypedDict, total=False):
    nodeSelector: LabelSelector
    instanceTypes: list[str]


class Targets(TypedDict, total=False):
    """The shape before the pool layer; converted by ``upgraded``."""

    nodeNames: list[str]
    nodeSelector: dict[str, str]
    minReady: int


class Retention(TypedDict, total=False):
    pinned: bool
    ttlAfterLastUse: str
    cleanupOnDelete: bool


class _SpecRequired(TypedDict):
    artifactRef: ArtifactRef


class Spec(_SpecRequired, total=False):
    bindingRef: BindingRef
    placement: Placement
    minReady: int
    retention: Retention
    targets: Targets


class Status(TypedDict, total=False):
    observedGeneration: int
    manifestDigest: str
    desiredNodes: int
    readyNodes: int
    downloadingNodes: int
    failedNodes: int
    conditions: list[wire.Condition]


class _ModelPrefetchRequired(TypedDict):
    spec: Spec


class ModelPrefetch(wire.Envelope, _ModelPrefetchRequired, total=False):
    status: Status


VIEW: Final = ModelPrefetch


# The spec.

spec = wire.mapping_at("spec")
artifact_name = wire.text_at("spec", "artifactRef", "name")
"""The ModelArtifact to warm, in the prefetch's namespace."""
binding_name = wire.text_at("spec", "bindingRef", "name")
"""The ModelStoreBinding it is admitted under; ``""`` for a prefetch stored before the pool
layer (it has none until an administrator sets one)."""
placement = wire.mapping_at("spec", "placement")


def node_selector(obj: wire.Readable) -> wire.Readable | None:
    """``placement.nodeSelector``; None when absent (every node of the binding's stores)."""
    found = wire.dig(obj, "spec", "placement", "nodeSelector")
    return found if isinstance(found, Mapping) else None


def selects(selector: wire.Readable | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: every matchLabels pair and every requirement holds; an
    empty selector (or None) selects every node; an unknown operator selects none."""
    if selector is None:
        return True
    for key, value in wire.mapping(selector, "matchLabels").items():
        if labels.get(str(key)) != value:
            return False
    for requirement in wire.items(selector, "matchExpressions"):
        key, operator = wire.text(requirement, "key"), wire.text(requirement, "operator")
        values = wire.strings(requirement, "values")
        present = key in labels
        if operator == "In":
            held = present and labels[key] in values
        elif operator == "NotIn":
            held = not present or labels[key] not in values
        elif operator == "Exists":
            held = present
        elif operator == "DoesNotExist":
            held = not present
        else:
            held = False
        if not held:
            return False
    return True


def min_ready(obj: wire.Readable) -> int:
    """How many Ready nodes make it Available; 0 means every target node."""
    return wire.integer(obj, "spec", "minReady") or 0


retention = wire.mapping_at("spec", "retention")


pinned = wire.flag_at("spec", "retention", "pinned")
"""``retention.pinned``: False unless it says true (the schema's default)."""


cleanup_on_delete = wire.flag_at("spec", "retention", "cleanupOnDelete")
"""``retention.cleanupOnDelete``: its deletion removes the copies at once."""


ttl_after_last_use = wire.text_at("spec", "retention", "ttlAfterLastUse")
"""The duration after which an unused copy's pin lapses; ``""`` keeps it."""


def has_targets(obj: wire.Readable) -> bool:
    """The spec still carries the shape before the pool layer (``targets``)."""
    return isinstance(wire.dig(obj, "spec", "targets"), Mapping)


def upgraded(obj: wire.Obj) -> wire.Obj:
    """``obj`` with ``spec.targets`` converted to the upstream shape (a copy; ``obj`` itself when
    there is nothing to convert): ``nodeNames`` become a ``kubernetes.io/hostname In [...]``
    requirement, ``nodeSelector`` becomes ``matchLabels``, both in one selector; so a prefetch of
    both kinds of target now warms the named nodes that also match the labels, where the old
    shape warmed their union, and one of each is kept exactly. ``minReady`` moves up unless the
    spec states its own. A ``placement`` already given wins over ``targets``."""
    if not has_targets(obj):
        return obj
    found = dict(obj)
    body = found["spec"] = dict(obj["spec"])
    old = body.pop("targets")
    names = [n for n in (old.get("nodeNames") or []) if isinstance(n, str)]
    labels = old.get("nodeSelector")
    if "placement" not in body or not body["placement"]:
        selector: dict[str, object] = {}
        if isinstance(labels, dict) and labels:
            selector["matchLabels"] = dict(labels)
        if names:
            selector["matchExpressions"] = [
                {"key": keys.HOSTNAME, "operator": "In", "values": sorted(set(names))}]
        body["placement"] = {"nodeSelector": selector}
    minimum = old.get("minReady")
    if isinstance(minimum, int) and not body.get("minReady"):
        body["minReady"] = minimum
    return found


# The status.

status = wire.mapping_at("status")
manifest_digest = wire.text_at("status", "manifestDigest")
"""The artifact's digest this prefetch warms and pins; ``""`` before the worker set it."""


def counts(obj: wire.Readable) -> tuple[int, int, int, int]:
    """(desired, ready, downloading, failed) target nodes."""
    found = status(obj)
    return (wire.integer(found, "desiredNodes") or 0, wire.integer(found, "readyNodes") or 0,
            wire.integer(found, "downloadingNodes") or 0, wire.integer(found, "failedNodes") or 0)


def node_entries(obj: wire.Readable) -> list[wire.Readable]:
    """``status.nodes`` of a prefetch stored before the pool layer (one entry per target node);
    a status written since names no node, so this is empty for it."""
    return wire.items(obj, "status", "nodes")


node_pinned = wire.flag_at("pinned")


node_name = wire.text_at("name")
node_phase = wire.text_at("phase")
"""``Pending``, ``Downloading``, ``Ready`` or ``Failed`` (``states.PHASES``)."""
node_size = wire.integer_at("sizeBytes")
node_downloaded = wire.integer_at("downloadedBytes")

