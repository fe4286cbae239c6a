"""ModelArtifact: the view of the kind and the one reader of each field other parts read.

Readers take the view or an ``Obj`` fresh from the wire and never raise on a missing or mistyped
field: they answer ``""``, ``None``, ``0`` or an empty value, as an object still unresolved would.
"""

from __future__ import annotations

from typing import Final, TypedDict

from openapi import anchors, reasons, resources, sources, wire

KIND: Final = resources.MODEL_ARTIFACT.kind
CONDITIONS: Final = reasons.ARTIFACT_CONDITIONS


class SecretRef(TypedDict):
    name: str


class _HubSourceRequired(TypedDict):
    repository: str


class HubSource(_HubSourceRequired, total=False):
    revision: str
    secretRef: SecretRef


class _ClaimSourceRequired(TypedDict):
    claimName: str


class ClaimSource(_ClaimSourceRequired, total=False):
    path: str


class ImageSource(TypedDict):
    reference: str


class Source(TypedDict, total=False):
    """Exactly one member is set (admission's rule)."""

    huggingFace: HubSource
    modelScope: HubSource
    persistentVolumeClaim: ClaimSource
    image: ImageSource


class _SpecRequired(TypedDict):
    source: Source


class ModelArtifactSpec(_SpecRequired, total=False):
    allowPatterns: list[str]
    ignorePatterns: list[str]
    expectedDigest: str


class Resolved(TypedDict, total=False):
    revision: str
    manifestDigest: str
    digestSource: anchors.DigestSource
    anchorProof: anchors.Proof
    fileCount: int
    sizeBytes: int
    resolvedTime: str
    lastValidatedTime: str


class NodeCounts(TypedDict, total=False):
    ready: int
    downloading: int
    failed: int
    downloadingPercent: int


class AnchorGrant(TypedDict, total=False):
    grantedTime: str


class ModelArtifactStatus(TypedDict, total=False):
    observedGeneration: int
    resolved: Resolved
    nodes: NodeCounts
    anchorGrant: AnchorGrant
    retryTime: str
    conditions: list[wire.Condition]


class _ModelArtifactRequired(TypedDict):
    spec: ModelArtifactSpec


class ModelArtifact(wire.Envelope, _ModelArtifactRequired, total=False):
    status: ModelArtifactStatus


VIEW: Final = ModelArtifact

NOT_RESOLVED: Final = (
    "The artifact is not resolved yet, so there is no content to count; progress appears once "
    "its manifest digest is known.")
CLAIM_COUNTS_NOTHING: Final = (
    "The artifact's files come from its PersistentVolumeClaim, mounted from the volume and never "
    "downloaded, so there is nothing to count.")
IMAGE_COUNTS_NOTHING: Final = (
    "The artifact's files come from an image that the container runtime pulls, so no node "
    "downloads it through the model store and there is nothing to count.")


# The spec.

spec = wire.mapping_at("spec")


def source_kind(obj: wire.Readable) -> str:
    """The member of ``spec.source`` that is set (``sources.KINDS``), ``""`` when none is."""
    source = wire.mapping(obj, "spec", "source")
    return next((kind for kind in sources.KINDS if isinstance(source.get(kind), dict)), "")


def source_member(obj: wire.Readable) -> wire.Readable:
    """The body of the source that is set (a hub's, a claim's or an image's)."""
    kind = source_kind(obj)
    return wire.mapping(obj, "spec", "source", kind) if kind else {}


def hub_member(obj: wire.Readable) -> wire.Readable:
    """The hub source's body; empty for a claim, an image or no source."""
    return source_member(obj) if sources.hub_kind(source_kind(obj)) else {}


def repository(obj: wire.Readable) -> str:
    """The hub source's ``owner/name``."""
    return wire.text(hub_member(obj), "repository")


def source_revision(obj: wire.Readable) -> str:
    """The hub source's revision as written (a branch, tag or commit); ``""`` when unset."""
    return wire.text(hub_member(obj), "revision")


def secret_name(obj: wire.Readable) -> str:
    """The Secret a hub source's ``secretRef`` names; ``""`` for none."""
    return wire.text(hub_member(obj), "secretRef", "name")


claim_name = wire.text_at("spec", "source", sources.CLAIM, "claimName")
image_reference = wire.text_at("spec", "source", sources.IMAGE, "reference")
expected_digest = wire.text_at("spec", "expectedDigest")
"""``spec.expectedDigest``, the anchor; ``""`` when unset."""


