"""The mount(2)/umount2(2) calls themselves on real bind mounts (root): read-only, and never
through a symlink, even one swapped in after the target was checked."""

from __future__ import annotations

import errno
import os
import pathlib

import pytest

from nodeplugin.cache import mounter, targets
from tests.integration.nodeplugin.csi_harness import mounts_under


def _layout(base: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path, targets.Targets]:
    source = base / "tree"
    source.mkdir()
    (source / "weights.bin").write_bytes(b"w" * 100)
    pod = base / "kubelet" / "pods" / "p"
    pod.mkdir(parents=True)
    return source, pod, targets.Targets(str(base / "kubelet"))


def test_bind_is_read_only_and_unmounts_once(mount_guard: pathlib.Path) -> None:
    source, pod, rules = _layout(mount_guard)
    (pod / "mount").mkdir()
    linux = mounter.LinuxMounter()
    with rules.open(str(pod / "mount")) as opened:
        assert opened is not None
        linux.bind_readonly(str(source), opened)
        assert mounts_under(pod) == [str(pod / "mount")]
        assert (pod / "mount" / "weights.bin").read_bytes() == b"w" * 100
        with pytest.raises(OSError) as caught:
            (pod / "mount" / "new").write_bytes(b"x")
        assert caught.value.errno == errno.EROFS
        assert linux.unmount(opened) is True
        assert linux.unmount(opened) is False
    assert mounts_under(pod) == []


def test_a_target_swapped_for_a_symlink_after_the_check_is_not_mounted_over(
    mount_guard: pathlib.Path,
) -> None:
    source, pod, rules = _layout(mount_guard)
    outside = mount_guard / "host-dir"
    outside.mkdir()
    (pod / "mount").mkdir()
    linux = mounter.LinuxMounter()
    with rules.open(str(pod / "mount")) as opened:
        assert opened is not None
        targets.refuse_unusable(opened)  # the check passes: a directory
        (pod / "mount").rmdir()
        os.symlink(outside, pod / "mount")  # then the swap
        with pytest.raises(NotADirectoryError):
            linux.bind_readonly(str(source), opened)
    assert mounts_under(mount_guard) == []
    assert list(outside.iterdir()) == []


def test_unmount_through_a_symlink_leaves_the_mount_it_points_at(
    mount_guard: pathlib.Path,
) -> None:
    source, pod, rules = _layout(mount_guard)
    (pod / "mount").mkdir()
    os.symlink(pod / "mount", pod / "link")
    linux = mounter.LinuxMounter()
    with rules.open(str(pod / "mount")) as opened:
        assert opened is not None
        linux.bind_readonly(str(source), opened)
    with rules.open(str(pod / "link")) as link:
        assert link is not None
        assert linux.unmount(link) is False
    assert mounts_under(pod) == [str(pod / "mount")]
    assert (pod / "mount" / "weights.bin").exists()
