"""The cache's read-only view with real mounts (root): targets bound from it are read-only,
nosuid and nodev from the start, in one mount(2) call; the view is never taken for a reference."""

from __future__ import annotations

import ctypes
import errno
import os
import pathlib

import pytest

from nodeplugin.cache import (
    attach,
    layout,
    locks,
    mounter,
    publish,
    refs,
    targets,
    usage,
    view,
    volumes,
)
from tests.integration.nodeplugin.csi_harness import mounts_under

DIGEST = "sha256:" + "cd" * 32


class CountingAttacher(attach.Attacher):
    """The real new-mount-API bind, counting the clones it attached."""

    def __init__(self, *, enabled: bool) -> None:
        super().__init__(enabled=enabled)
        self.attached = 0

    def attach(self, source: str, parent: int, name: str, sealed: int) -> bool:
        done = super().attach(source, parent, name, sealed)
        self.attached += done
        return done


class CountingMounter(mounter.LinuxMounter):
    """The real mounter, counting the remounts it had to make after a bind."""

    def __init__(self, way: str = "attach") -> None:
        self.attacher = CountingAttacher(enabled=way == "attach")
        super().__init__(attacher=self.attacher)
        self.remounts = 0

    def _seal(self, source: str, target: targets.Target) -> None:
        self.remounts += 1
        super()._seal(source, target)


@pytest.fixture(params=["attach", "mount"])
def way(request: pytest.FixtureRequest) -> str:
    """How a target is bound from the view: a clone attached with the new mount API, or one
    mount(2) (kernels before 5.2, or a seccomp profile refusing the new calls)."""
    return str(request.param)


def _setup(base: pathlib.Path, way: str = "attach"
           ) -> tuple[volumes.Volumes, CountingMounter, view.View]:
    cache = layout.Layout(base / "cache")
    cache.create()
    staging = cache.new_partial(DIGEST).path
    (staging / "weights.bin").write_bytes(b"w" * 32)
    publish.publish_tree(cache, staging, DIGEST)
    linux = CountingMounter(way)
    seen = view.View(cache, linux)
    assert seen.open()
    vols = volumes.Volumes(
        cache, mount=linux, references=refs.References(),
        usage_store=usage.UsageStore(cache.state_file(usage.FILE_NAME)),
        digest_locks=locks.DigestLocks(), kubelet_dir=str(base / "kubelet"), readonly_view=seen,
    )  # fmt: skip
    linux.remounts = 0
    return vols, linux, seen


def _target(base: pathlib.Path, pod: str) -> pathlib.Path:
    parent = base / "kubelet" / "pods" / pod / "volumes" / "kubernetes.io~csi" / "model"
    parent.mkdir(parents=True)
    return parent / "mount"


async def _publish_p(base: pathlib.Path, vols: volumes.Volumes) -> pathlib.Path:
    """Publish the digest on Pod ``p``'s target; its path."""
    target = _target(base, "p")
    assert await vols.publish(str(target), DIGEST)
    return target


def _sealed(path: pathlib.Path) -> bool:
    return os.statvfs(path).f_flag & mounter.SEALED == mounter.SEALED


def test_the_view_is_read_only_and_no_reference(mount_guard: pathlib.Path, way: str) -> None:
    vols, _, seen = _setup(mount_guard, way)
    assert mounts_under(mount_guard / "cache") == [seen.path]
    assert _sealed(pathlib.Path(seen.path))
    tree = pathlib.Path(seen.source(DIGEST) or "")
    assert (tree / "weights.bin").read_bytes() == b"w" * 32
    with pytest.raises(OSError) as caught:
        (tree / "new").write_bytes(b"x")
    assert caught.value.errno == errno.EROFS
    assert refs.scan(refs.parse_mountinfo(refs.read_mountinfo()), str(vols.cache.objects)) == {}


async def test_a_target_bound_from_the_view_needs_no_remount(
    mount_guard: pathlib.Path, way: str
) -> None:
    vols, linux, _ = _setup(mount_guard, way)
    target = await _publish_p(mount_guard, vols)
    assert linux.remounts == 0 and _sealed(target)
    assert linux.attacher.attached == (1 if way == "attach" else 0)
    assert (target / "weights.bin").read_bytes() == b"w" * 32
    # after a restart the reference is found again: the mount's source is the tree
    found = refs.scan(refs.parse_mountinfo(refs.read_mountinfo()), str(vols.cache.objects))
    assert found == {str(target): layout.hex_of(DIGEST)}


async def test_a_view_made_writable_does_not_make_a_writable_target(
    mount_guard: pathlib.Path, way: str
) -> None:
    vols, linux, seen = _setup(mount_guard, way)
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    assert libc.mount(None, seen.path.encode(), None, mounter.MS_REMOUNT | mounter.MS_BIND,
                      None) == 0  # somebody remounts the view read-write
    target = await _publish_p(mount_guard, vols)
    assert linux.remounts == 1 and _sealed(target)


async def test_reopening_replaces_the_view_and_closing_leaves_targets_mounted(
    mount_guard: pathlib.Path, way: str
) -> None:
    vols, _, seen = _setup(mount_guard, way)
    target = await _publish_p(mount_guard, vols)
    again = view.View(vols.cache, mounter.LinuxMounter())  # the next run of the plugin
    assert again.open()
    assert mounts_under(mount_guard / "cache") == [seen.path]  # replaced, not stacked
    again.close()
    assert mounts_under(mount_guard / "cache") == [] and again.source(DIGEST) is None
    assert mounts_under(mount_guard / "kubelet") == [str(target)]
    assert (target / "weights.bin").read_bytes() == b"w" * 32
    await vols.unpublish(str(target))  # unpublish does not need the view either
    assert mounts_under(mount_guard / "kubelet") == []


async def test_a_view_unmounted_behind_the_plugins_back_is_given_up(
    mount_guard: pathlib.Path, way: str
) -> None:
    vols, linux, seen = _setup(mount_guard, way)
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    assert libc.umount2(seen.path.encode(), 0) == 0  # somebody unmounts the view
    target = await _publish_p(mount_guard, vols)  # bound from the tree, then remounted
    assert linux.remounts == 1 and _sealed(target) and not seen.ready
    assert (target / "weights.bin").read_bytes() == b"w" * 32
    assert mounts_under(mount_guard / "kubelet") == [str(target)]


def test_a_mounted_view_is_not_given_up(mount_guard: pathlib.Path, way: str) -> None:
    _, _, seen = _setup(mount_guard, way)
    assert seen.lost() is False and seen.ready  # what was missing was the tree, not the view