def allow_patterns(obj: wire.Readable) -> list[str]:
    return wire.strings(obj, "spec", "allowPatterns")


def ignore_patterns(obj: wire.Readable) -> list[str]:
    return wire.strings(obj, "spec", "ignorePatterns")


# The status.

status = wire.mapping_at("status")


def of_status(found: wire.Readable) -> wire.Readable:
    """An artifact holding only ``found`` as its status: the status readers below, for the
    worker, which edits a status on its own (``of_status(status)`` then ``manifest_digest``)."""
    return {"status": found}


def drop_resolution(found: wire.Obj) -> None:
    """Remove ``resolved`` from a status being written (a withdrawn resolution)."""
    found.pop("resolved", None)


def drop_retry_time(found: wire.Obj) -> None:
    """Remove ``retryTime`` from a status being written (resolved, or nothing scheduled)."""
    found.pop("retryTime", None)


retry_time = wire.text_at("status", "retryTime")
"""When the worker next tries while the artifact is not resolved (RFC 3339); ``""``."""


def terminal_reason(obj: wire.Readable) -> str:
    """The ``Resolved=False`` reason when retrying alone cannot fix it (a repository or revision
    that does not exist, access denied, nothing kept, the wrong digest: someone must change the
    spec, the Secret or the grant); ``""`` otherwise (resolved, resolving, an outage, a Secret
    or claim still to be created)."""
    found = resolved_condition(obj)
    if found is None or wire.text(found, "status") != wire.FALSE:
        return ""
    reason = wire.text(found, "reason")
    return reason if reason in reasons.TERMINAL_RESOLVED_REASONS else ""


resolved = wire.mapping_at("status", "resolved")
"""``status.resolved``; empty before the first resolution."""
manifest_digest = wire.text_at("status", "resolved", "manifestDigest")
"""The digest the artifact resolved to; ``""`` while unresolved."""
revision = wire.text_at("status", "resolved", "revision")
"""The commit the source's revision resolved to; ``""`` for none (or an anchor's)."""
size_bytes = wire.integer_at("status", "resolved", "sizeBytes")
"""The manifest's size; None while unknown."""
file_count = wire.integer_at("status", "resolved", "fileCount")
digest_source = wire.text_at("status", "resolved", "digestSource")
"""``Hub`` or ``Expected`` (``openapi.anchors``); ``""`` while unresolved."""
anchor_proof = wire.text_at("status", "resolved", "anchorProof")
"""What lets an ``Expected`` identity be mounted (``anchors.PROOFS``); ``""`` for none."""
resolved_time = wire.text_at("status", "resolved", "resolvedTime")
last_validated = wire.text_at("status", "resolved", "lastValidatedTime")
"""When access was last confirmed (RFC 3339; ``timing.clock.parse`` reads it)."""
anchor_granted = wire.text_at("status", "anchorGrant", "grantedTime")
"""``status.anchorGrant.grantedTime``; ``""`` without a grant."""
NODE_COUNTS: Final = "nodes"
"""``status.nodes``: computed when read, never stored (``apiserver/registry/nodecounts.py``)."""
node_counts = wire.mapping_at("status", NODE_COUNTS)
"""``status.nodes`` (ready, downloading, failed, downloadingPercent); empty when not counted."""


def anchored(obj: wire.Readable) -> bool:
    """Resolved to its anchor, without the hub."""
    return digest_source(obj) == anchors.DIGEST_FROM_ANCHOR


def has_anchor_grant(obj: wire.Readable) -> bool:
    return isinstance(wire.dig(obj, "status", "anchorGrant"), dict)


def resolved_condition(obj: wire.Readable) -> wire.Readable | None:
    """The ``Resolved`` condition, None before the first."""
    return wire.condition(status(obj), reasons.RESOLVED)


def is_resolved(obj: wire.Readable) -> bool:
    return wire.is_true(status(obj), reasons.RESOLVED)


def hub_digest(obj: wire.Readable) -> tuple[str, str]:
    """(digest, why): the digest whose copies count as the artifact's progress, or why there is
    nothing to count (a claim, an image, not resolved yet)."""
    kind = source_kind(obj)
    if kind == sources.CLAIM:
        return "", CLAIM_COUNTS_NOTHING
    if kind == sources.IMAGE:
        return "", IMAGE_COUNTS_NOTHING
    digest = manifest_digest(obj)
    return (digest, "") if digest else ("", NOT_RESOLVED)
