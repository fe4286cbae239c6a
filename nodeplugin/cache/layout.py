"""Where things live under the cache root, and how names map to digests.

::

    <root>/objects/sha256/<hex>/        published trees (read-only, marker file inside)
    <root>/view/                        objects/sha256 bound read-only while the plugin runs
    <root>/partial/sha256/<hex>.<id>/   attempts in progress (files, checkpoints)
    <root>/state/                       small records, written atomically
    <root>/quarantined/<hex>.<id>/      trees that failed a check, kept while a Pod mounts them

A published tree is a directory whose marker file (``MARKER``) holds ``sha256:<hex>\\n``; a
directory under ``objects/`` without a matching marker is never mounted. A partial directory whose
attempt can be resumed holds ``RESUMABLE``; at start the plugin removes every partial directory
that does not (it belongs to no attempt).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import secrets
from collections.abc import Iterable

from openapi import grammar

ALGORITHM = "sha256"
MARKER = ".gpustack-digest"
"""Marker file inside a published tree: the digest, one line. Written last, before the rename."""
MANIFEST = ".gpustack-manifest"
"""Optional copy of the canonical manifest bytes inside a published tree (peers read it)."""
RESUMABLE = ".gpustack-attempt"
"""A partial directory holding this file belongs to a resumable attempt and survives restarts."""
RESERVED_NAMES = frozenset({MARKER, MANIFEST, RESUMABLE})
"""Top-level names a manifest may not use: they would collide with the cache's own files."""


def reserved_path(paths: Iterable[str]) -> str | None:
    """The first of a manifest's paths whose top-level name is one of ``RESERVED_NAMES``."""
    return next((path for path in paths if path.split("/", 1)[0] in RESERVED_NAMES), None)


class LayoutError(ValueError):
    """A digest or a directory name that does not fit the layout."""


@functools.lru_cache(maxsize=1024)
def hex_of(digest: str) -> str:
    """The 64 hex digits of ``sha256:<hex>``; refuses anything else. The answers for the last
    digests asked are kept (a warm mount asks for its digest's three times)."""
    if not grammar.is_digest(digest):
        raise LayoutError(f"not a sha256 digest: {digest[:80]!r}")
    return digest[len(ALGORITHM) + 1 :]


def digest_of_hex(hexdigest: str) -> str:
    digest = f"{ALGORITHM}:{hexdigest}"
    hex_of(digest)
    return digest


@dataclasses.dataclass(frozen=True, slots=True)
class Partial:
    """One attempt's staging directory ``partial/sha256/<hex>.<id>``."""

    digest: str
    attempt_id: str
    path: pathlib.Path

    @property
    def resumable(self) -> bool:
        return (self.path / RESUMABLE).exists()


class Layout:
    """Paths under one cache root. Cheap to build; ``create()`` makes the directories."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = pathlib.Path(root)
        self.objects = self.root / "objects" / ALGORITHM
        self._objects = str(self.objects)
        self.partial = self.root / "partial" / ALGORITHM
        self.state = self.root / "state"
        self.held = self.root / "quarantined"

    def create(self) -> None:
        """Create the three directories (0755: parents of trees any user may read)."""
        for path in (self.objects, self.partial, self.state):
            path.mkdir(mode=0o755, parents=True, exist_ok=True)

    # published trees -------------------------------------------------------------------------
    def published_path(self, digest: str) -> pathlib.Path:
        """``objects/sha256/<hex>``; whether it is published is ``is_published``."""
        return self.objects / hex_of(digest)

    def published_dir(self, digest: str) -> str:
        """``published_path`` as a string (what the mount calls take; no ``Path`` built)."""
        return os.path.join(self._objects, hex_of(digest))

    def is_published(self, digest: str) -> bool:
        """True when the tree exists with a marker naming exactly this digest (one small read;
        a warm mount asks this every time, so no ``Path`` is built)."""
        expected = marker_bytes(digest)
        try:
            fd = os.open(os.path.join(self._objects, hex_of(digest), MARKER),
                         os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return False
        try:
            data = os.read(fd, len(expected) + 1)
        finally:
            os.close(fd)
        return data == expected

    def published(self) -> list[str]:
        """Every digest with a published tree (marker checked)."""
        found: list[str] = []
        try:
            names = os.listdir(self.objects)
        except FileNotFoundError:
            return found
        for name in sorted(names):
            try:
                digest = digest_of_hex(name)
            except LayoutError:
                continue
            if self.is_published(digest):
                found.append(digest)
        return found

    # partial attempts ------------------------------------------------------------------------
    def new_partial(self, digest: str) -> Partial:
        """Create a fresh, empty staging directory for one attempt at ``digest`` (mode 0700)."""
        attempt_id = secrets.token_hex(6)
        path = self.partial / f"{hex_of(digest)}.{attempt_id}"
        path.mkdir(mode=0o700, parents=False)
        return Partial(digest, attempt_id, path)

    def partials(self) -> list[Partial]:
        """Every well-named staging directory; ``stray_partials`` lists the rest."""
        found: list[Partial] = []
        for name in _listdir(self.partial):
            parsed = self.parse_partial(name)
            if parsed is not None:
                found.append(parsed)
        return found

    def stray_partials(self) -> list[pathlib.Path]:
        """Entries under ``partial/sha256`` that are not ``<hex>.<id>`` directories."""
        return [
            self.partial / name
            for name in _listdir(self.partial)
            if self.parse_partial(name) is None
        ]

    def parse_partial(self, name: str) -> Partial | None:
        hexdigest, dot, attempt_id = name.partition(".")
        path = self.partial / name
        if not dot or not attempt_id or "/" in attempt_id or not path.is_dir():
            return None
        try:
            digest = digest_of_hex(hexdigest)
        except LayoutError:
            return None
        return Partial(digest, attempt_id, path)

    # state -----------------------------------------------------------------------------------
    def state_file(self, name: str) -> pathlib.Path:
        if not name or "/" in name or name.startswith("."):
            raise LayoutError(f"bad state file name {name!r}")
        return self.state / name


def marker_bytes(digest: str) -> bytes:
    hex_of(digest)
    return f"{digest}\n".encode()


def _listdir(path: pathlib.Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except FileNotFoundError:
        return []
