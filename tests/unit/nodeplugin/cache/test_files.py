"""The node's file store (``cache.files``): each verified file once under its content identity,
0444, linked by the trees and staging directories that list it; claimed instead of fetched,
swept with its last link, condemned by the scrub."""

from __future__ import annotations

import hashlib
import os
import pathlib
import stat

import pytest

from nodeplugin.cache import files, layout
from openapi import manifest

DATA = b"w" * 10_000


def _entry(path: str, data: bytes) -> manifest.Entry:
    return manifest.Entry(path, "sha256", hashlib.sha256(data).hexdigest(), len(data))


@pytest.fixture
def cache(tmp_path: pathlib.Path) -> layout.Layout:
    made = layout.Layout(tmp_path / "cache")
    made.create()
    return made


def _written(cache: layout.Layout, name: str, data: bytes) -> pathlib.Path:
    path = cache.root / "staging" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_a_verified_file_is_stored_once_and_read_only(cache: layout.Layout) -> None:
    store = files.of(cache)
    assert files.of(layout.Layout(cache.root)) is store  # one store per root in a process
    entry = _entry("w.bin", DATA)
    mine = _written(cache, "a/w.bin", DATA)
    store.put(mine, entry)
    stored = store.path(files.identity(entry))
    assert stored == cache.root / "files" / "sha256" / entry.hexdigest
    assert stored.stat().st_ino == mine.stat().st_ino and stored.stat().st_nlink == 2
    assert stat.S_IMODE(stored.stat().st_mode) == 0o444
    store.scan()
    assert store.total() == stored.stat().st_blocks * 512
    # another copy of the same bytes, stored later, becomes a link of the first: one copy
    again = _written(cache, "b/w.bin", DATA)
    store.put(again, entry)
    assert again.stat().st_ino == stored.stat().st_ino and stored.stat().st_nlink == 3
    assert store.total() == stored.stat().st_blocks * 512
    # empty files are never stored: nothing to share
    empty = _written(cache, "e", b"")
    store.put(empty, _entry("e", b""))
    assert empty.stat().st_nlink == 1 and not store.claim(_entry("e", b""), cache.root / "x")


def test_a_stored_file_is_claimed_instead_of_fetched(cache: layout.Layout) -> None:
    store = files.of(cache)
    entry = _entry("w.bin", DATA)
    assert not store.claim(entry, cache.root / "partial" / "p" / "w.bin")
    store.put(_written(cache, "w.bin", DATA), entry)
    dest = cache.root / "partial" / "p" / "sub" / "w.bin"
    assert store.claim(entry, dest)
    assert dest.read_bytes() == DATA and dest.stat().st_ino == store.stored(entry).st_ino  # type: ignore[union-attr]
    # a half-written file at the destination is replaced in one rename
    half = cache.root / "partial" / "q" / "w.bin"
    half.parent.mkdir(parents=True)
    half.write_bytes(DATA[:100])
    assert store.claim(entry, half) and half.read_bytes() == DATA
    assert not list((cache.files / files.TMP).iterdir())
    # a stored file of the wrong size is dropped, not handed out
    os.truncate(store.path(files.identity(entry)), 10)
    assert not store.claim(entry, cache.root / "partial" / "r" / "w.bin")
    assert not store.path(files.identity(entry)).exists()


def test_a_whole_copy_replaces_a_stored_one_that_is_not(cache: layout.Layout) -> None:
    store = files.of(cache)
    entry = _entry("w.bin", DATA)
    old = _written(cache, "old", DATA)
    store.put(old, entry)
    os.truncate(old, 5)  # the stored copy (the same file) lost its tail
    fresh = _written(cache, "fresh", DATA)
    store.put(fresh, entry)
    assert store.path(files.identity(entry)).stat().st_ino == fresh.stat().st_ino


def test_the_sweep_removes_what_nothing_else_links(cache: layout.Layout) -> None:
    store = files.of(cache)
    kept, gone = _entry("k", b"k" * 5000), _entry("g", b"g" * 9000)
    holder = _written(cache, "k", b"k" * 5000)
    store.put(holder, kept)
    lone = _written(cache, "g", b"g" * 9000)
    store.put(lone, gone)
    lone.unlink()  # its tree or partial was deleted
    store.scan()
    before = store.total()
    freed = store.sweep()
    assert freed > 0 and store.total() == before - freed
    assert store.stored(kept) is not None and store.stored(gone) is None
    # a leftover of an interrupted replacement is cleaned at start
    tmp = cache.files / files.TMP
    tmp.mkdir(exist_ok=True)
    os.link(holder, tmp / "leftover")
    store.clean()
    assert not list(tmp.iterdir()) and holder.stat().st_nlink == 2


def test_a_condemned_file_leaves_the_store_and_every_staging_directory(
        cache: layout.Layout) -> None:
    store = files.of(cache)
    entry = _entry("w.bin", DATA)
    tree_file = _written(cache, "tree/w.bin", DATA)
    store.put(tree_file, entry)
    partial = cache.new_partial("sha256:" + "ab" * 32)
    assert store.claim(entry, partial.path / "w.bin")
    info = tree_file.stat()
    assert store.condemn(files.identity(entry), files.inode_of(info))
    assert store.stored(entry) is None and not (partial.path / "w.bin").exists()
    assert tree_file.read_bytes() == DATA  # a tree linking it keeps it (the caller quarantines)
    # never stored again, whoever offers it
    with pytest.raises(files.Condemned):
        store.put(tree_file, entry)
    assert store.stored(entry) is None


def test_a_new_file_on_a_condemned_files_inode_number_is_stored(cache: layout.Layout) -> None:
    """Once a condemned file's last link went, the filesystem may give its inode number to the
    next file it makes (ext4 does, soon): that file is not the damaged one and is stored."""
    store = files.of(cache)
    entry = _entry("w.bin", DATA)
    damaged = _written(cache, "tree/w.bin", DATA)
    store.put(damaged, entry)
    info = damaged.stat()
    assert store.condemn(files.identity(entry), files.inode_of(info))
    fresh = _written(cache, "fresh/w.bin", DATA)
    os.utime(fresh, ns=(info.st_atime_ns, info.st_mtime_ns + 1))
    reused = os.stat_result((*fresh.stat()[:1], info.st_ino, info.st_dev, *fresh.stat()[3:]))
    assert files.inode_of(reused) != files.inode_of(info)  # the time tells them apart
    store.put(fresh, entry)
    assert store.stored(entry) is not None
