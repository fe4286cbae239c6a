"""ModelPrefetch: the view of the kind and the one reader of each field other parts read.

Readers never raise on a missing or mistyped field (admission refused it; a stored object that no
longer reads well reads as unset).
"""

from __future__ import annotations

from typing import Final, TypedDict

from openapi import reasons, resources, states, wire

KIND: Final = resources.MODEL_PREFETCH.kind
CONDITIONS: Final = reasons.PREFETCH_CONDITIONS


class ArtifactRef(TypedDict):
    name: str


class Targets(TypedDict, total=False):
    nodeNames: list[str]
    nodeSelector: dict[str, str]
    minReady: int


class Retention(TypedDict, total=False):
    pinned: bool
    ttlAfterLastUse: str


class _SpecRequired(TypedDict):
    artifactRef: ArtifactRef
    targets: Targets


class Spec(_SpecRequired, total=False):
    retention: Retention


class _NodeEntryRequired(TypedDict):
    name: str
    phase: states.Phase


class NodeEntry(_NodeEntryRequired, total=False):
    """One target node of ``status.nodes``."""

    sizeBytes: int
    downloadedBytes: int
    pinned: bool
    reason: str
    message: str


class Status(TypedDict, total=False):
    observedGeneration: int
    manifestDigest: str
    desiredNodes: int
    readyNodes: int
    downloadingNodes: int
    failedNodes: int
    nodes: list[NodeEntry]
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
targets = wire.mapping_at("spec", "targets")


def node_names(obj: wire.Readable) -> list[str]:
    return [name for name in wire.strings(obj, "spec", "targets", "nodeNames") if name]


def node_selector(obj: wire.Readable) -> dict[str, str] | None:
    """``targets.nodeSelector`` (``{}`` selects every node with the plugin); None when unset."""
    found = wire.dig(obj, "spec", "targets", "nodeSelector")
    if not isinstance(found, dict):
        return None
    return {str(key): str(value) for key, value in found.items()}


def min_ready(obj: wire.Readable) -> int:
    """How many Ready nodes make it Available; 0 means every target node."""
    return wire.integer(obj, "spec", "targets", "minReady") or 0


retention = wire.mapping_at("spec", "retention")


def pinned(obj: wire.Readable) -> bool:
    """``retention.pinned``: True unless it says false (the schema's default)."""
    return wire.dig(obj, "spec", "retention", "pinned") is not False


ttl_after_last_use = wire.text_at("spec", "retention", "ttlAfterLastUse")
"""The duration after which an unused copy's pin lapses; ``""`` keeps it."""


# The status.

status = wire.mapping_at("status")
manifest_digest = wire.text_at("status", "manifestDigest")
"""The artifact's digest this prefetch warms and pins; ``""`` before the worker set it."""


def counts(obj: wire.Readable) -> tuple[int, int, int, int]:
    """(desired, ready, downloading, failed) target nodes."""
    found = status(obj)
    return (wire.integer(found, "desiredNodes") or 0, wire.integer(found, "readyNodes") or 0,
            wire.integer(found, "downloadingNodes") or 0, wire.integer(found, "failedNodes") or 0)


node_phase = wire.text_at("phase")
"""``Pending``, ``Downloading``, ``Ready`` or ``Failed`` (``states.PHASES``)."""
node_size = wire.integer_at("sizeBytes")
node_downloaded = wire.integer_at("downloadedBytes")

