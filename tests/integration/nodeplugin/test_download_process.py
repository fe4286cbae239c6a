"""kill -9 of a downloading plugin process: the restart resumes from checkpoints, a tree
published before the kill is served at once after it, and at each crash point of the file store
(a file stored before its tree publishes; every file stored and synced just before the tree's
rename; a revision whose staging directory links the files of a published one) the restart
publishes whole files only, fetching nothing the store already held.

The "plugin" is ``download_driver.py`` run as a script: a ``HubMaterializer`` asking ``ensure``
in a loop and printing its progress, the same code path the CSI node service drives, stopping
itself at the crash point asked for.
"""

from __future__ import annotations

import hashlib
import pathlib

import pytest

from devkit import fixturehub
from hub import config as hub_config
from hub import huggingface, listing
from nodeplugin.cache import check, files, layout
from tests.integration.nodeplugin.download_driver import TOKEN, Driver

pytestmark = pytest.mark.integration

MiB = 1 << 20
REPO = "org/model"


def _driver(root: pathlib.Path, hub: fixturehub.Hub, digest: str, hold: bool = False, *,
            commit: str | None = None, pause: str = "") -> Driver:
    return Driver(root, hub.endpoint, REPO, commit or hub.repo(REPO).commit, digest, hold=hold,
                  pause=pause)


def _published(drivers: list[Driver], root: pathlib.Path, hub: fixturehub.Hub, digest: str,
               commit: str | None = None) -> None:
    """A driver run to a published tree."""
    done = _driver(root, hub, digest, commit=commit)
    drivers.append(done)
    code, err = done.wait()
    assert code == 0, err[-2000:]


def _crashed(drivers: list[Driver], root: pathlib.Path, hub: fixturehub.Hub, digest: str,
             pause: str) -> Driver:
    """A driver stopped at the crash point ``pause``."""
    cut = _driver(root, hub, digest, pause=pause)
    drivers.append(cut)
    cut.paused()
    return cut


async def _digest(hub: fixturehub.Hub, commit: str | None = None) -> str:
    client = hub_config.make_client(hub_config.HubConfig(huggingface_endpoint=hub.endpoint))
    try:
        source = huggingface.HuggingFace(client, hub.endpoint)
        commit = commit or hub.repo(REPO).commit
        return (await listing.manifest_for(source, REPO, commit, (), (), token=TOKEN))[2]
    finally:
        await client.aclose()


async def test_kill_mid_download_then_restart_resumes(
    tmp_path: pathlib.Path, drivers: list[Driver]
) -> None:
    with fixturehub.run() as hub:
        hub.add_repo(REPO, {"a.safetensors": 24 * MiB, "b.safetensors": 24 * MiB,
                            "config.json": b"{}"}, private_token=TOKEN)
        total = 48 * MiB + 2
        for name in ("a.safetensors", "b.safetensors"):
            hub.faults(REPO, name).rate = 6 * MiB
        digest = await _digest(hub)
        root = tmp_path / "cache"
        first = _driver(root, hub, digest)
        drivers.append(first)
        received = 0
        for line in first.progress():
            received = int(str(line["received"]))
            if received >= total // 2:
                break
        first.kill()
        assert received >= total // 2
        served_before = hub.bytes_served(REPO)
        hub.clear_faults()
        second = _driver(root, hub, digest)
        drivers.append(second)
        code, err = second.wait()
        assert code == 0, err[-2000:]
        refetched = hub.bytes_served(REPO) - total
        # Lost at the kill: bytes past each file's last checkpoint and the look-ahead budget.
        assert refetched <= 4 * MiB + 2 * (1 * MiB + 1 * MiB), (refetched, served_before)
        tree = layout.Layout(root).published_path(digest)
        for name in ("a.safetensors", "b.safetensors", "config.json"):
            assert (tree / name).read_bytes() == hub.content(REPO, name).read()
        assert TOKEN not in err


async def test_kill_after_publication_serves_the_tree_at_once(
    tmp_path: pathlib.Path, drivers: list[Driver]
) -> None:
    with fixturehub.run() as hub:
        hub.add_repo(REPO, {"a.safetensors": 3 * MiB, "config.json": b"{}"},
                     private_token=TOKEN)
        digest = await _digest(hub)
        root = tmp_path / "cache"
        first = _driver(root, hub, digest, True)
        drivers.append(first)
        for line in first.progress():
            if line["state"] == "Published":
                break
        first.kill()
        cache = layout.Layout(root)
        assert cache.is_published(digest)
        served = hub.bytes_served(REPO)
        second = _driver(root, hub, digest)
        drivers.append(second)
        code, err = second.wait()  # bounded by wait's own timeout, never by a timed assertion
        assert code == 0, err[-2000:]
        # at once: the published tree is taken as it is (not a byte fetched, nothing partial)
        assert hub.bytes_served(REPO) == served
        tree = cache.published_path(digest)
        assert (tree / "a.safetensors").read_bytes() == hub.content(REPO, "a.safetensors").read()
        assert not cache.partials()


