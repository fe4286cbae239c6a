"""Typed answers of the computed subresources the GPUStack server reads through ``kube.gpustack``:
``copies`` (one row per node) and ``manifest`` (the files), and the terminal resolution error.

Built from the wire through the views of ``openapi.kinds``, so a field read here is read the
same way by every part."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

from kube import errors
from openapi import resources as contract
from openapi import states, wire
from openapi.kinds import copies as copiesview
from openapi.kinds import manifest as manifestview


@dataclasses.dataclass(frozen=True, slots=True)
class NodeCopy:
    """One node's copy of an artifact's digest (a ``copies`` row)."""

    node: str
    phase: str
    """``Pending``, ``Downloading``, ``Ready`` or ``Failed``."""
    downloaded_bytes: int
    live: bool
    """``downloaded_bytes`` was read from the node's plugin now (else: as the node stored it)."""
    size_bytes: int
    percent: int
    source: str
    reason: str
    message: str
    retry_time: datetime.datetime | None
    referenced: bool
    pinned: bool
    last_used: datetime.datetime | None
    prefetches: tuple[str, ...]

    @property
    def ready(self) -> bool:
        return self.phase == states.READY

    @classmethod
    def of(cls, row: wire.Readable) -> NodeCopy:
        return cls(
            node=copiesview.node_name(row), phase=copiesview.node_phase(row),
            downloaded_bytes=copiesview.node_downloaded(row), live=copiesview.node_live(row),
            size_bytes=copiesview.node_size(row) or 0,
            percent=copiesview.node_percent(row) or 0, source=copiesview.node_source(row),
            reason=copiesview.node_reason(row), message=copiesview.node_message(row),
            retry_time=time_of(copiesview.node_retry_time(row)),
            referenced=copiesview.node_referenced(row), pinned=copiesview.node_pinned(row),
            last_used=time_of(copiesview.node_last_used(row)),
            prefetches=tuple(copiesview.node_prefetches(row)))  # fmt: skip


@dataclasses.dataclass(frozen=True, slots=True)
class Copies:
    """``modelartifacts/{name}/copies``: where the artifact's content is, node by node."""

    namespace: str
    name: str
    manifest_digest: str
    size_bytes: int
    nodes: tuple[NodeCopy, ...]
    reason: str
    """Why there are no rows (not resolved yet, a claim or image source); ``""``."""

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Copies:
        _kind(obj, copiesview.KIND)
        return cls(namespace=wire.text(obj, "metadata", "namespace"),
                   name=wire.text(obj, "metadata", "name"),
                   manifest_digest=copiesview.manifest_digest(obj),
                   size_bytes=copiesview.size_bytes(obj) or 0,
                   nodes=tuple(NodeCopy.of(row) for row in copiesview.nodes(obj)),
                   reason=copiesview.reason(obj))

    def node(self, name: str) -> NodeCopy | None:
        return next((row for row in self.nodes if row.node == name), None)


@dataclasses.dataclass(frozen=True, slots=True)
class ManifestFile:
    path: str
    """Relative to the mount's root."""
    size: int
    sha256: str
    git_blob_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class Manifest:
    """``modelartifacts/{name}/manifest``: the files the artifact resolved to."""

    manifest_digest: str
    files: tuple[ManifestFile, ...]
    reason: str
    """Why there are no files (not resolved, a claim or image source, not recorded); ``""``."""

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Manifest:
        _kind(obj, manifestview.KIND)
        return cls(manifest_digest=manifestview.manifest_digest(obj),
                   files=tuple(ManifestFile(manifestview.file_path(f), manifestview.file_size(f),
                                            manifestview.file_sha256(f),
                                            manifestview.file_git_blob_id(f))
                               for f in manifestview.files(obj)),
                   reason=manifestview.reason(obj))

    def matching(self, suffix: str) -> list[ManifestFile]:
        """The files whose path ends in ``suffix`` (``.gguf``), in manifest order."""
        return [f for f in self.files if f.path.endswith(suffix)]


def _kind(obj: Mapping[str, Any], kind: str) -> None:
    if obj.get("kind") != kind or obj.get("apiVersion") != contract.GROUP_VERSION:
        raise errors.ServerError(200, "BadResponse", f"the server did not answer a {kind}")


class ResolutionFailed(errors.KubeError):
    """The artifact's resolution failed for a reason retrying alone cannot fix (a repository or
    revision that does not exist, access denied, nothing kept, the wrong digest): raised as soon
    as the worker says so. ``reason``, ``message`` and ``retry_time`` (the worker's next try,
    None when none is scheduled) are the artifact's."""

    def __init__(self, namespace: str, name: str, reason: str, message: str,
                 retry_time: datetime.datetime | None) -> None:
        when = f"; the worker tries again at {retry_time:%Y-%m-%dT%H:%M:%SZ}" if retry_time \
            else ""
        super().__init__(0, reason, f"{namespace}/{name} cannot be resolved: {reason}: "
                                    f"{message[:300]}{when}")
        self.reason = reason
        self.detail = message
        self.retry_time = retry_time


def time_of(text: str) -> datetime.datetime | None:
    """An RFC 3339 time of the wire (``retryTime``, ``lastUsedTime``); None when empty or
    unreadable."""
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
