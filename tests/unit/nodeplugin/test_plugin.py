from __future__ import annotations

import os
import pathlib

from nodeplugin import plugin
from nodeplugin.cache import layout

HEX = "ab" * 32


def test_start_up_removes_partials_that_belong_to_no_attempt(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    dead = cache.new_partial("sha256:" + HEX)
    (dead.path / "half.bin").write_bytes(b"x")
    kept = cache.new_partial("sha256:" + HEX)
    (kept.path / layout.RESUMABLE).write_text("{}")
    (cache.partial / "not-a-partial").write_text("")
    removed = plugin.clean_partials(cache)
    assert sorted(removed) == sorted([dead.path.name, "not-a-partial"])
    assert [p.path for p in cache.partials()] == [kept.path]


async def test_references_are_rebuilt_from_the_mount_table(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path / "cache")
    objects = os.path.realpath(cache.objects)
    table = (
        f"1 0 8:1 / / rw - ext4 /dev/sda rw\n"
        f"2 1 8:1 {objects}/{HEX} /kubelet/pods/a/mount ro - ext4 /dev/sda rw\n"
    )
    found = await plugin.rebuild_references(cache, lambda: table)
    assert len(found) == 1 and found.get("/kubelet/pods/a/mount") == "sha256:" + HEX
