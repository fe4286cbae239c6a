"""The values ``kube.gpustack`` sends and reads: the sources and a prefetch's spec as the schema
spells them, and an artifact and a node store as the GPUStack server reads them."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

from kube import delivery
from kube.delivery import ResolutionFailed
from openapi import keys, sources, states, wire
from openapi.kinds import modelartifact, nodemodelstore
from openapi.sources import HubKind as HubKind


@dataclasses.dataclass(frozen=True, slots=True)
class HubSource:
    """A Hugging Face or ModelScope repository (``revision`` empty: the hub's default branch)."""

    kind: HubKind
    repository: str
    revision: str = ""
    secret_name: str = ""

    def spec(self) -> wire.Obj:
        member: wire.Obj = {"repository": self.repository}
        if self.revision:
            member["revision"] = self.revision
        if self.secret_name:
            member["secretRef"] = {"name": self.secret_name}
        return {self.kind: member}


@dataclasses.dataclass(frozen=True, slots=True)
class ClaimSource:
    claim_name: str
    path: str = ""

    def spec(self) -> wire.Obj:
        member: wire.Obj = {"claimName": self.claim_name}
        if self.path:
            member["path"] = self.path
        return {sources.CLAIM: member}


@dataclasses.dataclass(frozen=True, slots=True)
class ImageSource:
    reference: str
    """Pinned by digest (``name@sha256:...``)."""

    def spec(self) -> wire.Obj:
        return {sources.IMAGE: {"reference": self.reference}}


Source = HubSource | ClaimSource | ImageSource


@dataclasses.dataclass(frozen=True, slots=True)
class PrefetchSpec:
    """A ModelPrefetch's spec in the upstream shape: warm ``artifact`` (same namespace) under the
    ModelStoreBinding ``binding`` on the nodes of its stores that ``match_labels`` selects and,
    when ``node_names`` is given, only those nodes (``kubernetes.io/hostname In``); neither
    selects every node of the binding's stores. ``min_ready`` Ready nodes make it Available (0:
    every target); ``pinned`` (needs the binding's ``allowPinned``) keeps the copies against
    collection while the prefetch exists, until a copy went unused for ``ttl_after_last_use`` (a
    duration such as ``72h``; empty: no limit); ``cleanup_on_delete`` removes them at once when
    the prefetch is deleted."""

    artifact: str
    binding: str
    node_names: tuple[str, ...] = ()
    match_labels: Mapping[str, str] | None = None
    min_ready: int = 0
    pinned: bool = False
    ttl_after_last_use: str = ""
    cleanup_on_delete: bool = False

    def spec(self) -> wire.Obj:
        selector: wire.Obj = {}
        if self.match_labels:
            selector["matchLabels"] = dict(self.match_labels)
        if self.node_names:
            selector["matchExpressions"] = [{"key": keys.HOSTNAME, "operator": "In",
                                             "values": list(self.node_names)}]
        found: wire.Obj = {"artifactRef": {"name": self.artifact},
                           "bindingRef": {"name": self.binding}}
        if selector:
            found["placement"] = {"nodeSelector": selector}
        if self.min_ready:
            found["minReady"] = self.min_ready
        retention: wire.Obj = {"pinned": self.pinned}
        if self.ttl_after_last_use:
            retention["ttlAfterLastUse"] = self.ttl_after_last_use
        if self.cleanup_on_delete:
            retention["cleanupOnDelete"] = True
        found["retention"] = retention
        return found


@dataclasses.dataclass(frozen=True, slots=True)
class Artifact:
    """A ModelArtifact as the GPUStack server reads it."""

    namespace: str
    name: str
    uid: str
    resolved: bool
    reason: str
    """The Resolved condition's reason (``Resolving``, ``AccessDenied`` ...), empty before any."""
    message: str
    revision: str
    manifest_digest: str
    size_bytes: int
    raw: wire.Obj = dataclasses.field(repr=False, compare=False)
    terminal_reason: str = ""
    """The ``Resolved=False`` reason when retrying alone cannot fix it; ``""`` otherwise."""
    retry_time: datetime.datetime | None = None
    """When the worker tries again while not resolved; None when none is scheduled."""

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Artifact:
        meta = obj.get("metadata") or {}
        condition = modelartifact.resolved_condition(obj) or {}
        return cls(
            namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""), resolved=condition.get("status") == wire.TRUE,
            reason=str(condition.get("reason") or ""),
            message=str(condition.get("message") or ""),
            revision=modelartifact.revision(obj),
            manifest_digest=modelartifact.manifest_digest(obj),
            size_bytes=modelartifact.size_bytes(obj) or 0, raw=dict(obj),
            terminal_reason=modelartifact.terminal_reason(obj),
            retry_time=delivery.time_of(modelartifact.retry_time(obj)),
        )  # fmt: skip

    def failure(self) -> ResolutionFailed | None:
        """The terminal failure to raise, None when there is none."""
        if not self.terminal_reason:
            return None
        return ResolutionFailed(self.namespace, self.name, self.terminal_reason, self.message,
                                self.retry_time)


@dataclasses.dataclass(frozen=True, slots=True)
class NodeStore:
    """A node's cache as its NodeModelStore reports it."""

    node: str
    ready: bool
    total_bytes: int
    stored_bytes: int
    models: tuple[wire.Obj, ...]
    """``status.models``: each a digest, its state and sizes."""
    used_percent: int | None = None
    """``status.capacity.usedPercent`` (a multiple of 5), None before the plugin reported."""
    conditions: tuple[wire.Obj, ...] = ()
    """``status.conditions``: Ready, CapacityLow."""
    pinned: tuple[str, ...] = ()
    """``spec.pinned``: the digests the node never collects."""
    store: str = ""
    """``spec.store``: the ModelStore (pool) merged into the node's spec; ``""`` for none."""
    paused: bool = False
    """The pool's ``pauseCollection`` is in force on the node."""
    evicting: tuple[str, ...] = ()
    """The pool's ``evictDigests`` in force on the node."""

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> NodeStore:
        conditions = tuple(dict(c) for c in wire.items(obj, "status", "conditions"))
        return cls(node=str((obj.get("metadata") or {}).get("name") or ""),
                   ready=nodemodelstore.ready(obj),
                   total_bytes=nodemodelstore.total_bytes(obj) or 0,
                   stored_bytes=nodemodelstore.stored_bytes(obj) or 0,
                   models=tuple(dict(m) for m in nodemodelstore.models(obj)),
                   used_percent=nodemodelstore.used_percent(obj),
                   conditions=conditions, pinned=tuple(nodemodelstore.pinned(obj)),
                   store=nodemodelstore.store(obj),
                   paused=nodemodelstore.pause_collection(obj),
                   evicting=tuple(nodemodelstore.evict_digests(obj)))

    def holds(self, digest: str) -> bool:
        """The node holds ``digest`` published (state Ready)."""
        found = self.entry(digest)
        return found is not None and nodemodelstore.entry_state(found) == states.READY

    def entry(self, digest: str) -> wire.Obj | None:
        """This node's ``status.models`` entry for ``digest`` (any state), None if unlisted."""
        return next((m for m in self.models if nodemodelstore.entry_digest(m) == digest), None)

    def condition(self, kind: str) -> wire.Obj | None:
        return next((c for c in self.conditions if c.get("type") == kind), None)
