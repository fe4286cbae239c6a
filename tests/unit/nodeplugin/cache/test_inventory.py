"""The cache inventory: allocated bytes measured at start and per digest when an attempt ends."""

from __future__ import annotations

import pathlib

from nodeplugin.cache import inventory, layout, publish

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


def _cache(tmp_path: pathlib.Path) -> layout.Layout:
    cache = layout.Layout(tmp_path)
    cache.create()
    return cache


def test_allocated_bytes_count_blocks_of_files_only(tmp_path: pathlib.Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.bin").write_bytes(b"x" * 10_000)
    with (tmp_path / "sparse").open("wb") as handle:
        handle.truncate(1 << 30)  # a gigabyte that holds nothing
    assert 10_000 <= inventory.allocated_bytes(tmp_path) < 100_000
    assert inventory.allocated_bytes(tmp_path / "gone") == 0


def test_scan_and_refresh_follow_an_attempt_to_publication(tmp_path: pathlib.Path) -> None:
    cache = _cache(tmp_path)
    stock = inventory.Inventory(cache)
    stock.scan()
    assert stock.stored_bytes([]) == 0
    staging = cache.new_partial(DIGEST).path
    (staging / "a.bin").write_bytes(b"x" * 20_000)
    (cache.new_partial(OTHER).path / "b.bin").write_bytes(b"y" * 8_000)
    stock.scan()  # as at a start with two partials on disk
    assert 28_000 <= stock.stored_bytes([]) < 40_000
    # While an attempt at DIGEST runs, its received bytes stand for its partial.
    assert 8_000 + 5 <= stock.stored_bytes([(DIGEST, 5)]) < 8_000 + 5 + 8192
    publish.publish_tree(cache, staging, DIGEST)
    stock.refresh(DIGEST)  # the attempt ended: the bytes moved from partial/ to objects/
    after = stock.stored_bytes([])
    assert 28_000 <= after < 40_000
    stock.refresh(DIGEST)  # a published tree is measured once; refreshing again keeps it
    assert stock.stored_bytes([]) == after
    (partial,) = [p for p in cache.partials() if p.digest == OTHER]
    (partial.path / "b.bin").unlink()
    stock.refresh(OTHER)
    assert 20_000 <= stock.stored_bytes([]) < 28_000
