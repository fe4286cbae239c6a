"""The start checks and the quarantine (``cache.integrity``): the trees found at start are
checked by a pass or before their first use, whichever comes first, under the digest's lock; a
tree that fails is moved out of ``objects/`` and recorded; an older plugin's in-place
quarantine is moved out before anything can mount it."""

from __future__ import annotations

import asyncio
import datetime
import os
import pathlib

from devkit import trees
from nodeplugin.cache import check, integrity, layout, locks, quarantine

FILES = {"config.json": b"{}", "w/model.bin": b"m" * 4096}
NOW = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.UTC)


def _world(tmp_path: pathlib.Path) -> tuple[layout.Layout, quarantine.Quarantine,
                                            locks.DigestLocks, list[str]]:
    cache = layout.Layout(tmp_path / "cache")
    cache.create()
    return cache, quarantine.Quarantine(cache), locks.DigestLocks(), []


def _damage(cache: layout.Layout, digest: str) -> None:
    os.truncate(cache.published_path(digest) / "w" / "model.bin", 1)


async def test_the_pass_checks_each_tree_once_and_quarantines_what_fails(
        tmp_path: pathlib.Path) -> None:
    cache, held, digest_locks, changed = _world(tmp_path)
    good = trees.publish_tree(cache, "a", FILES)
    # its own bytes: a file two trees share is one file, and damage to it is damage to both
    bad = trees.publish_tree(cache, "b", {**FILES, "w/model.bin": b"n" * 4096, "other": b"o"})
    _damage(cache, bad)
    checks = integrity.Integrity(cache, held, digest_locks, now=lambda: NOW,
                                 changed=changed.append)
    checks.expect([good, bad])
    assert checks.pending == {good, bad} and not checks.done.is_set()
    await checks.check_all()
    assert checks.done.is_set() and checks.pending == set() and checks.checked == 2
    assert checks.failures == {check.Check.SIZE: 1} and changed == [bad]
    assert cache.is_published(good) and not cache.is_published(bad)
    [(digest, path)] = held.held()
    assert digest == bad and path.parent == cache.held
    assert os.path.getsize(path / "w" / "model.bin") == 1  # the damaged copy, kept apart
    entry = held.get(bad)
    assert entry is not None and entry.message == check.MESSAGES[check.Check.SIZE]
    assert entry.since == NOW
    assert digest_locks.exclusive_sections == 1  # the one that failed, judged again under it
    await checks.before_use(good)  # checked already: nothing more
    assert checks.checked == 2


async def test_a_first_use_checks_its_tree_before_the_pass_reaches_it(
        tmp_path: pathlib.Path) -> None:
    cache, held, digest_locks, changed = _world(tmp_path)
    bad = trees.publish_tree(cache, "a", FILES)
    os.chmod(cache.published_path(bad), 0o755)
    (cache.published_path(bad) / layout.MANIFEST).unlink()
    checks = integrity.Integrity(cache, held, digest_locks, now=lambda: NOW,
                                 changed=changed.append)
    checks.expect([bad])
    # fifty mounts of it at once: one check, and none of them finds it published after
    await asyncio.gather(*(checks.before_use(bad) for _ in range(50)))
    assert checks.checked == 1 and checks.failures == {check.Check.MANIFEST: 1}
    assert not cache.is_published(bad) and changed == [bad]
    await checks.check_all()  # the pass finds nothing left to do
    assert checks.checked == 1 and checks.done.is_set()


async def test_a_quarantine_leaves_a_tree_published_since_alone(tmp_path: pathlib.Path) -> None:
    cache, held, digest_locks, changed = _world(tmp_path)
    digest = trees.publish_tree(cache, "a", FILES)
    judged = os.stat(cache.published_path(digest))
    checks = integrity.Integrity(cache, held, digest_locks, now=lambda: NOW,
                                 changed=changed.append)
    assert await checks.quarantine(digest, check.Check.HASH, (judged.st_dev, judged.st_ino))
    assert not cache.is_published(digest) and changed == [digest]
    # published again (materialized anew): a late verdict on the old tree does not touch it
    again = trees.publish_tree(cache, "a", FILES)
    assert again == digest and cache.is_published(digest)
    assert not await checks.quarantine(digest, check.Check.HASH, (judged.st_dev, judged.st_ino))
    assert cache.is_published(digest) and len(held.held()) == 1 and changed == [digest]


def test_an_in_place_quarantine_of_an_older_plugin_is_moved_out(tmp_path: pathlib.Path) -> None:
    cache, held, digest_locks, _ = _world(tmp_path)
    digest = trees.publish_tree(cache, "a", FILES)
    held.add(digest, "a published file's hash no longer matches its manifest", NOW)
    checks = integrity.Integrity(cache, quarantine.Quarantine(cache), digest_locks,
                                 now=lambda: NOW)
    assert checks.legacy() == [digest]
    assert not cache.is_published(digest) and [d for d, _ in held.held()] == [digest]
    assert checks.legacy() == []  # held now: nothing more to move
