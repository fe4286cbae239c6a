"""The reason vocabularies of worker.gpustack.ai/v1: failure reasons and condition reasons.

The one owner: the schema's enums, the node plugin's attempt outcomes, the hub clients' errors and
the controllers' conditions all take their words from here
(``tests/unit/openapi/test_wire_owners.py`` fails on a second copy).
"""

from __future__ import annotations

import enum
from typing import Final, Literal

INVALID_REQUEST: Final = "InvalidRequest"
ACCESS_DENIED: Final = "AccessDenied"
SOURCE_UNAVAILABLE: Final = "SourceUnavailable"
INTEGRITY_MISMATCH: Final = "IntegrityMismatch"
INSUFFICIENT_CAPACITY: Final = "InsufficientCapacity"
CANCELED: Final = "Canceled"
REVISION_NOT_FOUND: Final = "RevisionNotFound"
ENTRY_NOT_FOUND: Final = "EntryNotFound"


class FailureReason(enum.Enum):
    """Why a node's attempt at a digest failed (``status.models[].reason``, failureReasons)."""

    INVALID_REQUEST = INVALID_REQUEST
    """The request cannot be executed as given; never backed off."""
    ACCESS_DENIED = ACCESS_DENIED
    SOURCE_UNAVAILABLE = SOURCE_UNAVAILABLE
    INTEGRITY_MISMATCH = INTEGRITY_MISMATCH
    INSUFFICIENT_CAPACITY = INSUFFICIENT_CAPACITY
    CANCELED = CANCELED
    """The attempt was stopped (the plugin is stopping); never backed off."""


FAILURE_REASONS: tuple[str, ...] = tuple(reason.value for reason in FailureReason)
FailureReasonWord = Literal["InvalidRequest", "AccessDenied", "SourceUnavailable",
                            "IntegrityMismatch", "InsufficientCapacity", "Canceled"]
"""``FailureReason``'s values, as the views type them."""

HubReason = Literal[
    "AccessDenied", "RevisionNotFound", "SourceUnavailable", "InvalidRequest", "EntryNotFound"]
HUB_REASONS: Final[tuple[HubReason, ...]] = (
    ACCESS_DENIED, REVISION_NOT_FOUND, SOURCE_UNAVAILABLE, INVALID_REQUEST, ENTRY_NOT_FOUND)
"""Why a hub refused or failed (``hub.errors.HubError.reason``); the resolver and the node plugin
map them onto their own vocabularies. ``EntryNotFound``: one file of a listing is gone."""

# Condition types, per kind.
RESOLVED: Final = "Resolved"
DEGRADED: Final = "Degraded"
READY: Final = "Ready"
CAPACITY_LOW: Final = "CapacityLow"
AVAILABLE: Final = "Available"
PROGRESSING: Final = "Progressing"
ARTIFACT_CONDITIONS = (RESOLVED, DEGRADED)
STORE_CONDITIONS = (READY, CAPACITY_LOW)
LAPSED: Final = "Lapsed"
PREFETCH_CONDITIONS = (AVAILABLE, PROGRESSING, DEGRADED, LAPSED)
# The pool layer's and the grant's conditions (issue 39; docs/api.md, "ModelStore").
SELECTOR_OVERLAP: Final = "SelectorOverlap"
OVER_QUOTA: Final = "OverQuota"
MODEL_STORE_CONDITIONS = (SELECTOR_OVERLAP,)
BINDING_CONDITIONS = (OVER_QUOTA,)

# Reasons of a ModelArtifact's Resolved condition; Degraded says Healthy or one of these.
# (``Resolved`` is both the condition type and the reason of its success.)
RESOLVING: Final = "Resolving"
SECRET_NOT_FOUND: Final = "SecretNotFound"
CLAIM_NOT_FOUND: Final = "ClaimNotFound"
DIGEST_MISMATCH: Final = "DigestMismatch"
EMPTY_MANIFEST: Final = "EmptyManifest"
UNSUPPORTED_SOURCE: Final = "UnsupportedSource"
ANCHOR_NOT_GRANTED: Final = "AnchorNotGranted"
"""The hub is unreachable and the anchor may not stand for it: the namespace has no proof of
access to that digest (``openapi.anchors``)."""
RESOLVED_REASONS = (
    RESOLVED, RESOLVING, SECRET_NOT_FOUND, CLAIM_NOT_FOUND, REVISION_NOT_FOUND, ACCESS_DENIED,
    SOURCE_UNAVAILABLE, DIGEST_MISMATCH, EMPTY_MANIFEST, UNSUPPORTED_SOURCE, ANCHOR_NOT_GRANTED,
)
HEALTHY: Final = "Healthy"
TERMINAL_RESOLVED_REASONS: Final = (
    REVISION_NOT_FOUND, ACCESS_DENIED, EMPTY_MANIFEST, DIGEST_MISMATCH, UNSUPPORTED_SOURCE)
