"""NodeModelStore: the view of the kind and the one reader of each field other parts read.

The spec is the worker's (``controllers/nodestores``), the status the node plugin's
(``nodeplugin/nodestore``); the progress view, the prefetches, the peers and the clients read
both through these readers. They never raise on a missing or mistyped field.
"""

from __future__ import annotations

from typing import Final, Literal, TypedDict

from openapi import reasons, resources, states, wire

KIND: Final = resources.NODE_MODEL_STORE.kind
CONDITIONS: Final = reasons.STORE_CONDITIONS


class Watermarks(TypedDict, total=False):
    highPercent: int
    lowPercent: int


class Download(TypedDict, total=False):
    concurrency: int
    bytesPerSecond: int


class HubSettings(TypedDict, total=False):
    huggingFaceEndpoint: str
    modelScopeEndpoint: str
    httpsProxy: str
    noProxy: str
    caBundleConfigMap: str


class Kubelet(TypedDict, total=False):
    nodefsAvailable: str
    imagefsAvailable: str
    imageGCHighThresholdPercent: int


class Spec(TypedDict, total=False):
    watermarks: Watermarks
    download: Download
    hub: HubSettings
    kubelet: Kubelet
    pinned: list[str]


class Capacity(TypedDict, total=False):
    totalBytes: int
    storedBytes: int
    usedPercent: int


class _ModelEntryRequired(TypedDict):
    digest: str
    state: states.ModelState


class ModelEntry(_ModelEntryRequired, total=False):
    """One digest on the node."""

    sizeBytes: int
    downloadedBytes: int
    source: states.Origin
    referenced: bool
    lastUsedTime: str | None
    reason: Literal["", reasons.FailureReasonWord]
    message: str
    retryTime: str | None


class Peer(TypedDict):
    url: str


class Status(TypedDict, total=False):
    observedGeneration: int
    capacity: Capacity
    models: list[ModelEntry]
    peer: Peer
    conditions: list[wire.Condition]


class NodeModelStore(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: wire.ObjectMeta
    spec: Spec
    status: Status


VIEW: Final = NodeModelStore


# The spec.

def spec(obj: wire.Readable) -> wire.Readable:
    return wire.mapping(obj, "spec")


def pinned(obj: wire.Readable) -> list[str]:
    """``spec.pinned``: the digests never collected on this node."""
    return wire.strings(obj, "spec", "pinned")


def watermarks(obj: wire.Readable) -> wire.Readable:
    return wire.mapping(obj, "spec", "watermarks")


def high_percent(obj: wire.Readable) -> int | None:
    return wire.integer(obj, "spec", "watermarks", "highPercent")


def low_percent(obj: wire.Readable) -> int | None:
    return wire.integer(obj, "spec", "watermarks", "lowPercent")


def concurrency(obj: wire.Readable) -> int | None:
    return wire.integer(obj, "spec", "download", "concurrency")


def bytes_per_second(obj: wire.Readable) -> int | None:
    """The node's bandwidth cap; 0 is unlimited."""
    return wire.integer(obj, "spec", "download", "bytesPerSecond")


def huggingface_endpoint(obj: wire.Readable) -> str:
    return wire.text(obj, "spec", "hub", "huggingFaceEndpoint")


def modelscope_endpoint(obj: wire.Readable) -> str:
    return wire.text(obj, "spec", "hub", "modelScopeEndpoint")


def https_proxy(obj: wire.Readable) -> str:
    return wire.text(obj, "spec", "hub", "httpsProxy")


def no_proxy(obj: wire.Readable) -> str:
    return wire.text(obj, "spec", "hub", "noProxy")


def ca_bundle_configmap(obj: wire.Readable) -> str:
    """The ConfigMap (in the worker's namespace) whose ``ca.crt`` holds extra CAs; ``""``."""
    return wire.text(obj, "spec", "hub", "caBundleConfigMap")


def has_kubelet(obj: wire.Readable) -> bool:
    """The worker read the node's kubelet thresholds (``spec.kubelet`` is set)."""
    return isinstance(wire.dig(obj, "spec", "kubelet"), dict)


def nodefs_available(obj: wire.Readable) -> str:
    """kubelet's ``evictionHard`` ``nodefs.available``; ``""`` when unset."""
    return wire.text(obj, "spec", "kubelet", "nodefsAvailable")


def imagefs_available(obj: wire.Readable) -> str:
    return wire.text(obj, "spec", "kubelet", "imagefsAvailable")


def image_gc_high_percent(obj: wire.Readable) -> int | None:
    return wire.integer(obj, "spec", "kubelet", "imageGCHighThresholdPercent")


# The status.

def status(obj: wire.Readable) -> wire.Readable:
    return wire.mapping(obj, "status")


def models(obj: wire.Readable) -> list[wire.Readable]:
    """``status.models``: one entry per digest on the node (``entry_*`` read each)."""
    return wire.items(obj, "status", "models")


def entry(obj: wire.Readable, digest: str) -> wire.Readable | None:
    """The node's entry for ``digest`` (any state); None when the node does not list it."""
    return next((found for found in models(obj) if entry_digest(found) == digest), None)


def holds(obj: wire.Readable, digest: str) -> bool:
    """The node holds ``digest`` published (state Ready)."""
    found = entry(obj, digest)
    return found is not None and entry_state(found) == states.READY


def capacity(obj: wire.Readable) -> wire.Readable:
    return wire.mapping(obj, "status", "capacity")


def total_bytes(obj: wire.Readable) -> int | None:
    return wire.integer(capacity(obj), "totalBytes")


def stored_bytes(obj: wire.Readable) -> int | None:
    return wire.integer(capacity(obj), "storedBytes")


def used_percent(obj: wire.Readable) -> int | None:
    """``status.capacity.usedPercent`` (a multiple of 5); None before the plugin reported."""
    return wire.integer(capacity(obj), "usedPercent")


def peer_url(obj: wire.Readable) -> str:
    """Where the other plugins reach this node's peer port; ``""`` while it serves none."""
    return wire.text(obj, "status", "peer", "url")


def ready(obj: wire.Readable) -> bool:
    """The store's Ready condition says True."""
    return wire.is_true(status(obj), reasons.READY)


# One entry of status.models.

def entry_digest(found: wire.Readable) -> str:
    return wire.text(found, "digest")


def entry_state(found: wire.Readable) -> str:
    """``Downloading``, ``Ready`` or ``Failed`` (``states.MODEL_STATES``)."""
    return wire.text(found, "state")


def entry_size(found: wire.Readable) -> int | None:
    """The manifest's size, once listed."""
    return wire.integer(found, "sizeBytes")


def entry_downloaded(found: wire.Readable) -> int | None:
    """What the current attempt holds."""
    return wire.integer(found, "downloadedBytes")


def entry_source(found: wire.Readable) -> str:
    """``Hub`` or ``Peer`` (``states.ORIGINS``); ``""`` when not recorded."""
    return wire.text(found, "source")


def entry_referenced(found: wire.Readable) -> bool:
    """Some Pod on the node mounts it."""
    return wire.dig(found, "referenced") is True


def entry_last_used(found: wire.Readable) -> str:
    """Last use, truncated to the hour (RFC 3339); ``""`` when never or unknown."""
    return wire.text(found, "lastUsedTime")


def entry_reason(found: wire.Readable) -> str:
    """Why it failed (``reasons.FAILURE_REASONS``); ``""`` otherwise."""
    return wire.text(found, "reason")


def entry_message(found: wire.Readable) -> str:
    return wire.text(found, "message")


def entry_retry_time(found: wire.Readable) -> str:
    """The earliest next attempt after a failure (RFC 3339); ``""`` for none."""
    return wire.text(found, "retryTime")
