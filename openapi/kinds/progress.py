"""ModelArtifactProgress: the view of the computed body ``modelartifacts/{name}/progress`` and the
readers the clients use (``kubectlmodel``). Computed per request by the worker's node view, never
stored. Readers never raise on a missing or mistyped field."""

from __future__ import annotations

from typing import Final, TypedDict

from openapi import reasons, resources, wire

KIND: Final = resources.MODEL_ARTIFACT_PROGRESS.kind
CONDITIONS: Final[tuple[str, ...]] = ()


class _FailureReasonCountRequired(TypedDict):
    reason: reasons.FailureReasonWord
    count: int


class FailureReasonCount(_FailureReasonCountRequired):
    """How many failed nodes gave one reason."""


class ModelArtifactProgress(wire.Envelope, total=False):
    timestamp: str
    manifestDigest: str
    sizeBytes: int
    ready: int
    downloading: int
    failed: int
    downloadingPercent: int
    downloadingBytes: int
    live: int
    failureReasons: list[FailureReasonCount]
    reason: str


VIEW: Final = ModelArtifactProgress


manifest_digest = wire.text_at("manifestDigest")
"""The digest counted; ``""`` when there is nothing to count (then ``reason`` says why)."""
size_bytes = wire.integer_at("sizeBytes")


def ready(obj: wire.Readable) -> int:
    return wire.integer(obj, "ready") or 0


def downloading(obj: wire.Readable) -> int:
    return wire.integer(obj, "downloading") or 0


def failed(obj: wire.Readable) -> int:
    return wire.integer(obj, "failed") or 0


downloading_percent = wire.integer_at("downloadingPercent")
"""The downloading nodes' mean, whole percent; None when none downloads."""


def downloading_bytes(obj: wire.Readable) -> int:
    return wire.integer(obj, "downloadingBytes") or 0


def live(obj: wire.Readable) -> int:
    """Downloading nodes read from their plugin for this answer."""
    return wire.integer(obj, "live") or 0


def failure_reasons(obj: wire.Readable) -> list[tuple[str, int]]:
    """(reason, failed nodes) pairs, as the body orders them."""
    return [(wire.text(item, "reason"), wire.integer(item, "count") or 0)
            for item in wire.items(obj, "failureReasons")]


reason = wire.text_at("reason")
"""Why there is nothing to count (not resolved yet, a claim or an image source)."""
