"""Integrity of published trees after publication: the background re-hash.

Content is verified once, as it arrives. Afterwards a disk error, a bit flip or a hand on the
node can still change it (seed 003: "tampering after READY"), so:

- **At start and before a tree's first mount**, the cheap check of ``cache.check`` (the stored
  manifest hashes to the digest, the files are the manifest's, of its sizes, links of the
  node's stored copies), run by ``cache.integrity`` for every tree found at start, without
  delaying the socket.
- **In the background** (``Scrubber``) a pass holds every published tree to that same cheap
  check, then re-hashes every stored file (``cache.files``) once, however many trees link it:
  ``sha256`` or the git blob SHA-1 as at download. A full pass is spread over ``interval``
  (default 7 days) and never reads faster than ``bytes_per_second``.

A tree that fails the check is quarantined at once (``Integrity.quarantine``): it is taken out
of ``objects/``, running Pods keep their mounts, the next mount materializes the digest again,
and collection removes the held copy once no Pod mounts it. A stored file that fails its hash
leaves the store (``FileStore.condemn``) and every published tree linking it is quarantined the
same way, each under its own digest's lock.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import logging
import os
import pathlib
import threading
import time
from collections.abc import Callable
from typing import Protocol

from nodeplugin.cache import check, files, integrity, layout, quarantine
from nodeplugin.materialize import interface
from openapi import manifest
from timing import clock as clocks

log = logging.getLogger(__name__)

CHUNK = 1 << 20
DEFAULT_INTERVAL = 7 * 24 * 3600.0
DEFAULT_BYTES_PER_SECOND = 64 << 20
Throttle = Callable[[int], bool]
"""Called (in the scrub's thread) after each chunk read with its size; False means stop now."""
Finding = tuple[interface.Check, str, files.Inode]
"""What failed, what was found, and which file (its inode) was judged."""


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


def rehash(path: pathlib.Path, entry: manifest.Entry, throttle: Throttle) -> Finding | None:
    """Hash the stored file at ``path`` again against ``entry``: its size first (no read),
    then its bytes. What fails, or None (it passes, the pass was stopped, or the file is gone
    or was replaced meanwhile: the next pass looks again). Blocking."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    inode = files.inode_of(info)
    if info.st_size != entry.size:
        return (interface.Check.SIZE,
                f"{entry.algorithm}:{entry.hexdigest}: {info.st_size} bytes, "
                f"listed with {entry.size}", inode)
    if entry.algorithm == "sha256":
        hasher = hashlib.sha256()
    else:
        hasher = hashlib.sha1(usedforsecurity=False)
        hasher.update(manifest.git_blob_sha1_prefix(entry.size))
    try:
        judged = _hash_file(path, hasher, throttle)
    except FileNotFoundError:
        return None  # collected meanwhile: nothing left to check
    except OSError as exc:
        return (interface.Check.UNREADABLE,
                f"{entry.algorithm}:{entry.hexdigest}: unreadable ({exc.strerror or exc})", inode)
    if judged is None:
        return None  # stopped, or another file at that name since
    if hasher.hexdigest() != entry.hexdigest:
        return (interface.Check.HASH,
                f"{entry.algorithm}:{entry.hexdigest}: the bytes hash to another value", judged)
    return None


def _hash_file(path: pathlib.Path, hasher: Hasher, throttle: Throttle) -> files.Inode | None:
    """Feed the file to ``hasher`` a chunk at a time, opening it for each chunk: the pace may
    wait days between chunks (a pass is spread over its interval), and a file held open
    through the wait would keep its blocks allocated after collection freed it. The file
    (its inode) once it was read whole; None when ``throttle`` said stop or the file is no
    longer the one first opened (swept, or stored again since)."""
    offset = 0
    identity: files.Inode | None = None
    while True:
        with open(path, "rb", buffering=0) as handle:
            info = os.fstat(handle.fileno())
            if identity is None:
                identity = files.inode_of(info)
            elif identity != files.inode_of(info):
                return None
            handle.seek(offset)
            chunk = handle.read(CHUNK)
        if not chunk:
            return identity
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
    """Checks every published tree and re-hashes every stored file, one full pass per
    ``interval``, reading at most ``bytes_per_second``; quarantines what fails through
    ``checks``. ``failures`` counts what it found by the verification that failed (for the
    metrics); ``checked`` counts the stored files hashed."""

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
        self._store = files.of(cache)
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
        """One pass: every published tree's cheap check, then every stored file's hash; the
        digests it quarantined. A ``requested`` pass (an operator's re-hash) reads at
        ``bytes_per_second`` instead of spreading over the interval."""
        found: list[str] = []
        listed: dict[str, list[manifest.Entry]] = {}
        known: dict[files.Identity, manifest.Entry] = {}
        for digest in await asyncio.to_thread(self._cache.published):
            if self._stop.is_set():
                return found
            if await self._check_tree(digest, listed, known):
                found.append(digest)
        stored = await asyncio.to_thread(self._stored, known)
        rate = float(self.bytes_per_second)
        total = sum(entry.size for _, _, entry in stored)
        if self.interval > 0 and total and not requested:
            spread = total / self.interval
            rate = min(rate, spread) if rate > 0 else spread
        throttle = self._throttle(rate, self._stop)
        for ident, path, entry in stored:
            if self._stop.is_set():
                break
            failed = await asyncio.to_thread(rehash, path, entry, throttle)
            self.checked += 1
            if failed is None:
                continue
            kind, problem, inode = failed
            self.failures[kind] += 1
            condemned = await asyncio.to_thread(self._store.condemn, ident, inode)
            users = await asyncio.to_thread(self._users, ident, inode, listed)
            log.error("integrity: the stored file %s: %s; %s, and the %d trees linking it "
                      "quarantined (mounted Pods keep them until they end, the next mount "
                      "materializes them again)", path.name, problem,
                      "removed from the store" if condemned else "no longer stored",
                      len(users))
            for digest, judged in users:
                if await self._checks.quarantine(digest, kind, judged):
                    found.append(digest)
        self.passes += 1
        return found

    async def _check_tree(self, digest: str, listed: dict[str, list[manifest.Entry]],
                          known: dict[files.Identity, manifest.Entry]) -> bool:
        """The cheap check of one tree (quarantined when it fails). Its entries go to
        ``known`` whenever its manifest holds (each stored file is hashed against its entry,
        its size first), and to ``listed`` when it passes."""
        judged = await asyncio.to_thread(tree_id, self._cache, digest)
        if judged is None:
            return False  # collected since the listing
        failed = await asyncio.to_thread(check.problem, self._cache, digest)
        entries: list[manifest.Entry] = []
        with contextlib.suppress(check.Damaged):  # no manifest, or collected since
            entries = (await asyncio.to_thread(check.stored, self._cache, digest))[1]
        known.update((files.identity(e), e) for e in entries if e.size > 0)
        if failed is None:
            if entries:
                listed[digest] = entries
            return False
        kind, problem = failed
        self.failures[kind] += 1
        log.error("integrity: %s: %s; quarantined (mounted Pods keep it until they end, the "
                  "next mount materializes it again)", digest, problem)
        return await self._checks.quarantine(digest, kind, judged)

    def _stored(self, known: dict[files.Identity, manifest.Entry]
                ) -> list[tuple[files.Identity, pathlib.Path, manifest.Entry]]:
        """Every stored file with the entry to hash it against: a tree's entry, else (a file
        only an attempt links) its own size."""
        stored = []
        for ident, path in self._store.listing():
            entry = known.get(ident)
            if entry is None:
                try:
                    size = os.lstat(path).st_size
                except FileNotFoundError:
                    continue
                entry = manifest.Entry(path.name, ident[0], ident[1], size)  # type: ignore[arg-type]
            stored.append((ident, path, entry))
        return stored

    def _users(self, ident: files.Identity, inode: files.Inode,
               listed: dict[str, list[manifest.Entry]]) -> list[tuple[str, quarantine.TreeId]]:
        """The published trees with a file that is ``inode`` (the damaged file), now."""
        users = []
        for digest in self._cache.published():
            entries = listed.get(digest)
            if entries is None:
                try:
                    entries = check.stored(self._cache, digest)[1]
                except check.Damaged:
                    continue
            root = self._cache.published_path(digest)
            judged = tree_id(self._cache, digest)
            for entry in entries:
                if files.identity(entry) != ident or judged is None:
                    continue
                try:
                    info = os.lstat(root / entry.path)
                except FileNotFoundError:
                    continue
                if files.inode_of(info) == inode:
                    users.append((digest, judged))
                    break
        return users
