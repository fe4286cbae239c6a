from __future__ import annotations

import errno
import json
import os
import pathlib

import pytest

from nodeplugin import errors
from nodeplugin.cache import layout, locks, publish, refs, usage, volumes
from tests.unit.nodeplugin import fakes

DIGEST = fakes.DIGEST
OTHER = "sha256:" + "1e" * 32


def _volumes(root: pathlib.Path, mounter: fakes.FakeMounter) -> volumes.Volumes:
    cache = layout.Layout(root / "cache")
    cache.create()
    for digest in (DIGEST, OTHER):
        staging = cache.new_partial(digest).path
        (staging / "f").write_bytes(digest.encode())
        publish.publish_tree(cache, staging, digest)
    store = usage.UsageStore(cache.state_file(usage.FILE_NAME))
    return volumes.Volumes(cache, mount=mounter, references=refs.References(),
                           usage_store=store, digest_locks=locks.DigestLocks(),
                           kubelet_dir=str(root))


async def test_publish_binds_records_and_is_idempotent(
    tmp_path: pathlib.Path, fake_mounter: fakes.FakeMounter
) -> None:
    vols = _volumes(tmp_path, fake_mounter)
    target = str(tmp_path / "pod" / "mount")
    (tmp_path / "pod").mkdir()
    assert await vols.publish(target, DIGEST)
    assert await vols.publish(target, DIGEST)
    assert fake_mounter.mounted == {target: [str(vols.cache.published_path(DIGEST))]}
    assert vols.references.get(target) == DIGEST
    state = json.loads(vols.cache.state_file(usage.FILE_NAME).read_text())
    assert state["digests"][DIGEST]["referenced"] is True
    with pytest.raises(errors.AlreadyExists):
        await vols.publish(target, OTHER)


async def test_unpublished_digest_does_nothing(
    tmp_path: pathlib.Path, fake_mounter: fakes.FakeMounter
) -> None:
    vols = _volumes(tmp_path, fake_mounter)
    target = str(tmp_path / "mount")
    assert not await vols.publish(target, "sha256:" + "99" * 32)
    assert fake_mounter.mounted == {} and len(vols.references) == 0
    assert not pathlib.Path(target).exists()


async def test_unpublish_removes_mount_target_and_flag(
    tmp_path: pathlib.Path, fake_mounter: fakes.FakeMounter
) -> None:
    vols = _volumes(tmp_path, fake_mounter)
    target = str(tmp_path / "mount")
    await vols.publish(target, DIGEST)
    await vols.unpublish(target)
    await vols.unpublish(target)  # idempotent
    await vols.unpublish(str(tmp_path / "never"))  # unknown target
    assert fake_mounter.mounted == {} and not pathlib.Path(target).exists()
    assert vols.usage.get(DIGEST) is not None
    assert not vols.usage.get(DIGEST).referenced  # type: ignore[union-attr]


async def test_a_reference_that_cannot_be_recorded_fails_the_mount(
    tmp_path: pathlib.Path, fake_mounter: fakes.FakeMounter
) -> None:
    vols = _volumes(tmp_path, fake_mounter)
    broken = vols.cache.state / usage.FILE_NAME
    broken.mkdir()  # a directory where the file goes: the atomic rename fails even as root
    with pytest.raises(errors.Internal, match="cannot record the reference"):
        await vols.publish(str(tmp_path / "mount"), DIGEST)
    assert fake_mounter.mounted == {} and len(vols.references) == 0


async def test_a_failed_bind_leaves_no_reference_and_no_target(
    tmp_path: pathlib.Path, fake_mounter: fakes.FakeMounter
) -> None:
    vols = _volumes(tmp_path, fake_mounter)
    fake_mounter.fail = OSError(errno.EPERM, "nope")
    target = tmp_path / "mount"
    with pytest.raises(errors.Internal, match="bind-mounting"):
        await vols.publish(str(target), DIGEST)
    assert len(vols.references) == 0 and not target.exists()


