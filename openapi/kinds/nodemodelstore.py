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


class Operations(TypedDict, total=False):
    """The operator's switches on a pool (issue 39)."""

    pauseCollection: bool
    rehashRequest: str
    evictDigests: list[str]


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


class PoolSettings(TypedDict, total=False):
    """What a ModelStore (a pool) sets for its nodes: merged into each node's spec as it is."""

    watermarks: Watermarks
    download: Download
    operations: Operations


class Spec(PoolSettings, total=False):
    hub: HubSettings
    kubelet: Kubelet
    store: str
    pinned: list[str]
    evict: list[str]


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


class NodeModelStore(wire.Envelope, total=False):
    spec: Spec
    status: Status


VIEW: Final = NodeModelStore


# The spec.

spec = wire.mapping_at("spec")


def pinned(obj: wire.Readable) -> list[str]:
    """``spec.pinned``: the digests never collected on this node."""
    return wire.strings(obj, "spec", "pinned")


def evict(obj: wire.Readable) -> list[str]:
    """``spec.evict``: the digests to remove now, once unmounted and unpinned."""
    return wire.strings(obj, "spec", "evict")


def spec_pinning(obj: wire.Readable, pins: list[str],
                 evicting: list[str] | None = None) -> wire.Obj:
    """A copy of ``spec`` whose ``pinned`` is ``pins`` (left out when there are none), and
    whose ``evict`` is ``evicting`` when given (likewise)."""
    pinning = {key: value for key, value in spec(obj).items()
               if key != "pinned" and (evicting is None or key != "evict")}
    if pins:
        pinning["pinned"] = list(pins)
    if evicting:
        pinning["evict"] = list(evicting)
    return pinning


watermarks = wire.mapping_at("spec", "watermarks")
store = wire.text_at("spec", "store")
"""The ModelStore merged into this spec; ``""``: the cluster settings alone."""
operations = wire.mapping_at("spec", "operations")
"""The pool's operator switches in force on this node (``{}``: none)."""


pause_collection = wire.flag_at("spec", "operations", "pauseCollection")


rehash_request = wire.text_at("spec", "operations", "rehashRequest")


def evict_digests(obj: wire.Readable) -> list[str]:
    return wire.strings(obj, "spec", "operations", "evictDigests")
high_percent = wire.integer_at("spec", "watermarks", "highPercent")
low_percent = wire.integer_at("spec", "watermarks", "lowPercent")
concurrency = wire.integer_at("spec", "download", "concurrency")
bytes_per_second = wire.integer_at("spec", "download", "bytesPerSecond")
"""The node's bandwidth cap; 0 is unlimited."""
huggingface_endpoint = wire.text_at("spec", "hub", "huggingFaceEndpoint")
modelscope_endpoint = wire.text_at("spec", "hub", "modelScopeEndpoint")
https_proxy = wire.text_at("spec", "hub", "httpsProxy")
no_proxy = wire.text_at("spec", "hub", "noProxy")
ca_bundle_configmap = wire.text_at("spec", "hub", "caBundleConfigMap")
"""The ConfigMap (in the worker's namespace) whose ``ca.crt`` holds extra CAs; ``""``."""


def has_kubelet(obj: wire.Readable) -> bool:
    """The worker read the node's kubelet thresholds (``spec.kubelet`` is set)."""
    return isinstance(wire.dig(obj, "spec", "kubelet"), dict)


nodefs_available = wire.text_at("spec", "kubelet", "nodefsAvailable")
"""kubelet's ``evictionHard`` ``nodefs.available``; ``""`` when unset."""
imagefs_available = wire.text_at("spec", "kubelet", "imagefsAvailable")
image_gc_high_percent = wire.integer_at("spec", "kubelet", "imageGCHighThresholdPercent")


# The status.

status = wire.mapping_at("status")


def of_status(found: wire.Readable) -> wire.Readable:
    """A store holding only ``found`` as its status: the status readers below, for the node
    plugin, which composes a status on its own (``models(of_status(status))``)."""
    return {"status": found}



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


capacity = wire.mapping_at("status", "capacity")
total_bytes = wire.integer_at("status", "capacity", "totalBytes")
stored_bytes = wire.integer_at("status", "capacity", "storedBytes")
used_percent = wire.integer_at("status", "capacity", "usedPercent")
"""``status.capacity.usedPercent`` (a multiple of 5); None before the plugin reported."""
peer_url = wire.text_at("status", "peer", "url")
"""Where the other plugins reach this node's peer port; ``""`` while it serves none."""


def ready(obj: wire.Readable) -> bool:
    """The store's Ready condition says True."""
    return wire.is_true(status(obj), reasons.READY)


# One entry of status.models.

entry_digest = wire.text_at("digest")
entry_state = wire.text_at("state")
"""``Downloading``, ``Ready`` or ``Failed`` (``states.MODEL_STATES``)."""
entry_size = wire.integer_at("sizeBytes")
"""The manifest's size, once listed."""
entry_downloaded = wire.integer_at("downloadedBytes")
"""What the current attempt holds."""
entry_source = wire.text_at("source")
"""Where most of its bytes came from (``states.ORIGINS``); ``""`` when not said."""


entry_referenced = wire.flag_at("referenced")
"""Some Pod on the node mounts it."""


entry_last_used = wire.text_at("lastUsedTime")
"""Last use, truncated to the hour (RFC 3339); ``""`` when never or unknown."""
entry_reason = wire.text_at("reason")
"""Why it failed (``reasons.FAILURE_REASONS``); ``""`` otherwise."""
entry_message = wire.text_at("message")
entry_retry_time = wire.text_at("retryTime")
"""The earliest next attempt after a failure (RFC 3339); ``""`` for none."""
