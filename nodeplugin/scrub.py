"""Integrity of published trees after publication: a check at start and a background re-hash.

Content is verified once, as it arrives. Afterwards a disk error, a bit flip or a hand on the
node can still change it (seed 003: "tampering after READY"), so:

- **At start**, before the socket serves, every published tree is compared with its manifest
  (``.gpustack-manifest``): the same files, regular, of the same sizes (``check_sizes``). One
  ``stat`` per file, no reads.
- **In the background** (``Scrubber``) every published tree is re-hashed against its manifest,
  ``sha256`` or the git blob SHA-1 as at download. A full pass is spread over ``interval``
  (default 7 days) and never reads faster than ``bytes_per_second``.

A mismatch quarantines the tree at once (``cache.quarantine``): new mounts are refused with the
reason, running Pods keep theirs, and collection removes it once no Pod references it. A tree
without a manifest (published before manifests were kept) cannot be checked and is left alone.
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import hashlib
import logging
import os
import pathlib
import stat
import threading
import time
from collections.abc import Callable
from typing import Protocol

from nodeplugin.cache import layout, quarantine
from nodeplugin.materialize import interface
from openapi import manifest
from timing import clock as clocks

log = logging.getLogger(__name__)

CHUNK = 1 << 20
DEFAULT_INTERVAL = 7 * 24 * 3600.0
DEFAULT_BYTES_PER_SECOND = 64 << 20
SIZE_MESSAGE = "a published file is missing, added or of another size than its manifest says"
HASH_MESSAGE = "a published file's hash no longer matches its manifest"
Throttle = Callable[[int], bool]
"""Called (in the scrub's thread) after each chunk read with its size; False means stop now."""


class Hasher(Protocol):
    """A hashlib object, as far as the scrub feeds it."""

    def update(self, data: bytes, /) -> None: ...


def entries_of(cache: layout.Layout, digest: str) -> list[manifest.Entry] | None:
    """The tree's manifest, or None when it keeps none (or it cannot be read)."""
    try:
        data = (cache.published_path(digest) / layout.MANIFEST).read_bytes()
    except OSError:
        return None
    try:
        return manifest.parse(data)
    except manifest.ManifestError as exc:
        log.warning("the manifest kept in %s cannot be read: %s", digest, exc)
        return None


def check_sizes(cache: layout.Layout, digest: str) -> str | None:
    """What is wrong with the tree's files compared with its manifest (names, types, sizes),
    or None. Blocking: one ``lstat`` per file."""
    entries = entries_of(cache, digest)
    if entries is None:
        return None
    root = cache.published_path(digest)
    found: dict[str, int] = {}
    for directory, dirnames, filenames in os.walk(root, followlinks=False):
        rel = os.path.relpath(directory, root)
        for name in dirnames + filenames:
            path = name if rel == "." else f"{rel}/{name}"
            if rel == "." and name in (layout.MARKER, layout.MANIFEST):
                continue
            mode = os.lstat(os.path.join(directory, name)).st_mode
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                return f"{path}: not a regular file"
            found[path] = os.lstat(os.path.join(directory, name)).st_size
    for entry in entries:
        if entry.path not in found:
            return f"{entry.path}: missing"
        if found[entry.path] != entry.size:
            return f"{entry.path}: {found[entry.path]} bytes, the manifest says {entry.size}"
    extra = sorted(set(found) - {entry.path for entry in entries})
    if extra:
        return f"{extra[0]}: not in the manifest"
    return None


def rehash(cache: layout.Layout, digest: str,
           throttle: Throttle) -> tuple[interface.Check, str] | None:
    """Hash every file of the tree again; the verification that failed and what does not
    match, or None. Blocking. Stops early (answering None) when ``throttle`` says so."""
    problem = check_sizes(cache, digest)
    if problem is not None:
        return interface.Check.SIZE, problem
    entries = entries_of(cache, digest) or []
    root = cache.published_path(digest)
    for entry in entries:
        if entry.algorithm == "sha256":
            hasher = hashlib.sha256()
        else:
            hasher = hashlib.sha1(usedforsecurity=False)
            hasher.update(manifest.git_blob_sha1_prefix(entry.size))
        try:
            whole = _hash_file(root / entry.path, hasher, throttle)
        except FileNotFoundError:
            if not root.exists():
                return None  # collected meanwhile: nothing left to check
            return interface.Check.UNREADABLE, f"{entry.path}: unreadable (missing)"
        except OSError as exc:
            return interface.Check.UNREADABLE, f"{entry.path}: unreadable ({exc.strerror or exc})"
        if whole is None:
            return None  # stopped, or the tree was collected or replaced meanwhile
        if hasher.hexdigest() != entry.hexdigest:
            return interface.Check.HASH, f"{entry.path}: {entry.algorithm} differs from the " \
                "manifest"
    return None


def _hash_file(path: pathlib.Path, hasher: Hasher, throttle: Throttle) -> bool | None:
    """Feed the file to ``hasher`` a chunk at a time, opening it for each chunk: the pace may
    wait days between chunks (a pass is spread over its interval), and a file held open
    through the wait would keep its blocks allocated after collection deleted its tree. True
    once it was read whole; None when ``throttle`` said stop or the file is no longer the one
    first opened (its tree collected, or published again since)."""
    offset = 0
    identity: tuple[int, int] | None = None
    while True:
        with open(path, "rb", buffering=0) as handle:
            info = os.fstat(handle.fileno())
            if identity is None:
                identity = (info.st_dev, info.st_ino)
            elif identity != (info.st_dev, info.st_ino):
                return None
            handle.seek(offset)
            chunk = handle.read(CHUNK)
        if not chunk:
            return True
        offset += len(chunk)
        hasher.update(chunk)
        if not throttle(len(chunk)):
            return None


def verify_published(cache: layout.Layout, records: quarantine.Quarantine,
                     now: datetime.datetime) -> list[str]:
    """The start-up check of every published tree (names, types and sizes); quarantines what
    fails and returns those digests. Blocking."""
    failed: list[str] = []
    for digest in cache.published():
        if digest in records:
            continue
        problem = check_sizes(cache, digest)
        if problem is not None:
            log.error("integrity: %s at start: %s; quarantined", digest, problem)
            records.add(digest, SIZE_MESSAGE, now)
            failed.append(digest)
    return failed


class Pacer:
    """A ``Throttle`` holding reads to ``bytes_per_second`` (0: unlimited), and stopping when
    ``stop`` is set. Sleeps in the scrub's thread."""

    def __init__(self, bytes_per_second: float, stop: threading.Event) -> None:
        self.rate = bytes_per_second
        self._stop = stop
        self._began = time.monotonic()
        self._read = 0

    def __call__(self, size: int) -> bool:
        self._read += size
        if self.rate > 0:
            ahead = self._read / self.rate - (time.monotonic() - self._began)
            if ahead > 0 and self._stop.wait(ahead):
                return False
        return not self._stop.is_set()


class Scrubber:
    """Re-hashes every published tree, one full pass per ``interval``, reading at most
    ``bytes_per_second``; calls ``quarantined(digest)`` after quarantining one. ``failures``
    counts what it found by the verification that failed (for the metrics)."""

    def __init__(
        self,
        cache: layout.Layout,
        records: quarantine.Quarantine,
        *,
        clock: clocks.Clock,
        quarantined: Callable[[str], None],
        interval: float = DEFAULT_INTERVAL,
        bytes_per_second: int = DEFAULT_BYTES_PER_SECOND,
        throttle: Callable[[float, threading.Event], Throttle] = Pacer,
    ) -> None:
        self._cache = cache
        self._records = records
        self._clock = clock
        self._quarantined = quarantined
        self.interval = interval
        self.bytes_per_second = bytes_per_second
        self._throttle = throttle
        self._stop = threading.Event()
        self.passes = 0
        self.checked = 0
        self.failures: collections.Counter[interface.Check] = collections.Counter()

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        """Pass after pass until stopped; a pass that ends early waits out its interval."""
        try:
            while not self._stop.is_set():
                began = self._clock.monotonic()
                await self.scrub_once()
                rest = self.interval - (self._clock.monotonic() - began)
                await clocks.sleep(self._clock, max(rest, 60.0))
        finally:
            self._stop.set()

    async def scrub_once(self) -> list[str]:
        """One pass over every published tree; the digests it quarantined."""
        digests = await asyncio.to_thread(self._cache.published)
        sizes = await asyncio.to_thread(self._total, digests)
        rate = float(self.bytes_per_second)
        if self.interval > 0 and sizes:
            spread = sizes / self.interval
            rate = min(rate, spread) if rate > 0 else spread
        throttle = self._throttle(rate, self._stop)
        found: list[str] = []
        for digest in digests:
            if self._stop.is_set():
                break
            if digest in self._records:
                continue
            failed = await asyncio.to_thread(rehash, self._cache, digest, throttle)
            self.checked += 1
            if failed is None:
                continue
            check, problem = failed
            self.failures[check] += 1
            log.error("integrity: %s: %s; quarantined (mounted Pods keep it until they end)",
                      digest, problem)
            message = HASH_MESSAGE if check is interface.Check.HASH else SIZE_MESSAGE
            await asyncio.to_thread(self._records.add, digest, message, self._clock.now())
            found.append(digest)
            self._quarantined(digest)
        self.passes += 1
        return found

    def _total(self, digests: list[str]) -> int:
        total = 0
        for digest in digests:
            total += sum(e.size for e in entries_of(self._cache, digest) or [])
        return total