async def test_a_symlink_target_is_refused_and_nothing_is_mounted_through_it(
    tmp_path: pathlib.Path, fake_mounter: fakes.FakeMounter
) -> None:
    vols = _volumes(tmp_path, fake_mounter)
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "pod").mkdir()
    link = tmp_path / "pod" / "mount"
    os.symlink(outside, link)
    with pytest.raises(errors.PermissionDenied, match="is a symlink"):
        await vols.publish(str(link), DIGEST)
    assert fake_mounter.mounted == {} and len(vols.references) == 0
    assert os.readlink(link) == str(outside)
    assert not vols.usage.get(DIGEST).referenced  # type: ignore[union-attr]


async def test_unpublishing_a_symlink_to_another_target_leaves_that_target_mounted(
    tmp_path: pathlib.Path, fake_mounter: fakes.FakeMounter
) -> None:
    vols = _volumes(tmp_path, fake_mounter)
    for pod in ("victim", "attacker"):
        (tmp_path / pod).mkdir()
    victim = str(tmp_path / "victim" / "mount")
    assert await vols.publish(victim, DIGEST)
    link = tmp_path / "attacker" / "mount"
    os.symlink(victim, link)
    with pytest.raises(errors.PermissionDenied, match="is a symlink"):
        await vols.unpublish(str(link))
    assert fake_mounter.mounted == {victim: [str(vols.cache.published_path(DIGEST))]}
    assert vols.references.get(victim) == DIGEST and os.path.islink(link)


async def test_a_missing_parent_or_a_file_target_is_a_failed_precondition(
    tmp_path: pathlib.Path, fake_mounter: fakes.FakeMounter
) -> None:
    vols = _volumes(tmp_path, fake_mounter)
    with pytest.raises(errors.FailedPrecondition, match="parent directory"):
        await vols.publish(str(tmp_path / "no-such-pod" / "mount"), DIGEST)
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(errors.FailedPrecondition, match="not a directory"):
        await vols.publish(str(tmp_path / "file"), DIGEST)
    assert fake_mounter.mounted == {} and len(vols.references) == 0


class CountingLayout(layout.Layout):
    """The real layout, counting the marker reads."""

    reads = 0

    def is_published(self, digest: str) -> bool:
        self.reads += 1
        return super().is_published(digest)


def _counted(root: pathlib.Path, mounter: fakes.FakeMounter) -> volumes.Volumes:
    vols = _volumes(root, mounter)
    vols.cache = CountingLayout(vols.cache.root)
    return vols


async def _publish_pods(vols: volumes.Volumes, root: pathlib.Path, *pods: str) -> list[bool]:
    done = []
    for pod in pods:
        (root / pod).mkdir(exist_ok=True)
        done.append(await vols.publish(str(root / pod / "mount"), DIGEST))
    return done


async def test_the_marker_is_read_once_until_an_exclusive_section(
    tmp_path: pathlib.Path, fake_mounter: fakes.FakeMounter
) -> None:
    vols = _counted(tmp_path, fake_mounter)
    assert await _publish_pods(vols, tmp_path, "a", "b", "c") == [True, True, True]
    assert isinstance(vols.cache, CountingLayout) and vols.cache.reads == 1
    # collection: exclusive, and the tree leaves objects/ by one rename
    for pod in ("a", "b", "c"):
        await vols.unpublish(str(tmp_path / pod / "mount"))
    async with vols.locks.exclusive(DIGEST):
        os.rename(vols.cache.published_path(DIGEST), tmp_path / "trash")
    assert await _publish_pods(vols, tmp_path, "d") == [False]  # read again: not published
    assert vols.cache.reads == 2 and fake_mounter.mounted == {}


async def test_a_failed_bind_forgets_that_the_tree_was_seen(
    tmp_path: pathlib.Path, fake_mounter: fakes.FakeMounter
) -> None:
    vols = _counted(tmp_path, fake_mounter)
    assert await _publish_pods(vols, tmp_path, "a") == [True]
    fake_mounter.fail = FileNotFoundError(errno.ENOENT, "gone")
    with pytest.raises(errors.Internal):
        await _publish_pods(vols, tmp_path, "b")
    assert await _publish_pods(vols, tmp_path, "c") == [True]
    assert isinstance(vols.cache, CountingLayout) and vols.cache.reads == 2