"""``Resolved=False`` reasons that retrying alone cannot fix: the worker still retries (a Secret
change retries at once), but a client waiting for the resolution stops and reports them.
``SecretNotFound`` and ``ClaimNotFound`` are not among them: the object may be created next."""

# Reasons of a NodeModelStore's conditions (Ready's list is open: these are the known ones).
SERVING = "Serving"
INVALID_CONFIGURATION = "InvalidConfiguration"
WITHIN_WATERMARKS = "WithinWatermarks"
NOTHING_TO_REMOVE = "NothingToRemove"

# Reasons of a ModelStore's SelectorOverlap and a ModelStoreBinding's OverQuota.
OVERLAPS: Final = "Overlaps"
"""Another store's selector matches some of the same nodes (the alphabetically first wins)."""
DISJOINT: Final = "Disjoint"
WITHIN_QUOTA: Final = "WithinQuota"
QUOTA_EXCEEDED: Final = "QuotaExceeded"
USAGE_UNKNOWN: Final = "UsageUnknown"
"""A referenced artifact has not resolved: its size is unknown, so usage is not counted."""

# Reasons of a ModelPrefetch's conditions and of its nodes' entries (docs/api.md, "ModelPrefetch").
ARTIFACT_NOT_FOUND = "ArtifactNotFound"
ARTIFACT_NOT_RESOLVED = "ArtifactNotResolved"
NO_TARGETS = "NoTargets"
ENOUGH_READY = "EnoughReady"
TOO_FEW_READY = "TooFewReady"
WARMING = "Warming"
COMPLETE = "Complete"
NODES_FAILED = "NodesFailed"
NO_NODE_STORE = "NoNodeStore"
"""A target node without a NodeModelStore: the plugin does not run there."""
DELIVERY_FAILED = "DeliveryFailed"
"""The warm-up (Pod or plugin request) failed before the node reported the digest."""
NO_NODE_PLUGIN = "NoNodePlugin"
"""No node plugin Pod of a DaemonSet runs on the node now: its warm-up Pod waits for one."""
TAINT_NOT_TOLERATED = "TaintNotTolerated"
"""The node has a taint the plugin's DaemonSet, or a warm-up Pod, does not tolerate: no Pod."""
UNSCHEDULABLE = "Unschedulable"
"""kube-scheduler cannot place the node's warm-up Pod there (a cordon, resources, ...)."""
RETENTION_EXPIRED: Final = "RetentionExpired"
"""Lapsed: copies went unused past ttlAfterLastUse, were unpinned and are not warmed again."""
NOT_LAPSED: Final = "NotLapsed"
BINDING_NOT_FOUND: Final = "BindingNotFound"
"""The prefetch's ModelStoreBinding does not exist (or it has none): nothing is warmed."""

CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
"""What any condition reason must look like: a CamelCase word (kube's metav1.Condition rule)."""
CONDITION_REASON_RULE = (
    "must be a CamelCase word of letters, digits, '_', ',' or ':', starting with a letter")
CONDITION_REASON_MAX = 1024

# The Events of the warm-gate controller on a gated Pod (``controllers/warmgate``).
WAITING_FOR_WARM_NODE: Final = "WaitingForWarmNode"
"""Normal: no node holds a digest of the Pod yet; it stays gated."""
WARM_NODE_FOUND: Final = "WarmNodeFound"
"""Normal: nodes hold every digest; the Pod is narrowed to them and released."""
MODEL_ARTIFACT_GONE: Final = "ModelArtifactGone"
"""Warning: an artifact a model volume names is gone (or re-created); the Pod stays gated."""
