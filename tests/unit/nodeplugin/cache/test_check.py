"""The rule a published tree passes before use (``cache.check``): its stored manifest hashes to
the digest its name and marker claim, its files are the manifest's, regular, of its sizes."""

from __future__ import annotations

import os
import pathlib

import pytest

from devkit import trees
from nodeplugin.cache import check, layout
from openapi import manifest

FILES = {"config.json": b"{}", "w/model.bin": b"m" * 4096, "tokenizer.json": b"t" * 300}


def _publish(cache: layout.Layout, files: dict[str, bytes] = FILES) -> str:
    return trees.publish_tree(cache, f"t{len(files)}", files)


@pytest.fixture
def cache(tmp_path: pathlib.Path) -> layout.Layout:
    return layout.Layout(tmp_path / "cache")


def _rewrite(path: pathlib.Path, data: bytes) -> None:
    """What a hand on the node does (root writes past 0444)."""
    os.chmod(path, 0o644)
    path.write_bytes(data)


def test_a_good_tree_passes_and_its_manifest_is_served(cache: layout.Layout) -> None:
    digest = _publish(cache)
    assert check.problem(cache, digest) is None
    data, entries = check.stored(cache, digest)
    assert data == manifest.canonical_bytes(trees.entries(FILES))
    assert {e.path for e in entries} == set(FILES)


def test_an_edited_manifest_fails_even_when_a_file_was_edited_to_match(
        cache: layout.Layout) -> None:
    digest = _publish(cache)
    tree = cache.published_path(digest)
    edited = {**FILES, "config.json": b"{\"evil\": 1}"}
    _rewrite(tree / layout.MANIFEST, manifest.canonical_bytes(trees.entries(edited)))
    found = check.problem(cache, digest)
    assert found is not None and found[0] is check.Check.MANIFEST
    assert found[1] == f"the stored manifest hashes to {manifest.digest(trees.entries(edited))}"
    _rewrite(tree / "config.json", edited["config.json"])  # the files now match the manifest
    assert check.problem(cache, digest) == found
    with pytest.raises(check.Damaged):
        check.stored(cache, digest)


def test_a_removed_or_unreadable_manifest_fails(cache: layout.Layout) -> None:
    digest = _publish(cache)
    tree = cache.published_path(digest)
    os.chmod(tree, 0o755)
    (tree / layout.MANIFEST).unlink()
    assert check.problem(cache, digest) == (check.Check.MANIFEST, "no stored manifest")
    (tree / layout.MANIFEST).mkdir()
    found = check.problem(cache, digest)
    assert found is not None and found[0] is check.Check.MANIFEST
    assert "unreadable" in found[1]


def test_names_types_and_sizes_are_the_manifests(cache: layout.Layout) -> None:
    digest = _publish(cache)
    tree = cache.published_path(digest)
    os.truncate(tree / "w" / "model.bin", 100)
    assert check.problem(cache, digest) == (
        check.Check.SIZE, "w/model.bin: 100 bytes, the manifest says 4096")
    os.truncate(tree / "w" / "model.bin", 4096)
    assert check.problem(cache, digest) is None  # sizes only: the scrub reads the bytes
    os.chmod(tree, 0o755)
    (tree / "extra").write_bytes(b"")
    assert check.problem(cache, digest) == (check.Check.SIZE, "extra: not in the manifest")
    (tree / "extra").unlink()
    os.chmod(tree / "w", 0o755)
    (tree / "w" / "model.bin").unlink()
    assert check.problem(cache, digest) == (check.Check.SIZE, "w/model.bin: missing")
    (tree / "w" / "model.bin").symlink_to("/etc/hostname")
    assert check.problem(cache, digest) == (check.Check.SIZE, "w/model.bin: not a regular file")


def test_a_tree_that_is_gone_has_nothing_to_judge(cache: layout.Layout) -> None:
    digest = _publish(cache)
    cache.published_path(digest).rename(cache.root / "trash")  # what collection's rename does
    assert check.problem(cache, digest) is None