# --- the file store's crash points ------------------------------------------------------------


def _whole(cache: layout.Layout, digest: str, hub: fixturehub.Hub,
           commit: str | None = None) -> None:
    """The published tree passes its check (each file its stored copy) and every file is
    the hub's, whole."""
    assert check.problem(cache, digest) is None
    tree = cache.published_path(digest)
    for entry in check.stored(cache, digest)[1]:
        data = (tree / entry.path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == \
            hub.content(REPO, entry.path, commit).sha256, entry.path


def _stored(cache: layout.Layout, digest: str, path: str) -> pathlib.Path:
    """The stored copy of ``path`` as the hub lists it under ``digest``'s manifest."""
    entries = {e.path: e for e in check.stored(cache, digest)[1]}
    return files.of(cache).path(files.identity(entries[path]))


async def test_kill_after_a_file_was_stored_before_its_tree_published(
    tmp_path: pathlib.Path, drivers: list[Driver]
) -> None:
    with fixturehub.run() as hub:
        hub.add_repo(REPO, {"a.safetensors": 6 * MiB, "b.safetensors": 12 * MiB,
                            "config.json": b"{}"}, private_token=TOKEN)
        hub.faults(REPO, "b.safetensors").rate = 4 * MiB  # still arriving when a is stored
        digest = await _digest(hub)
        root = tmp_path / "cache"
        _crashed(drivers, root, hub, digest, "stored:a.safetensors").kill()
        cache = layout.Layout(root)
        assert not cache.is_published(digest)
        (partial,) = cache.partials()
        stored = files.of(cache).path(("sha256", hub.content(REPO, "a.safetensors").sha256))
        assert (partial.path / "a.safetensors").stat().st_ino == stored.stat().st_ino
        served_a = hub.bytes_served(REPO, "a.safetensors")
        hub.clear_faults()
        _published(drivers, root, hub, digest)
        assert hub.bytes_served(REPO, "a.safetensors") == served_a  # taken from the store
        _whole(cache, digest, hub)
        assert not cache.partials()


async def test_kill_with_every_file_stored_just_before_the_rename(
    tmp_path: pathlib.Path, drivers: list[Driver]
) -> None:
    with fixturehub.run() as hub:
        hub.add_repo(REPO, {"a.safetensors": 3 * MiB, "config.json": b"{}"},
                     private_token=TOKEN)
        digest = await _digest(hub)
        root = tmp_path / "cache"
        _crashed(drivers, root, hub, digest, "synced").kill()
        cache = layout.Layout(root)
        assert not cache.is_published(digest)
        (partial,) = cache.partials()
        assert partial.resumable
        served = hub.bytes_served(REPO)
        _published(drivers, root, hub, digest)
        assert hub.bytes_served(REPO) == served  # every file came from the store
        _whole(cache, digest, hub)
        assert not cache.partials()


async def test_kill_while_a_revision_links_the_files_of_a_published_one(
    tmp_path: pathlib.Path, drivers: list[Driver]
) -> None:
    first_files: dict[str, bytes | int | fixturehub.FileSpec] = {
        "a.safetensors": 6 * MiB, "config.json": b'{"v": 1}'}
    with fixturehub.run() as hub:
        hub.add_repo(REPO, first_files, private_token=TOKEN)
        one = hub.repo(REPO).commit
        digest1 = await _digest(hub, one)
        root = tmp_path / "cache"
        _published(drivers, root, hub, digest1, one)
        two = hub.add_revision(REPO, {**first_files, "config.json": b'{"v": 2}',
                                      "c.safetensors": 16 * MiB}).commit
        digest2 = await _digest(hub, two)
        hub.faults(REPO, "c.safetensors").rate = 6 * MiB
        cut = _driver(root, hub, digest2, commit=two)
        drivers.append(cut)
        cut.until("received", None)
        for line in cut.progress():  # a's 6 MiB are held at once; c half received
            if int(line["received"]) >= 14 * MiB:
                break
        cut.kill()
        cache = layout.Layout(root)
        assert not cache.is_published(digest2)
        _whole(cache, digest1, hub, one)  # the published revision is untouched
        hub.clear_faults()
        _published(drivers, root, hub, digest2, two)
        assert hub.bytes_served(REPO, "a.safetensors") == 6 * MiB  # once, for revision 1
        assert hub.bytes_served(REPO, "c.safetensors") <= 16 * MiB + 4 * MiB + 4 * MiB
        _whole(cache, digest2, hub, two)
        _whole(cache, digest1, hub, one)
        links = {(cache.published_path(d) / "a.safetensors").stat().st_ino
                 for d in (digest1, digest2)}
        assert links == {_stored(cache, digest2, "a.safetensors").stat().st_ino}
        assert not cache.partials()
