"""A file as a hub lists it, and its line in the canonical manifest."""

from __future__ import annotations

import dataclasses

from openapi import manifest


@dataclasses.dataclass(frozen=True, slots=True)
class RemoteFile:
    path: str
    size: int
    # "sha256" for LFS files and every ModelScope file, "gitsha1" (git blob SHA-1) otherwise.
    algorithm: manifest.Algorithm
    hexdigest: str
    lfs: bool


def to_entry(remote: RemoteFile) -> manifest.Entry:
    return manifest.Entry(remote.path, remote.algorithm, remote.hexdigest, remote.size)
