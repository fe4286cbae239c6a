"""ModelArtifactManifest: the view of ``modelartifacts/{name}/manifest`` (the files the artifact
resolved to) and the readers its clients use. Served from what the resolver kept, never
written by a client. Readers never raise on a missing or mistyped field."""

from __future__ import annotations

from typing import Final, TypedDict

from openapi import resources, wire

KIND: Final = resources.MODEL_ARTIFACT_MANIFEST.kind
CONDITIONS: Final[tuple[str, ...]] = ()


class _ManifestFileRequired(TypedDict):
    path: str
    size: int


class ManifestFile(_ManifestFileRequired, total=False):
    """One file: its SHA-256 or, for a small file the hub hashes with git, its blob id."""

    sha256: str
    gitBlobId: str


class ModelArtifactManifest(wire.Envelope, total=False):
    manifestDigest: str
    fileCount: int
    sizeBytes: int
    files: list[ManifestFile]
    reason: str


VIEW: Final = ModelArtifactManifest

manifest_digest = wire.text_at("manifestDigest")
reason = wire.text_at("reason")
"""Why no file is listed; ``""`` when the files are there."""


def files(obj: wire.Readable) -> list[wire.Readable]:
    return wire.items(obj, "files")


file_path = wire.text_at("path")


def file_size(found: wire.Readable) -> int:
    return wire.integer(found, "size") or 0


file_sha256 = wire.text_at("sha256")
file_git_blob_id = wire.text_at("gitBlobId")
