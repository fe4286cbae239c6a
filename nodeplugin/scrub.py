"""Integrity of published trees after publication: the background re-hash.

Content is verified once, as it arrives. Afterwards a disk error, a bit flip or a hand on the
node can still change it (seed 003: "tampering after READY"), so:

- **At start and before a tree's first mount**, the cheap check of ``cache.check`` (the stored
  manifest hashes to the digest, the files are the manifest's, of its sizes), run by
  ``cache.integrity`` for every tree found at start, without delaying the socket.
- **In the background** (``Scrubber``) every published tree is re-hashed against its manifest,
  ``sha256`` or the git blob SHA-1 as at download, after that same cheap check. A full pass is
  spread over ``interval`` (default 7 days) and never reads faster than ``bytes_per_second``.

A failure quarantines the tree at once (``Integrity.quarantine``): it is taken out of
``objects/``, running Pods keep their mounts, the next mount materializes the digest again, and
collection removes the held copy once no Pod mounts it.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
import os
import pathlib
import threading
import time
from collections.abc import Callable
from typing import Protocol

from nodeplugin.cache import check, integrity, layout, quarantine
from nodeplugin.materialize import interface
from openapi import manifest
from timing import clock as clocks

log = logging.getLogger(__name__)

CHUNK = 1 << 20
DEFAULT_INTERVAL = 7 * 24 * 3600.0
DEFAULT_BYTES_PER_SECOND = 64 << 20
Throttle = Callable[[int], bool]
"""Called (in the scrub's thread) after each chunk read with its size; False means stop now."""


class Hasher(Protocol):
    """A hashlib object, as far as the scrub feeds it."""

    def update(self, data: bytes, /) -> None: ...


def tree_id(cache: layout.Layout, digest: str) -> quarantine.TreeId | None:
    """Which directory is the digest's tree now (None when there is none)."""
    try:
        found = os.stat(cache.published_path(digest))
    except OSError:
        return None
    return found.st_dev, found.st_ino


def rehash(cache: layout.Layout, digest: str,
           throttle: Throttle) -> tuple[interface.Check, str] | None:
    """The cheap check, then every file of the tree hashed again; the verification that failed
    and what does not match, or None. Blocking. Stops early (answering None) when ``throttle``
    says so."""
    problem = check.problem(cache, digest)
    if problem is not None:
        return problem
    try:
        _, entries = check.stored(cache, digest)
    except check.Damaged:
        return None  # collected or replaced since: the next pass looks again
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
    ``bytes_per_second``; quarantines what fails through ``checks``. ``failures`` counts what it
    found by the verification that failed (for the metrics)."""

    def __init__(
        self,
        cache: layout.Layout,
        checks: integrity.Integrity,
        *,
        clock: clocks.Clock,
        interval: float = DEFAULT_INTERVAL,
        bytes_per_second: int = DEFAULT_BYTES_PER_SECOND,
        throttle: Callable[[float, threading.Event], Throttle] = Pacer,
    ) -> None:
        self._cache = cache
        self._checks = checks
        self._clock = clock
        self.interval = interval
        self.bytes_per_second = bytes_per_second
        self._throttle = throttle
        self._stop = threading.Event()
        self._now: asyncio.Event | None = None
        self.passes = 0
        self.checked = 0
        self.failures: collections.Counter[interface.Check] = collections.Counter()

    def stop(self) -> None:
        self._stop.set()

    def request(self) -> None:
        """Start the next pass now (an operator's ``rehashRequest``), not after the interval."""
        if self._now is not None:
            self._now.set()

    async def _rest(self, seconds: float) -> bool:
        """Wait ``seconds`` on the clock, or until ``request`` (then True)."""
        assert self._now is not None
        sleeping = asyncio.ensure_future(clocks.sleep(self._clock, seconds))
        asked = asyncio.ensure_future(self._now.wait())
        try:
            await asyncio.wait({sleeping, asked}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeping, asked):
                task.cancel()
            await asyncio.gather(sleeping, asked, return_exceptions=True)
        requested = self._now.is_set()
        self._now.clear()
        return requested

    async def run(self) -> None:
        """Pass after pass until stopped, the first once the start checks are done (they
        check the same trees first); a pass that ends early waits out its interval."""
        self._now = asyncio.Event()
        try:
            await self._checks.done.wait()
            requested = False
            while not self._stop.is_set():
                began = self._clock.monotonic()
                await self.scrub_once(requested=requested)
                rest = self.interval - (self._clock.monotonic() - began)
                requested = await self._rest(max(rest, 60.0))
        finally:
            self._stop.set()

    async def scrub_once(self, *, requested: bool = False) -> list[str]:
        """One pass over every published tree; the digests it quarantined. A ``requested`` pass
        (an operator's re-hash) reads at ``bytes_per_second`` instead of spreading over the
        interval."""
        digests = await asyncio.to_thread(self._cache.published)
        sizes = await asyncio.to_thread(self._total, digests)
        rate = float(self.bytes_per_second)
        if self.interval > 0 and sizes and not requested:
            spread = sizes / self.interval
            rate = min(rate, spread) if rate > 0 else spread
        throttle = self._throttle(rate, self._stop)
        found: list[str] = []
        for digest in digests:
            if self._stop.is_set():
                break
            judged = await asyncio.to_thread(tree_id, self._cache, digest)
            if judged is None:
                continue  # collected since the listing
            failed = await asyncio.to_thread(rehash, self._cache, digest, throttle)
            self.checked += 1
            if failed is None:
                continue
            kind, problem = failed
            self.failures[kind] += 1
            log.error("integrity: %s: %s; quarantined (mounted Pods keep it until they end, the "
                      "next mount materializes it again)", digest, problem)
            if await self._checks.quarantine(digest, kind, judged):
                found.append(digest)
        self.passes += 1
        return found

    def _total(self, digests: list[str]) -> int:
        total = 0
        for digest in digests:
            try:
                total += sum(e.size for e in check.stored(self._cache, digest)[1])
            except check.Damaged:
                continue
        return total
