"""A NodeModelStore's ``spec`` as the plugin applies it, checked by the plugin's own rules.

The server validated the object already, but a value can reach ``spec`` without admission (a
default seeded from the environment, an older server), so the plugin checks again: the schema's
rules (``openapi.validation``), the hub endpoints and proxy as the hub client will use them, and
kubelet's thresholds as the capacity rule reads them. A failure is ``SpecError`` naming the field
and the rule; the plugin then sets ``Ready=False, InvalidConfiguration`` and applies nothing of
that spec, and nothing of an earlier one either.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from hub import config as hub_config
from hub import errors as hub_errors
from openapi import defaults, nodestore, quantity, validation, wire
from openapi import resources as contract
from openapi.kinds import nodemodelstore

MAX_SHOWN = 200


class SpecError(ValueError):
    """The spec (or its CA ConfigMap) fails a check; ``message`` names the field and rule."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclasses.dataclass(frozen=True, slots=True)
class Kubelet:
    """The node's kubelet thresholds (``spec.kubelet``), as the worker read them from configz.

    An empty string (or None) means kubelet sets none; the capacity rule then assumes kubelet's
    default for it."""

    nodefs_available: quantity.Threshold | None = None
    imagefs_available: quantity.Threshold | None = None
    image_gc_high_percent: int | None = None
    nodefs_text: str = ""
    imagefs_text: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Hub:
    huggingface_endpoint: str
    modelscope_endpoint: str
    https_proxy: str
    no_proxy: str
    ca_bundle_configmap: str


@dataclasses.dataclass(frozen=True, slots=True)
class NodeSpec:
    generation: int
    high_percent: int
    low_percent: int
    concurrency: int
    bytes_per_second: int
    hub: Hub
    kubelet: Kubelet | None
    """None while the worker has not read the node's configz (or could not)."""
    pinned: frozenset[str] = frozenset()
    evict: frozenset[str] = frozenset()
    """Remove now, once unmounted and unpinned (``spec.evict``)."""
    store: str = ""
    """The ModelStore (pool) merged into this spec; ``""`` for none."""
    pause_collection: bool = False
    """``spec.operations.pauseCollection``: nothing is removed while set."""
    rehash_request: str = ""
    """``spec.operations.rehashRequest``: a new value asks for a full re-hash now."""
    force_evict: frozenset[str] = frozenset()
    """``spec.operations.evictDigests`` (the operator's): removed once no Pod mounts them,
    pinned or not."""


def parse(obj: dict[str, Any]) -> NodeSpec:
    """The spec of a NodeModelStore object, or ``SpecError``."""
    meta = obj.get("metadata") or {}
    generation = meta.get("generation")
    spec = copy.deepcopy(obj.get("spec"))
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise SpecError("spec: Invalid value: must be an object")
    body: dict[str, Any] = {
        "apiVersion": contract.GROUP_VERSION,
        "kind": contract.NODE_MODEL_STORE.kind,
        "metadata": {"name": str(meta.get("name") or "")},
        "spec": spec,
    }
    defaults.apply_defaults(contract.NODE_MODEL_STORE.kind, body)
    problems = validation.validate(contract.NODE_MODEL_STORE.kind, body)
    problems.extend(nodestore.watermark_errors(body))
    if problems:
        raise SpecError(_shown("; ".join(str(p) for p in problems[:3])))
    checked = Hub(
        huggingface_endpoint=nodemodelstore.huggingface_endpoint(body),
        modelscope_endpoint=nodemodelstore.modelscope_endpoint(body),
        https_proxy=nodemodelstore.https_proxy(body),
        no_proxy=nodemodelstore.no_proxy(body),
        ca_bundle_configmap=nodemodelstore.ca_bundle_configmap(body),
    )
    try:
        hub_config.check(hub_config_of(checked, ca_bundle=None))
    except hub_errors.HubError as err:
        raise SpecError(_shown(f"spec.hub: {field_names(err.message)}")) from None
    return NodeSpec(
        generation=generation if isinstance(generation, int) else 0,
        # The defaults are applied and the schema validated: every one of these is set.
        high_percent=nodemodelstore.high_percent(body) or 0,
        low_percent=nodemodelstore.low_percent(body) or 0,
        concurrency=nodemodelstore.concurrency(body) or 0,
        bytes_per_second=nodemodelstore.bytes_per_second(body) or 0,
        hub=checked,
        kubelet=_kubelet(body),
        pinned=frozenset(nodemodelstore.pinned(body)),
        evict=frozenset(nodemodelstore.evict(body)),
        store=nodemodelstore.store(body),
        pause_collection=nodemodelstore.pause_collection(body),
        rehash_request=nodemodelstore.rehash_request(body),
        force_evict=frozenset(nodemodelstore.evict_digests(body)),
    )


def hub_config_of(hub: Hub, *, ca_bundle: str | None) -> hub_config.HubConfig:
    return hub_config.HubConfig(
        huggingface_endpoint=hub.huggingface_endpoint,
        modelscope_endpoint=hub.modelscope_endpoint,
        https_proxy=hub.https_proxy or None,
        no_proxy=hub.no_proxy,
        ca_bundle=ca_bundle,
    )


def _kubelet(store: wire.Readable) -> Kubelet | None:
    if not nodemodelstore.has_kubelet(store):
        return None
    nodefs = nodemodelstore.nodefs_available(store)
    imagefs = nodemodelstore.imagefs_available(store)
    gc = nodemodelstore.image_gc_high_percent(store)
    return Kubelet(
        nodefs_available=_threshold("spec.kubelet.nodefsAvailable", nodefs),
        imagefs_available=_threshold("spec.kubelet.imagefsAvailable", imagefs),
        image_gc_high_percent=gc,
        nodefs_text=nodefs,
        imagefs_text=imagefs,
    )


def _threshold(field: str, text: str) -> quantity.Threshold | None:
    if not text:
        return None
    try:
        return quantity.threshold(text)
    except quantity.QuantityError as err:
        raise SpecError(_shown(f"{field}: Invalid value: {err}")) from None


_HUB_FIELDS = {
    "huggingface_endpoint": "huggingFaceEndpoint",
    "modelscope_endpoint": "modelScopeEndpoint",
    "https_proxy": "httpsProxy",
}


def field_names(message: str) -> str:
    """The hub client names its settings in Python; the spec's readers know the field names."""
    for python, field in _HUB_FIELDS.items():
        message = message.replace(python, field)
    return message


def _shown(text: str) -> str:
    return text if len(text) <= MAX_SHOWN * 3 else text[: MAX_SHOWN * 3] + "..."
