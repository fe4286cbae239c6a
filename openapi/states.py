"""The status vocabularies that are not reasons: the one place their words are spelled.

Each is ``Final`` constants plus a ``Literal`` alias the views use (``openapi.kinds``):

- a node's content, ``NodeModelStore status.models[].state``: ``MODEL_STATES``;
- a prefetch's node, ``ModelPrefetch status.nodes[].phase``: ``PHASES``;
- where a node's bytes came from, ``status.models[].source``: ``ORIGINS``;
- the node plugin's answer to ``POST /model/prefetches`` (``openapi.plugin``): ``DELIVERY_STATES``.

A digest's source (``status.resolved.digestSource``, Hub or Expected) is an anchor's word and
lives in ``openapi.anchors``. ``tests/unit/openapi/test_wire_owners.py`` fails when one of these
words is spelled outside its owner.
"""

from __future__ import annotations

from typing import Final, Literal

PENDING: Final = "Pending"
DOWNLOADING: Final = "Downloading"
READY: Final = "Ready"
FAILED: Final = "Failed"
PUBLISHED: Final = "Published"

ModelState = Literal["Downloading", "Ready", "Failed"]
MODEL_STATES: Final[tuple[ModelState, ...]] = (DOWNLOADING, READY, FAILED)
"""Where a node's content stands: being downloaded, published, or failed (waiting to retry)."""

Phase = Literal["Pending", "Downloading", "Ready", "Failed"]
PHASES: Final[tuple[Phase, ...]] = (PENDING, DOWNLOADING, READY, FAILED)
"""A prefetch's target node: not started (or not reported), then as its content stands."""

HUB: Final = "Hub"
PEER: Final = "Peer"
Origin = Literal["Hub", "Peer"]
ORIGINS: Final[tuple[Origin, ...]] = (HUB, PEER)
"""Where most of a node's bytes came from: the hub, or another node's plugin."""

DeliveryState = Literal["Published", "Downloading", "Failed"]
DELIVERY_STATES: Final[tuple[DeliveryState, ...]] = (PUBLISHED, DOWNLOADING, FAILED)
"""The plugin's answer to a prefetch request: the tree is published, an attempt runs, or the
last attempt failed (with its reason)."""
