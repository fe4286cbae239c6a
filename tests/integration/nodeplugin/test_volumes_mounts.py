"""Volumes with real bind mounts (root): publish and unpublish through mount(2), including
targets that somebody stacked a second mount on."""

from __future__ import annotations

import pathlib

from nodeplugin.cache import layout, locks, mounter, publish, refs, usage, volumes
from tests.integration.nodeplugin.csi_harness import mounts_under

DIGEST = "sha256:" + "ab" * 32


def _volumes(base: pathlib.Path) -> volumes.Volumes:
    cache = layout.Layout(base / "cache")
    cache.create()
    staging = cache.new_partial(DIGEST).path
    (staging / "weights.bin").write_bytes(b"w" * 64)
    publish.publish_tree(cache, staging, DIGEST)
    return volumes.Volumes(
        cache, mount=mounter.LinuxMounter(), references=refs.References(),
        usage_store=usage.UsageStore(cache.state_file(usage.FILE_NAME)),
        digest_locks=locks.DigestLocks(), kubelet_dir=str(base / "kubelet"),
    )  # fmt: skip


def _parent(base: pathlib.Path, pod: str) -> pathlib.Path:
    parent = base / "kubelet" / "pods" / pod / "volumes" / "kubernetes.io~csi" / "model"
    parent.mkdir(parents=True)
    return parent


async def test_publish_then_unpublish_leaves_nothing_mounted_or_created(
    mount_guard: pathlib.Path,
) -> None:
    vols = _volumes(mount_guard)
    target = _parent(mount_guard, "p") / "mount"
    assert await vols.publish(str(target), DIGEST)
    assert mounts_under(mount_guard / "kubelet") == [str(target)]
    assert (target / "weights.bin").read_bytes() == b"w" * 64
    await vols.unpublish(str(target))
    assert mounts_under(mount_guard / "kubelet") == [] and not target.exists()
    assert target.parent.is_dir()  # kubelet's directory stays
    await vols.unpublish(str(target))  # again: nothing to do


async def test_every_mount_stacked_on_a_target_is_unmounted(mount_guard: pathlib.Path) -> None:
    vols = _volumes(mount_guard)
    target = _parent(mount_guard, "p") / "mount"
    assert await vols.publish(str(target), DIGEST)
    other = mount_guard / "other"
    other.mkdir()
    linux = mounter.LinuxMounter()
    for _ in range(2):  # two more binds on top of ours
        with vols.targets.open(str(target)) as opened:
            assert opened is not None
            linux.bind_readonly(str(other), opened)
    assert mounts_under(mount_guard / "kubelet") == [str(target)] * 3
    await vols.unpublish(str(target))
    assert mounts_under(mount_guard / "kubelet") == [] and not target.exists()
    assert vols.references.get(str(target)) is None


async def test_an_unmounted_directory_is_removed_only_when_empty(
    mount_guard: pathlib.Path,
) -> None:
    vols = _volumes(mount_guard)
    empty = _parent(mount_guard, "a") / "mount"
    empty.mkdir()
    full = _parent(mount_guard, "b") / "mount"
    full.mkdir()
    (full / "keep").write_bytes(b"not ours")
    await vols.unpublish(str(empty))
    await vols.unpublish(str(full))
    assert not empty.exists()
    assert (full / "keep").read_bytes() == b"not ours"
