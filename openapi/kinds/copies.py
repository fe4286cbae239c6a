"""ModelArtifactCopies: the view of the computed body ``modelartifacts/{name}/copies`` and the
readers its clients use (``kube.gpustack``, ``kubectlmodel``). Computed per request by the
node view, never stored; one row per node. Readers never raise on a missing or mistyped field."""

from __future__ import annotations

from typing import Final, TypedDict

from openapi import resources, states, wire

KIND: Final = resources.MODEL_ARTIFACT_COPIES.kind
CONDITIONS: Final[tuple[str, ...]] = ()


class _NodeCopyRequired(TypedDict):
    node: str
    phase: states.Phase


class NodeCopy(_NodeCopyRequired, total=False):
    """One node's copy of the digest."""

    downloadedBytes: int
    live: bool
    sizeBytes: int
    percent: int
    source: states.Origin
    reason: str
    message: str
    retryTime: str
    referenced: bool
    pinned: bool
    lastUsedTime: str
    prefetches: list[str]


class ModelArtifactCopies(wire.Envelope, total=False):
    timestamp: str
    manifestDigest: str
    sizeBytes: int
    live: int
    nodes: list[NodeCopy]
    reason: str


VIEW: Final = ModelArtifactCopies


manifest_digest = wire.text_at("manifestDigest")
"""The digest listed; ``""`` when there is nothing to list (then ``reason`` says why)."""
size_bytes = wire.integer_at("sizeBytes")
reason = wire.text_at("reason")


def nodes(obj: wire.Readable) -> list[wire.Readable]:
    """The rows, by node name (``node_*`` read each)."""
    return wire.items(obj, "nodes")


node_name = wire.text_at("node")
node_phase = wire.text_at("phase")
"""``Pending``, ``Downloading``, ``Ready`` or ``Failed`` (``states.PHASES``)."""


def node_downloaded(row: wire.Readable) -> int:
    return wire.integer(row, "downloadedBytes") or 0


node_live = wire.flag_at("live")
"""``downloadedBytes`` came from the node's plugin for this answer (else: as stored)."""


node_size = wire.integer_at("sizeBytes")
node_percent = wire.integer_at("percent")
node_source = wire.text_at("source")
node_reason = wire.text_at("reason")
node_message = wire.text_at("message")
node_retry_time = wire.text_at("retryTime")
"""RFC 3339; ``""`` for none."""


node_referenced = wire.flag_at("referenced")


node_pinned = wire.flag_at("pinned")


node_last_used = wire.text_at("lastUsedTime")


def node_prefetches(row: wire.Readable) -> list[str]:
    return wire.strings(row, "prefetches")
