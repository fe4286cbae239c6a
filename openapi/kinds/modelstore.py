"""ModelStore: the view of the kind (a node pool's cache policy) and the one reader of each field
other parts read.

The spec is an administrator's; the status (``SelectorOverlap``, the nodes it wins) the worker's
(``controllers/pools``). Readers never raise on a missing or mistyped field.
"""

from __future__ import annotations

from typing import Final, TypedDict

from openapi import reasons, resources, wire
from openapi.kinds import nodemodelstore

KIND: Final = resources.MODEL_STORE.kind
CONDITIONS: Final = reasons.MODEL_STORE_CONDITIONS


class _SpecRequired(TypedDict):
    nodeSelector: dict[str, str]


class Spec(_SpecRequired, nodemodelstore.PoolSettings):
    """A selector, and the pool's settings in the same shapes as a node's spec."""


class Status(TypedDict, total=False):
    observedGeneration: int
    nodes: int
    conditions: list[wire.Condition]


class _ModelStoreRequired(TypedDict):
    spec: Spec


class ModelStore(wire.Envelope, _ModelStoreRequired, total=False):
    status: Status


VIEW: Final = ModelStore


def node_selector(obj: wire.Readable) -> dict[str, str] | None:
    """``spec.nodeSelector`` (``{}`` selects every node); None when unreadable."""
    found = wire.dig(obj, "spec", "nodeSelector")
    if not isinstance(found, dict):
        return None
    return {str(key): str(value) for key, value in found.items()}


def overrides(obj: wire.Readable) -> dict[str, dict[str, int]]:
    """The fields the store states, by group (``watermarks``, ``download``): only integers, so a
    field left out (or unreadable) keeps the cluster setting."""
    found: dict[str, dict[str, int]] = {}
    for group in ("watermarks", "download"):
        values = wire.mapping(obj, "spec", group)
        stated = {str(k): v for k, v in values.items()
                  if isinstance(v, int) and not isinstance(v, bool)}
        if stated:
            found[group] = stated
    return found


operations = wire.mapping_at("spec", "operations")
"""The operator's switches, copied as they are into each won node's spec."""

status = wire.mapping_at("status")
