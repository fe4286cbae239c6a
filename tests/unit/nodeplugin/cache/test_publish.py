from __future__ import annotations

import os
import pathlib
import stat

import pytest

from devkit import trees
from nodeplugin.cache import files, fsutil, layout, publish
from openapi import manifest

DIGEST = "sha256:" + "12" * 32
STAGED = {"config.json": b"{}", "sub/weights.bin": b"\x00" * 100, "empty": b""}


def _staged(cache: layout.Layout) -> pathlib.Path:
    partial = cache.new_partial(DIGEST)
    (partial.path / "sub").mkdir()
    (partial.path / "config.json").write_bytes(b"{}")
    (partial.path / "sub" / "weights.bin").write_bytes(b"\x00" * 100)
    (partial.path / "empty").write_bytes(b"")
    (partial.path / layout.RESUMABLE).write_text("{}")
    return partial.path


MANIFEST = manifest.canonical_bytes(trees.entries(STAGED))


def test_publish_seals_marks_and_renames(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    staging = _staged(cache)
    final = publish.publish_tree(cache, staging, DIGEST, manifest_bytes=MANIFEST)
    assert final == cache.published_path(DIGEST)
    assert not staging.exists()
    assert cache.is_published(DIGEST)
    assert (final / layout.MANIFEST).read_bytes() == MANIFEST
    assert not (final / layout.RESUMABLE).exists()
    assert (final / "sub" / "weights.bin").read_bytes() == b"\x00" * 100
    for path in (final / "config.json", final / "sub" / "weights.bin", final / layout.MARKER):
        assert stat.S_IMODE(path.stat().st_mode) == 0o444
    for path in (final, final / "sub"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o555
    # every listed file but the empty one is the node's stored copy: one inode, two names
    store = files.of(cache)
    for entry in trees.entries(STAGED):
        path = final / entry.path
        if entry.size == 0:
            assert store.stored(entry) is None and path.stat().st_nlink == 1
            continue
        copy = store.path(files.identity(entry))
        assert copy.stat().st_ino == path.stat().st_ino and path.stat().st_nlink == 2
        assert stat.S_IMODE(copy.stat().st_mode) == 0o444


def test_a_second_tree_links_the_copy_the_first_stored(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    first = trees.publish_tree(cache, "a", {"w.bin": b"w" * 5000, "a.json": b"a"})
    second = trees.publish_tree(cache, "b", {"w.bin": b"w" * 5000, "b.json": b"b"})
    one = cache.published_path(first) / "w.bin"
    two = cache.published_path(second) / "w.bin"
    assert one.stat().st_ino == two.stat().st_ino and one.stat().st_nlink == 3


def test_a_listed_file_missing_or_of_another_size_is_refused(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    staging = _staged(cache)
    (staging / "config.json").write_bytes(b"{ }")
    with pytest.raises(publish.PublishError, match=r"config\.json"):
        publish.publish_tree(cache, staging, DIGEST, manifest_bytes=MANIFEST)
    (staging / "config.json").unlink()
    with pytest.raises(publish.PublishError, match=r"config\.json: missing"):
        publish.publish_tree(cache, staging, DIGEST, manifest_bytes=MANIFEST)
    assert not cache.is_published(DIGEST)


def test_publish_twice_keeps_the_first_tree(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    first = publish.publish_tree(cache, _staged(cache), DIGEST)
    inode = first.stat().st_ino
    second_staging = _staged(cache)
    assert publish.publish_tree(cache, second_staging, DIGEST) == first
    assert first.stat().st_ino == inode
    assert not second_staging.exists()


def test_a_markerless_leftover_is_replaced(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    debris = cache.published_path(DIGEST)
    debris.mkdir()
    (debris / "half").write_text("x")
    publish.publish_tree(cache, _staged(cache), DIGEST)
    assert cache.is_published(DIGEST)
    assert not (debris / "half").exists()


def test_symlinks_and_reserved_names_are_refused(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    staging = _staged(cache)
    os.symlink("/etc/passwd", staging / "link")
    with pytest.raises(publish.PublishError):
        publish.publish_tree(cache, staging, DIGEST)
    assert not cache.is_published(DIGEST)
    other = _staged(cache)
    (other / layout.MARKER).write_text("forged")
    with pytest.raises(publish.PublishError):
        publish.publish_tree(cache, other, DIGEST)


def test_remove_tree_handles_read_only_trees(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    final = publish.publish_tree(cache, _staged(cache), DIGEST)
    fsutil.remove_tree(final)
    assert not final.exists()
    fsutil.remove_tree(final)  # missing is fine



def test_sweep_keeps_what_the_manifest_names_and_the_ledger(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    staging = _staged(cache)
    (staging / "sub" / ".weights.bin.tmp").write_bytes(b"torn")
    (staging / "stray").mkdir()
    (staging / "stray" / "x").write_bytes(b"x")
    publish.sweep(staging, set(STAGED))
    left = {str(p.relative_to(staging)) for p in staging.rglob("*")}
    assert left == {"config.json", "sub", "sub/weights.bin", "empty", layout.RESUMABLE}
