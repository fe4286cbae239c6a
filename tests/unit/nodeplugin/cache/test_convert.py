"""Caches of an older format (``cache.convert``): a format-1 cache (each tree its own files, no
format recorded) is converted tree by tree with the start checks, files two trees held twice
become one, a crash mid-way converts again, and a later format is refused."""

from __future__ import annotations

import datetime
import os
import pathlib

import pytest

from devkit import trees
from nodeplugin.cache import check, convert, files, integrity, layout, locks, quarantine

NOW = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.UTC)
WEIGHTS = b"w" * 20_000
ONE = {"w.bin": WEIGHTS, "config.json": b'{"a": 1}', "empty": b""}
TWO = {"w.bin": WEIGHTS, "config.json": b'{"a": 2}'}


def _checks(cache: layout.Layout, converting: bool) -> integrity.Integrity:
    return integrity.Integrity(cache, quarantine.Quarantine(cache), locks.DigestLocks(),
                               now=lambda: NOW, converting=converting)


def test_a_fresh_cache_is_of_this_format_and_a_later_one_is_refused(
        tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path / "fresh")
    cache.create()
    assert cache.format() == layout.FORMAT and not convert.check_format(cache)
    cache.set_format(layout.FORMAT + 1)
    with pytest.raises(convert.NewerFormat, match=f"format {layout.FORMAT + 1}"):
        convert.check_format(cache)
    (cache.state / layout.FORMAT_FILE).write_text("two\n")
    with pytest.raises(convert.NewerFormat, match="no format number"):
        convert.check_format(cache)


async def test_a_format1_cache_is_converted_with_the_start_checks(
        tmp_path: pathlib.Path) -> None:
    root = tmp_path / "cache"
    one = trees.publish_format1_tree(root, "one", ONE)
    two = trees.publish_format1_tree(root, "two", TWO)
    cache = layout.Layout(root)
    cache.create()  # as the plugin's start does: trees without a record are not format 2
    assert cache.format() == 1 and convert.check_format(cache)
    first, second = (cache.published_path(d) / "w.bin" for d in (one, two))
    assert first.stat().st_ino != second.stat().st_ino  # the same bytes held twice
    checks = _checks(cache, converting=True)
    checks.expect([one, two])
    assert check.problem(cache, one) == (check.Check.STORE, "config.json: not the node's stored "
                                         "copy of its content")
    await checks.check_all()
    assert checks.failures == {} and checks.pending == set() and checks.converted == 1
    assert cache.format() == layout.FORMAT
    assert first.stat().st_ino == second.stat().st_ino and first.stat().st_nlink == 3
    assert first.read_bytes() == WEIGHTS and second.read_bytes() == WEIGHTS
    for digest in (one, two):
        assert check.problem(cache, digest) is None
    assert not list((cache.files / files.TMP).iterdir())


async def test_a_crash_mid_conversion_converts_again(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "cache"
    one = trees.publish_format1_tree(root, "one", ONE)
    two = trees.publish_format1_tree(root, "two", TWO)
    cache = layout.Layout(root)
    cache.create()
    convert.tree(cache, one)  # converted, then the plugin died before the next tree
    store = files.of(cache)
    (cache.files / files.TMP).mkdir(exist_ok=True)
    os.link(cache.published_path(one) / "w.bin", cache.files / files.TMP / "half-done")
    assert cache.format() == 1
    store.clean()  # the start's cleaning
    checks = _checks(cache, converting=True)
    checks.expect([one, two])
    await checks.check_all()
    assert checks.failures == {} and cache.format() == layout.FORMAT
    assert (cache.published_path(two) / "w.bin").stat().st_ino == \
        (cache.published_path(one) / "w.bin").stat().st_ino


async def test_a_tree_failing_the_older_rule_is_left_to_its_check(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "cache"
    good = trees.publish_format1_tree(root, "good", ONE)
    torn = trees.publish_format1_tree(root, "torn", TWO)
    os.truncate(root / "objects" / "sha256" / layout.hex_of(torn) / "w.bin", 100)
    cache = layout.Layout(root)
    cache.create()
    checks = _checks(cache, converting=True)
    checks.expect([good, torn])
    await checks.check_all()
    assert checks.failures == {check.Check.SIZE: 1}
    assert cache.is_published(good) and not cache.is_published(torn)
    # its torn file never entered the store
    entry = next(e for e in trees.entries(TWO) if e.path == "w.bin")
    found = files.of(cache).stored(entry)
    good_file = cache.published_path(good) / "w.bin"
    assert found is not None and found.st_ino == good_file.stat().st_ino


async def test_after_conversion_a_tree_not_linked_to_the_store_fails(
        tmp_path: pathlib.Path) -> None:
    """Format 2: a tree file that is not the stored copy (a copy put there by hand) is
    quarantined rather than adopted."""
    cache = layout.Layout(tmp_path / "cache")
    digest = trees.publish_tree(cache, "t", TWO)
    path = cache.published_path(digest) / "w.bin"
    os.chmod(path.parent, 0o755)
    path.unlink()
    path.write_bytes(WEIGHTS)
    checks = _checks(cache, converting=False)
    checks.expect([digest])
    await checks.check_all()
    assert checks.failures == {check.Check.STORE: 1} and not cache.is_published(digest)
