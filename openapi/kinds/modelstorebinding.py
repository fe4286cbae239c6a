"""ModelStoreBinding: the view of the kind (a namespace's grant) and the one reader of each field
other parts read.

The spec is an administrator's and frozen (``apiserver/admission/pools.py``); the status
(``usedBytes``, ``OverQuota``) the worker's. Readers never raise on a missing or mistyped field.
"""

from __future__ import annotations

from typing import Final, TypedDict

from openapi import reasons, resources, wire

KIND: Final = resources.MODEL_STORE_BINDING.kind
CONDITIONS: Final = reasons.BINDING_CONDITIONS


class StoreRef(TypedDict):
    name: str


class Quota(TypedDict):
    bytes: int


class _SpecRequired(TypedDict):
    storeRefs: list[StoreRef]
    quota: Quota


class Spec(_SpecRequired, total=False):
    allowPinned: bool


class Status(TypedDict, total=False):
    observedGeneration: int
    usedBytes: int
    conditions: list[wire.Condition]


class _ModelStoreBindingRequired(TypedDict):
    spec: Spec


class ModelStoreBinding(wire.Envelope, _ModelStoreBindingRequired, total=False):
    status: Status


VIEW: Final = ModelStoreBinding


def store_names(obj: wire.Readable) -> list[str]:
    """``spec.storeRefs[].name``, in order, without blanks."""
    return [name for name in (wire.text(ref, "name") for ref in wire.items(obj, "spec",
                                                                           "storeRefs")) if name]


def quota_bytes(obj: wire.Readable) -> int | None:
    """``spec.quota.bytes``; None when unreadable."""
    return wire.integer(obj, "spec", "quota", "bytes")


allow_pinned = wire.flag_at("spec", "allowPinned")
"""``spec.allowPinned``: False unless it says true (the schema's default)."""


status = wire.mapping_at("status")


def used_bytes(obj: wire.Readable) -> int | None:
    """``status.usedBytes``; None while not measured."""
    return wire.integer(obj, "status", "usedBytes")
