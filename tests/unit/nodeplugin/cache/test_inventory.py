"""The cache inventory: allocated bytes measured at start and per digest when an attempt ends,
each stored file counted once however many trees link it."""

from __future__ import annotations

import pathlib

from devkit import trees
from nodeplugin.cache import files, inventory, layout, publish

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


def _cache(tmp_path: pathlib.Path) -> layout.Layout:
    cache = layout.Layout(tmp_path)
    cache.create()
    return cache


def _allocated(top: pathlib.Path) -> int:
    return sum(p.lstat().st_blocks * 512 for p in top.rglob("*") if p.is_file())


def test_own_bytes_count_blocks_of_files_nothing_else_links(tmp_path: pathlib.Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.bin").write_bytes(b"x" * 10_000)
    with (tmp_path / "sparse").open("wb") as handle:
        handle.truncate(1 << 30)  # a gigabyte that holds nothing
    assert 10_000 <= inventory.own_bytes(tmp_path) < 100_000
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "b.bin").write_bytes(b"y" * 50_000)
    (tmp_path / "d" / "b.bin").hardlink_to(tmp_path / "elsewhere" / "b.bin")
    assert inventory.own_bytes(tmp_path / "d") < 20_000  # the linked file counts for neither
    assert inventory.own_bytes(tmp_path / "gone") == 0


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


def test_a_file_two_trees_share_is_counted_once(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path / "cache")
    shared = b"w" * 200_000
    one = trees.publish_tree(cache, "one", {"w.bin": shared, "a.json": b"1"})
    two = trees.publish_tree(cache, "two", {"w.bin": shared, "a.json": b"2"})
    three = trees.publish_tree(cache, "three", {"x.bin": b"x" * 50_000})
    stock = inventory.Inventory(cache)
    stock.scan()
    on_disk = _allocated(cache.root / "files") + sum(
        inventory.own_bytes(cache.published_path(d)) for d in (one, two, three))
    assert stock.stored_bytes([]) == on_disk
    # what a walk of the trees would say: the shared file twice
    walked = sum(_allocated(cache.published_path(d)) for d in (one, two, three))
    assert walked - stock.stored_bytes([]) >= 200_000
    # collection's view: the shared file goes only with both trees
    own = {d: stock.bytes_of(d, tree=True) or 0 for d in (one, two, three)}
    its_own = files.of(cache).size_of(files.identity(trees.entries({"a.json": b"1"})[0]))
    assert its_own > 0 and stock.freed_by([one]) == own[one] + its_own  # its a.json alone
    assert stock.freed_by([one, two]) >= own[one] + own[two] + 200_000
    assert stock.freed_by([three]) >= own[three] + 50_000
    # a tree quarantined (no longer published) stops counting at once; its shared file stays
    stock.drop_tree(two)
    assert stock.freed_by([one]) >= 200_000
