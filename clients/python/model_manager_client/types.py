"""What the client reads and raises: artifacts, copies (one row per node), manifests, and the
errors of waiting. Built from the wire (``worker.gpustack.ai/v1``) by readers that never raise
on a missing or mistyped field."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

TERMINAL_REASONS = ("RevisionNotFound", "AccessDenied", "EmptyManifest", "DigestMismatch",
                    "UnsupportedSource")
"""``Resolved=False`` reasons that retrying alone cannot fix (the server's
``TERMINAL_RESOLVED_REASONS``): waiting stops at once on them."""


def _at(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def text(obj: Any, *path: str) -> str:
    found = _at(obj, *path)
    return found if isinstance(found, str) else ""


def _int(obj: Any, *path: str) -> int:
    found = _at(obj, *path)
    return found if isinstance(found, int) and not isinstance(found, bool) else 0


def _items(obj: Any, *path: str) -> list[Mapping[str, Any]]:
    found = _at(obj, *path)
    return [item for item in found if isinstance(item, Mapping)] if isinstance(found, list) \
        else []


def _time(text: str) -> datetime.datetime | None:
    if not text:
        return None
    try:  # Python 3.10's fromisoformat does not read "Z"
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


class ModelManagerError(Exception):
    """The API refused or failed a request: ``status`` (0 without an answer), kube's ``reason``
    word and its message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(ModelManagerError):
    pass


class Forbidden(ModelManagerError):
    pass


class AlreadyExists(ModelManagerError):
    pass


class Invalid(ModelManagerError):
    pass


@dataclasses.dataclass(frozen=True)
class Artifact:
    namespace: str
    name: str
    uid: str
    resource_version: str
    resolved: bool
    reason: str
    """The ``Resolved`` condition's reason; ``""`` before any."""
    message: str
    manifest_digest: str
    revision: str
    size_bytes: int
    file_count: int
    retry_time: datetime.datetime | None
    """While not resolved: when the worker tries again."""
    labels: Mapping[str, str]
    raw: Mapping[str, Any] = dataclasses.field(repr=False, compare=False)

    @property
    def terminal_reason(self) -> str:
        """The reason when retrying alone cannot fix the resolution; ``""`` otherwise."""
        failed = not self.resolved and self.reason in TERMINAL_REASONS and self._false
        return self.reason if failed else ""

    @property
    def _false(self) -> bool:
        return any(text(c, "type") == "Resolved" and text(c, "status") == "False"
                   for c in _items(self.raw, "status", "conditions"))

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Artifact:
        condition = next((c for c in _items(obj, "status", "conditions")
                          if text(c, "type") == "Resolved"), {})
        labels = _at(obj, "metadata", "labels")
        return cls(
            namespace=text(obj, "metadata", "namespace"), name=text(obj, "metadata", "name"),
            uid=text(obj, "metadata", "uid"),
            resource_version=text(obj, "metadata", "resourceVersion"),
            resolved=text(condition, "status") == "True", reason=text(condition, "reason"),
            message=text(condition, "message"),
            manifest_digest=text(obj, "status", "resolved", "manifestDigest"),
            revision=text(obj, "status", "resolved", "revision"),
            size_bytes=_int(obj, "status", "resolved", "sizeBytes"),
            file_count=_int(obj, "status", "resolved", "fileCount"),
            retry_time=_time(text(obj, "status", "retryTime")),
            labels=dict(labels) if isinstance(labels, Mapping) else {}, raw=obj)


@dataclasses.dataclass(frozen=True)
class NodeCopy:
    node: str
    phase: str
    """``Pending``, ``Downloading``, ``Ready`` or ``Failed``."""
    downloaded_bytes: int
    live: bool
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
        return self.phase == "Ready"

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> NodeCopy:
        prefetches = _at(row, "prefetches")
        return cls(
            node=text(row, "node"), phase=text(row, "phase"),
            downloaded_bytes=_int(row, "downloadedBytes"), live=_at(row, "live") is True,
            size_bytes=_int(row, "sizeBytes"), percent=_int(row, "percent"),
            source=text(row, "source"), reason=text(row, "reason"),
            message=text(row, "message"), retry_time=_time(text(row, "retryTime")),
            referenced=_at(row, "referenced") is True, pinned=_at(row, "pinned") is True,
            last_used=_time(text(row, "lastUsedTime")),
            prefetches=tuple(p for p in prefetches if isinstance(p, str))
            if isinstance(prefetches, list) else ())


@dataclasses.dataclass(frozen=True)
class Copies:
    namespace: str
    name: str
    manifest_digest: str
    size_bytes: int
    nodes: tuple[NodeCopy, ...]
    reason: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Copies:
        _expect(obj, "ModelArtifactCopies")
        return cls(namespace=text(obj, "metadata", "namespace"),
                   name=text(obj, "metadata", "name"),
                   manifest_digest=text(obj, "manifestDigest"),
                   size_bytes=_int(obj, "sizeBytes"),
                   nodes=tuple(NodeCopy.of(row) for row in _items(obj, "nodes")),
                   reason=text(obj, "reason"))

    def node(self, name: str) -> NodeCopy | None:
        return next((row for row in self.nodes if row.node == name), None)


@dataclasses.dataclass(frozen=True)
class ManifestFile:
    path: str
    size: int
    sha256: str
    git_blob_id: str


@dataclasses.dataclass(frozen=True)
class Manifest:
    manifest_digest: str
    files: tuple[ManifestFile, ...]
    reason: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Manifest:
        _expect(obj, "ModelArtifactManifest")
        return cls(manifest_digest=text(obj, "manifestDigest"),
                   files=tuple(ManifestFile(text(f, "path"), _int(f, "size"),
                                            text(f, "sha256"), text(f, "gitBlobId"))
                               for f in _items(obj, "files")),
                   reason=text(obj, "reason"))

    def matching(self, suffix: str) -> list[ManifestFile]:
        return [f for f in self.files if f.path.endswith(suffix)]


def _expect(obj: Mapping[str, Any], kind: str) -> None:
    if obj.get("kind") != kind:
        raise ModelManagerError(200, "BadResponse", f"the server did not answer a {kind}")


class ResolutionFailed(ModelManagerError):
    """A failure retrying alone cannot fix, raised as soon as the worker reports it."""

    def __init__(self, artifact: Artifact) -> None:
        when = (f"; the worker tries again at {artifact.retry_time:%Y-%m-%dT%H:%M:%SZ}"
                if artifact.retry_time else "")
        super().__init__(0, artifact.reason, f"{artifact.namespace}/{artifact.name} cannot be "
                         f"resolved: {artifact.reason}: {artifact.message[:300]}{when}")
        self.artifact = artifact
        self.retry_time = artifact.retry_time


class ResolutionTimeout(ModelManagerError):
    def __init__(self, artifact: Artifact, timeout: float) -> None:
        super().__init__(0, "Timeout", f"{artifact.namespace}/{artifact.name} was not resolved "
                         f"within {timeout:g}s (last: {artifact.reason or 'no verdict'})")
        self.artifact = artifact


class ReadyTimeout(ModelManagerError):
    def __init__(self, copies: Copies | None, nodes: tuple[str, ...], timeout: float) -> None:
        super().__init__(0, "Timeout", f"not Ready on {', '.join(nodes)} within {timeout:g}s")
        self.copies = copies
