"""The canonical manifest (``gpustack-manifest v1``) and its digest.

One line per file, ``<algorithm>:<hex> <size> <path>``, sorted by the path's UTF-8 bytes, each line
ending in LF, after the header line. The digest is ``sha256:`` + the SHA-256 of those bytes. The
resolver and the node plugin both use this module, so they can never disagree.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable
from typing import Literal

HEADER = b"gpustack-manifest v1\n"
Algorithm = Literal["sha256", "gitsha1"]
_HEX_LENGTH: dict[str, int] = {"sha256": 64, "gitsha1": 40}
_HEX = re.compile(r"[0-9a-f]+")


class ManifestError(ValueError):
    """A file entry or a manifest text breaks the format's rules."""


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    path: str
    algorithm: Algorithm
    hexdigest: str
    size: int

    def line(self) -> bytes:
        return f"{self.algorithm}:{self.hexdigest} {self.size} {self.path}\n".encode()


def check_path(path: str) -> None:
    """Refuse a path that is not relative, clean UTF-8 without control characters."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ManifestError(f"path {path!r} is not valid UTF-8") from exc
    if not path:
        raise ManifestError("a path must not be empty")
    if path.startswith("/"):
        raise ManifestError(f"path {path!r} must be relative")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path):
        raise ManifestError(f"path {path!r} contains a control character")
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            raise ManifestError(f"path {path!r} has an empty, '.' or '..' segment")


def check_entry(entry: Entry) -> None:
    check_path(entry.path)
    want = _HEX_LENGTH.get(entry.algorithm)
    if want is None:
        raise ManifestError(f"{entry.path}: unknown algorithm {entry.algorithm!r}")
    if len(entry.hexdigest) != want or not _HEX.fullmatch(entry.hexdigest):
        raise ManifestError(f"{entry.path}: {entry.algorithm} must be {want} lowercase hex digits")
    if entry.size < 0:
        raise ManifestError(f"{entry.path}: size must not be negative")


def canonical_bytes(entries: Iterable[Entry]) -> bytes:
    """The manifest text: header, then entries sorted by UTF-8 path bytes; paths must be unique."""
    ordered = sorted(entries, key=lambda e: e.path.encode("utf-8"))
    seen: set[str] = set()
    for entry in ordered:
        check_entry(entry)
        if entry.path in seen:
            raise ManifestError(f"path {entry.path!r} appears twice")
        seen.add(entry.path)
    return HEADER + b"".join(entry.line() for entry in ordered)


def digest_of_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest(entries: Iterable[Entry]) -> str:
    return digest_of_bytes(canonical_bytes(entries))


def parse(data: bytes) -> list[Entry]:
    """Read a canonical manifest back; refuses anything that would not re-encode identically."""
    if not data.startswith(HEADER):
        raise ManifestError("missing the 'gpustack-manifest v1' header")
    if not data.endswith(b"\n") and data != HEADER:
        raise ManifestError("the last line must end in LF")
    entries: list[Entry] = []
    for raw in data[len(HEADER) :].split(b"\n")[:-1]:
        try:
            line = raw.decode("utf-8")
            head, size, path = line.split(" ", 2)
            algorithm, hexdigest = head.split(":", 1)
        except (UnicodeDecodeError, ValueError) as exc:
            raise ManifestError(f"malformed manifest line {raw[:80]!r}") from exc
        if algorithm not in _HEX_LENGTH or not size.isdigit():
            raise ManifestError(f"malformed manifest line {raw[:80]!r}")
        entries.append(Entry(path, algorithm, hexdigest, int(size)))  # type: ignore[arg-type]
    if canonical_bytes(entries) != data:
        raise ManifestError("the manifest is not in canonical order or form")
    return entries


def git_blob_sha1_prefix(size: int) -> bytes:
    """The header git hashes before a blob's bytes (``blob <size>\\0``)."""
    return b"blob %d\x00" % size
