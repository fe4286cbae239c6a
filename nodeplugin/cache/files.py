"""The node's file store: every verified file once, under its content identity.

::

    <root>/files/sha256/<hex>     a file a manifest lists by its SHA-256 (the hubs' LFS files)
    <root>/files/gitsha1/<hex>    a file a manifest lists by its git blob id (the others)
    <root>/files/.tmp/            links on their way to a replaced name (emptied at start)

A stored file is complete, was hashed to its name as it arrived (or as it was imported), is
0444, and is never opened for writing again. Published trees (``objects/``) and the attempts'
staging directories (``partial/``) hold hard links to it, so one copy on disk serves every tree
that lists it, and a tree is still one directory on one filesystem, bind-mounted read-only.
A file's link count says who holds it: 1 is the store alone, and then nothing needs it any more
(``sweep`` removes it). Zero-byte files are never stored: there is nothing to share, and each
tree keeps its own empty file.

Every change here holds one lock per cache root in this process (``of`` hands out the one
store of a root), so a file being linked into a staging directory is never swept in between:

- ``put``: a verified file becomes the stored copy of its identity (a link of it under its
  name); when another copy is stored already, the caller's name is pointed at the stored one.
- ``claim``: the stored copy is linked at a staging path instead of being fetched, after a
  cheap check (a regular file of the entry's size, not one the scrub condemned); a stored
  file that fails it is dropped from the store.
- ``sweep``: stored files nothing else links are removed (collection after it removed trees
  or partials, and the start, after a crash between the two).
- ``condemn``: a file the scrub found damaged leaves the store, and the staging directories'
  links of it go too, so no attempt publishes it; the caller quarantines every tree linking it.

A peer server may serve any stored file by its identity (``path``): it is verified, and a
downloading node's finished files are stored as soon as they verify, before their tree is
published. Blocking throughout: async callers use a thread.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import secrets
import stat
import threading

from durable import disk
from nodeplugin.cache import layout
from openapi import manifest

FILE_MODE = 0o444
TMP = ".tmp"
Identity = tuple[str, str]
"""``(algorithm, hexdigest)`` of a manifest entry: the name it is stored under."""
Inode = tuple[int, int, int]
"""A file as the scrub judged it: device, inode number and modification time (ns). The time
keeps a judgement to that file: once a condemned file's last link goes, its inode number is
free for the next file the filesystem makes (ext4 hands it out again soon), and that new file
is not the damaged one."""


class Condemned(OSError):
    """A file the scrub found damaged was offered to the store again."""


def identity(entry: manifest.Entry) -> Identity:
    return entry.algorithm, entry.hexdigest


def allocated(info: os.stat_result) -> int:
    return info.st_blocks * 512


class FileStore:
    """The stored files of one cache root (``of`` gives every caller the same one)."""

    def __init__(self, cache: layout.Layout) -> None:
        self._cache = cache
        self.root = cache.files
        self._lock = threading.Lock()
        self._sizes: dict[Identity, int] = {}
        """Allocated bytes of each stored file (``scan``, then kept by every change here)."""
        self._condemned: set[Inode] = set()

    # --- names ---------------------------------------------------------------------------------
    def path(self, ident: Identity) -> pathlib.Path:
        algorithm, hexdigest = ident
        return self.root / algorithm / hexdigest

    def listing(self) -> list[tuple[Identity, pathlib.Path]]:
        """Every stored file, in name order."""
        found: list[tuple[Identity, pathlib.Path]] = []
        for directory in self._cache.file_dirs():
            algorithm = directory.name
            try:
                names = sorted(os.listdir(directory))
            except FileNotFoundError:
                continue
            for name in names:
                if _well_named(algorithm, name):
                    found.append(((algorithm, name), directory / name))
        return found

    def stored(self, entry: manifest.Entry) -> os.stat_result | None:
        """The stored copy of ``entry`` (its ``lstat``), when there is one of its size."""
        if entry.size == 0:
            return None
        try:
            info = os.lstat(self.path(identity(entry)))
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(info.st_mode) or info.st_size != entry.size:
            return None
        return info

    # --- changes -------------------------------------------------------------------------------
    def claim(self, entry: manifest.Entry, dest: pathlib.Path) -> bool:
        """Make ``dest`` a link of the stored copy of ``entry``; False when there is none (or
        none fit for use: dropped from the store then). ``dest`` may hold an older file, which
        is replaced in one rename."""
        if entry.size == 0:
            return False
        source = self.path(identity(entry))
        with self._lock:
            try:
                info = os.lstat(source)
            except FileNotFoundError:
                return False
            if (not stat.S_ISREG(info.st_mode) or info.st_size != entry.size
                    or inode_of(info) in self._condemned):
                self._unlink(identity(entry), source)
                return False
            try:
                if inode_of(os.lstat(dest)) == inode_of(info):
                    return True
                exists = True
            except FileNotFoundError:
                exists = False
            dest.parent.mkdir(parents=True, exist_ok=True)
            if exists:
                self._link_over(source, dest)
            else:
                os.link(source, dest)
            return True

    def put(self, path: pathlib.Path, entry: manifest.Entry) -> None:
        """Store the verified file at ``path`` (made 0444) as ``entry``'s copy. When another
        copy of it is stored already, ``path`` becomes a link of that one (its own bytes are
        freed with its last link); a stored copy that is no longer whole is replaced by this
        one. The new name is durable after ``sync``."""
        if entry.size == 0:
            return
        ident = identity(entry)
        target = self.path(ident)
        with self._lock:
            mine = os.lstat(path)
            if inode_of(mine) in self._condemned:
                raise Condemned(f"{path} holds a file the scrub found damaged")
            if stat.S_IMODE(mine.st_mode) != FILE_MODE:
                os.chmod(path, FILE_MODE)
            target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            try:
                os.link(path, target)
            except FileExistsError:
                pass
            else:
                self._sizes[ident] = allocated(mine)
                return
            found = os.lstat(target)
            if inode_of(found) == inode_of(mine):
                return
            if (stat.S_ISREG(found.st_mode) and found.st_size == entry.size
                    and inode_of(found) not in self._condemned):
                self._link_over(target, path)
            else:
                self._link_over(path, target)
                self._sizes[ident] = allocated(mine)

    def sync(self) -> None:
        """Make the names stored so far durable (fsync of the store's directories)."""
        for directory in self._cache.file_dirs():
            with contextlib.suppress(FileNotFoundError):
                disk.fsync_path(directory)

    def sweep(self) -> int:
        """Remove every stored file nothing but the store links; the bytes freed."""
        freed = 0
        for ident, path in self.listing():
            with self._lock:
                try:
                    info = os.lstat(path)
                except FileNotFoundError:
                    self._sizes.pop(ident, None)
                    continue
                if info.st_nlink > 1:
                    continue
                self._unlink(ident, path)
                freed += allocated(info)
        return freed

    def condemn(self, ident: Identity, inode: Inode) -> bool:
        """Take the damaged file ``inode`` out of the store and out of every staging directory;
        True when it was still the stored copy of ``ident``."""
        path = self.path(ident)
        with self._lock:
            self._condemned.add(inode)
            removed = False
            with contextlib.suppress(FileNotFoundError):
                if inode_of(os.lstat(path)) == inode:
                    self._unlink(ident, path)
                    removed = True
            for partial in self._cache.partials():
                for directory, _, names in os.walk(partial.path):
                    for name in names:
                        candidate = os.path.join(directory, name)
                        with contextlib.suppress(FileNotFoundError):
                            if inode_of(os.lstat(candidate)) == inode:
                                os.unlink(candidate)
            return removed

    def clean(self) -> None:
        """At start: links an interrupted replacement left in ``files/.tmp``."""
        tmp = self.root / TMP
        with self._lock:
            for name in _names(tmp):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp / name)

    # --- what it holds -------------------------------------------------------------------------
    def scan(self) -> None:
        """Measure every stored file (at start; every change here keeps the figures after)."""
        sizes: dict[Identity, int] = {}
        for ident, path in self.listing():
            with contextlib.suppress(FileNotFoundError):
                sizes[ident] = allocated(os.lstat(path))
        with self._lock:
            self._sizes = sizes

    def total(self) -> int:
        """Allocated bytes of every stored file, each counted once."""
        with self._lock:
            return sum(self._sizes.values())

    def size_of(self, ident: Identity) -> int:
        with self._lock:
            return self._sizes.get(ident, 0)

    # --- helpers (the lock held) -----------------------------------------------------------------
    def _unlink(self, ident: Identity, path: pathlib.Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self._sizes.pop(ident, None)

    def _link_over(self, source: pathlib.Path, dest: pathlib.Path) -> None:
        """Point ``dest`` at ``source``'s file in one rename (a link made under ``.tmp`` first,
        so a crash leaves nothing in ``dest``'s directory)."""
        tmp = self.root / TMP
        tmp.mkdir(mode=0o700, exist_ok=True)
        staged = tmp / secrets.token_hex(8)
        os.link(source, staged)
        try:
            os.rename(staged, dest)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(staged)
            raise


_stores: dict[str, FileStore] = {}
_stores_lock = threading.Lock()


def of(cache: layout.Layout) -> FileStore:
    """The file store of ``cache``'s root: one per root in a process, whoever asks (the
    materializers, collection, the scrub and the checks share its lock)."""
    key = os.path.abspath(cache.root)
    with _stores_lock:
        found = _stores.get(key)
        if found is None:
            found = _stores[key] = FileStore(cache)
        return found


def inode_of(info: os.stat_result) -> Inode:
    """The file ``info`` describes (``Inode``)."""
    return info.st_dev, info.st_ino, info.st_mtime_ns


_HEX_LENGTHS = {"sha256": 64, "gitsha1": 40}


def _well_named(algorithm: str, name: str) -> bool:
    return len(name) == _HEX_LENGTHS.get(algorithm, -1) and all(
        c in "0123456789abcdef" for c in name)


def _names(path: pathlib.Path) -> list[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []
