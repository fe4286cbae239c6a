from __future__ import annotations

import pathlib

import pytest

from nodeplugin.cache import layout

DIGEST = "sha256:" + "ab" * 32


def test_paths_follow_the_documented_layout(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    assert cache.published_path(DIGEST) == tmp_path / "objects" / "sha256" / ("ab" * 32)
    assert (tmp_path / "partial" / "sha256").is_dir()
    assert (tmp_path / "state").is_dir()


@pytest.mark.parametrize("bad", ["sha256:abc", "md5:" + "a" * 64, "sha256:" + "A" * 64, ""])
def test_bad_digests_are_refused(bad: str) -> None:
    with pytest.raises(layout.LayoutError):
        layout.hex_of(bad)


def test_a_tree_counts_only_with_its_marker(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    tree = cache.published_path(DIGEST)
    tree.mkdir()
    assert not cache.is_published(DIGEST)
    (tree / layout.MARKER).write_bytes(b"sha256:" + b"cd" * 32 + b"\n")
    assert not cache.is_published(DIGEST)
    (tree / layout.MARKER).write_bytes(layout.marker_bytes(DIGEST))
    assert cache.is_published(DIGEST)
    assert cache.published() == [DIGEST]


def test_partials_are_parsed_and_strays_listed(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    first = cache.new_partial(DIGEST)
    second = cache.new_partial(DIGEST)
    assert first.path != second.path
    (first.path / layout.RESUMABLE).write_text("{}")
    (cache.partial / "junk").mkdir()
    (cache.partial / "file.x").write_text("")
    found = {p.attempt_id: p for p in cache.partials()}
    assert set(found) == {first.attempt_id, second.attempt_id}
    assert found[first.attempt_id].resumable and not found[second.attempt_id].resumable
    assert {p.name for p in cache.stray_partials()} == {"junk", "file.x"}


def test_state_file_names_stay_inside_state(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    assert cache.state_file("usage.json") == tmp_path / "state" / "usage.json"
    for bad in ("../x", ".hidden", ""):
        with pytest.raises(layout.LayoutError):
            cache.state_file(bad)
