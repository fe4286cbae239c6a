"""A power loss at the file store's crash points (root): the cache is a real ext4 filesystem in
a loop-mounted image; the downloading process (``download_driver.py``) stops at the crash point,
the image is copied as it is (what had reached the disk, nothing the page cache still held
back), and the node comes back on the copy after an fsck, as a machine would. Every tree
published before the power went is whole and passes its check (its files' links to the stored
copies are durable with it), a file stored and synced is not fetched again, and the restart
publishes whole files only."""

from __future__ import annotations

import dataclasses
import pathlib
import subprocess
from collections.abc import Iterator

import pytest

from devkit import fixturehub
from nodeplugin.cache import layout
from tests.integration.nodeplugin import csi_harness
from tests.integration.nodeplugin.download_driver import TOKEN, Driver
from tests.integration.nodeplugin.test_download_process import (
    REPO,
    _crashed,
    _digest,
    _driver,
    _published,
    _whole,
)

pytestmark = pytest.mark.integration

MiB = 1 << 20


@dataclasses.dataclass
class Disk:
    image: pathlib.Path
    mounted: pathlib.Path
    work: pathlib.Path

    @property
    def root(self) -> pathlib.Path:
        return self.mounted / "cache"

    def power_loss(self, driver: Driver) -> pathlib.Path:
        """The driver is stopped: copy what reached the disk, kill it, fsck the copy, mount it
        (as the node boots); the cache root on the copy."""
        crashed = self.work / "crashed.img"
        subprocess.run(["cp", "--sparse=always", str(self.image), str(crashed)], check=True)
        driver.kill()
        fsck = subprocess.run(["e2fsck", "-f", "-y", str(crashed)], capture_output=True,
                              text=True, check=False)
        assert fsck.returncode in (0, 1), fsck.stdout + fsck.stderr
        after = self.work / "after"
        after.mkdir()
        subprocess.run(["mount", "-o", "loop", str(crashed), str(after)], check=True)
        return after / "cache"


@pytest.fixture
def disk(tmp_path: pathlib.Path) -> Iterator[Disk]:
    image = tmp_path / "disk.img"
    with image.open("wb") as handle:
        handle.truncate(256 * MiB)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True,
                   capture_output=True)
    mounted = tmp_path / "disk"
    mounted.mkdir()
    subprocess.run(["mount", "-o", "loop", str(image), str(mounted)], check=True)
    try:
        yield Disk(image, mounted, tmp_path)
    finally:
        csi_harness.unmount_all_under(tmp_path)


async def test_power_loss_right_after_a_revision_linking_the_files_of_another_published(
    disk: Disk, drivers: list[Driver]
) -> None:
    first: dict[str, bytes | int | fixturehub.FileSpec] = {
        "a.safetensors": 8 * MiB, "b.safetensors": 4 * MiB, "config.json": b'{"v": 1}'}
    with fixturehub.run() as hub:
        hub.add_repo(REPO, first, private_token=TOKEN)
        one = hub.repo(REPO).commit
        digest1 = await _digest(hub, one)
        _published(drivers, disk.root, hub, digest1, one)
        two = hub.add_revision(REPO, {**first, "config.json": b'{"v": 2}'}).commit
        digest2 = await _digest(hub, two)
        held = _driver(disk.root, hub, digest2, commit=two, hold=True)
        drivers.append(held)
        held.until("state", "Published")
        held.stop()  # the power goes right after revision 2 turned Ready
        root = disk.power_loss(held)
        cache = layout.Layout(root)
        assert cache.is_published(digest1) and cache.is_published(digest2)
        _whole(cache, digest1, hub, one)
        _whole(cache, digest2, hub, two)
        served = hub.bytes_served(REPO)
        _published(drivers, root, hub, digest2, two)
        assert hub.bytes_served(REPO) == served


@pytest.mark.parametrize("pause", ["stored:a.safetensors", "synced"])
async def test_power_loss_before_a_tree_published(
    disk: Disk, drivers: list[Driver], pause: str
) -> None:
    """Stored and synced files are not fetched again; whatever else was lost is, and the tree
    the restart publishes holds whole files only."""
    with fixturehub.run() as hub:
        hub.add_repo(REPO, {"a.safetensors": 8 * MiB, "b.safetensors": 6 * MiB,
                            "config.json": b"{}"}, private_token=TOKEN)
        digest = await _digest(hub)
        root = disk.power_loss(_crashed(drivers, disk.root, hub, digest, pause))
        cache = layout.Layout(root)
        assert not cache.is_published(digest)
        served = hub.bytes_served(REPO)
        _published(drivers, root, hub, digest)
        _whole(cache, digest, hub)
        refetched = hub.bytes_served(REPO) - served
        if pause == "synced":  # the store's names were durable: nothing fetched again
            assert refetched == 0
        else:  # what was lost is fetched again, never more than the model once
            assert refetched <= 14 * MiB + 2
        assert not cache.partials()
