"""The one rule a published tree must pass before it is used: its stored manifest
(``.gpustack-manifest``) hashes to the digest its name and marker claim, its files are exactly
the manifest's, regular, of the manifest's sizes, and each (but the empty ones) is a hard link
of the node's stored copy of its content (``cache.files``), the copy the scrub re-hashes.

``stored`` reads the manifest and holds it to the digest (the peer port serves nothing else);
``problem`` adds the files' names, types, sizes and links: one ``lstat`` per file and one per
stored copy, no file read, so it is cheap enough for every tree at start and before a tree's
first mount (``cache.integrity``).
The scrub (``nodeplugin.scrub``) starts each re-hash with it. ``Check`` names what failed, the
vocabulary of the verification-failure metric.
"""

from __future__ import annotations

import enum
import os
import stat

from nodeplugin.cache import files as stored_files
from nodeplugin.cache import layout
from openapi import manifest


class Check(enum.Enum):
    """Which verification failed: the ``reason`` vocabulary of the verification-failure metric
    (the materializers at download or import, the checks at start and before a first mount, the
    scrub in the background)."""

    MANIFEST = "manifest"
    """The manifest (listed, imported or stored with a tree) is missing, unreadable, or does not
    hash to the digest."""
    SIZE = "size"
    """A file is missing, added, not a regular file or of another size than its entry."""
    HASH = "hash"
    """A file's bytes hash to another value than its entry."""
    UNREADABLE = "unreadable"
    """A published file could not be read back to be hashed again."""
    STORE = "store"
    """A tree's file is not (or no longer) a link of the node's stored copy of its content."""


MESSAGES = {
    Check.MANIFEST: "the tree's stored manifest is missing or does not hash to its digest",
    Check.SIZE: "a published file is missing, added or of another size than its manifest says",
    Check.HASH: "a published file's hash no longer matches its manifest",
    Check.UNREADABLE: "a published file is missing, added or of another size than its manifest "
                      "says",
    Check.STORE: "a published file is not the node's verified copy of its content",
}
"""What a quarantine record says of each failed check (no path a tenant chose; the log names
the file)."""


class Damaged(Exception):
    """A published tree fails the rule: ``check`` says which part, ``detail`` what was found."""

    def __init__(self, check: Check, detail: str) -> None:
        super().__init__(detail)
        self.check = check
        self.detail = detail


def stored(cache: layout.Layout, digest: str) -> tuple[bytes, list[manifest.Entry]]:
    """The tree's stored manifest and its entries, once it is shown to hash to ``digest``.
    Raises ``Damaged`` (``Check.MANIFEST``). Blocking: one small read."""
    try:
        data = (cache.published_path(digest) / layout.MANIFEST).read_bytes()
    except FileNotFoundError:
        raise Damaged(Check.MANIFEST, "no stored manifest") from None
    except OSError as exc:
        raise Damaged(Check.MANIFEST,
                      f"the stored manifest is unreadable ({exc.strerror or exc})") from None
    found = manifest.digest_of_bytes(data)
    if found != digest:
        raise Damaged(Check.MANIFEST, f"the stored manifest hashes to {found}")
    try:
        return data, manifest.parse(data)
    except manifest.ManifestError as exc:  # hashes right yet unreadable: never published so
        raise Damaged(Check.MANIFEST, f"the stored manifest cannot be read: {exc}") from None


def files(cache: layout.Layout, digest: str) -> dict[str, os.stat_result]:
    """Every file under the tree (its marker and manifest aside) and its ``lstat``; raises
    ``Damaged`` (``Check.SIZE``) at anything but a directory or a regular file."""
    root = str(cache.published_path(digest))
    found: dict[str, os.stat_result] = {}
    pending = [(root, "")]
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                path = prefix + entry.name
                if not prefix and entry.name in (layout.MARKER, layout.MANIFEST):
                    continue
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    pending.append((entry.path, path + "/"))
                elif stat.S_ISREG(info.st_mode):
                    found[path] = info
                else:
                    raise Damaged(Check.SIZE, f"{path}: not a regular file")
    return found


def compare(entries: list[manifest.Entry], found: dict[str, os.stat_result]) -> str | None:
    """What differs between the manifest's files and the tree's (names and sizes), or None."""
    for entry in entries:
        info = found.get(entry.path)
        if info is None:
            return f"{entry.path}: missing"
        if info.st_size != entry.size:
            return f"{entry.path}: {info.st_size} bytes, the manifest says {entry.size}"
    if len(found) != len(entries):
        extra = sorted(set(found) - {entry.path for entry in entries})
        return f"{extra[0]}: not in the manifest"
    return None


def unlinked(cache: layout.Layout, entries: list[manifest.Entry],
             found: dict[str, os.stat_result]) -> str | None:
    """The first file (of the right size) that is not a link of its stored copy, or None."""
    store = stored_files.of(cache)
    for entry in entries:
        if entry.size == 0:
            continue
        info = found[entry.path]
        copy = store.stored(entry)
        if copy is None or (copy.st_dev, copy.st_ino) != (info.st_dev, info.st_ino):
            return f"{entry.path}: not the node's stored copy of its content"
    return None


def problem(cache: layout.Layout, digest: str) -> tuple[Check, str] | None:
    """The cheap check of a published tree: which part of the rule it fails and what was found,
    or None when it passes (or is no longer there: nothing left to judge). Blocking: the
    manifest's read, one ``lstat`` per file and one per stored copy."""
    try:
        _, entries = stored(cache, digest)
        found = files(cache, digest)
        differs = compare(entries, found)
        unstored = None if differs is not None else unlinked(cache, entries, found)
    except Damaged as exc:
        if not cache.is_published(digest):
            return None  # collected (or replaced) while it was read
        return exc.check, exc.detail
    except OSError as exc:
        if not cache.is_published(digest):
            return None
        return Check.UNREADABLE, f"the tree cannot be listed ({exc.strerror or exc})"
    if differs is not None:
        return Check.SIZE, differs
    if unstored is not None:
        if not cache.is_published(digest):
            return None
        return Check.STORE, unstored
    return None
