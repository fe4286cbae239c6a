"""The new mount API's bind with real mounts (root): a clone of a read-only tree attached at
(parent, name), its flags checked before it appears, and never onto a symlink or a file."""

from __future__ import annotations

import ctypes
import errno
import os
import pathlib
from collections.abc import Iterator

import pytest

from nodeplugin.cache import attach, mounter, refs
from tests.integration.nodeplugin.csi_harness import mounts_under

SEALED = mounter.SEALED


@pytest.fixture
def view(mount_guard: pathlib.Path) -> Iterator[pathlib.Path]:
    """``tree`` with a file, seen read-only, nosuid and nodev through ``view``."""
    tree, seen = mount_guard / "tree", mount_guard / "view"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "weights.bin").write_bytes(b"w" * 16)
    seen.mkdir()
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    for source, flags in ((bytes(tree), mounter.MS_BIND),
                          (None, mounter.MS_BIND | mounter.MS_REMOUNT | SEALED)):
        assert libc.mount(source, bytes(seen), None, flags, None) == 0, ctypes.get_errno()
    yield seen


@pytest.fixture
def parent(mount_guard: pathlib.Path) -> Iterator[int]:
    (mount_guard / "kubelet").mkdir()
    fd = os.open(mount_guard / "kubelet", os.O_PATH | os.O_DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)


def test_this_kernel_attaches_a_read_only_clone(
    mount_guard: pathlib.Path, view: pathlib.Path, parent: int
) -> None:
    target = mount_guard / "kubelet" / "t"
    target.mkdir()
    attacher = attach.Attacher()
    assert attacher.attach(str(view / "sub"), parent, "t", SEALED) and attacher.available
    assert os.statvfs(target).f_flag & SEALED == SEALED
    assert (target / "weights.bin").read_bytes() == b"w" * 16
    with pytest.raises(OSError) as caught:
        (target / "new").write_bytes(b"x")
    assert caught.value.errno == errno.EROFS
    # the mount table shows the tree as the mount's root, as for a bind (references rebuild)
    found = [m for m in refs.parse_mountinfo(refs.read_mountinfo())
             if m.mount_point == str(target)]
    assert len(found) == 1 and found[0].root == str(mount_guard / "tree" / "sub")


def test_a_source_on_a_writable_mount_is_not_attached(
    mount_guard: pathlib.Path, view: pathlib.Path, parent: int
) -> None:
    (mount_guard / "kubelet" / "t").mkdir()
    assert attach.Attacher().attach(str(mount_guard / "tree"), parent, "t", SEALED) is False
    assert mounts_under(mount_guard / "kubelet") == []


@pytest.mark.parametrize("there", ["symlink", "file"])
def test_never_onto_a_symlink_or_a_file(
    mount_guard: pathlib.Path, view: pathlib.Path, parent: int, there: str
) -> None:
    elsewhere = mount_guard / "elsewhere"
    elsewhere.mkdir()
    at = mount_guard / "kubelet" / "t"
    if there == "symlink":
        os.symlink(elsewhere, at)
    else:
        at.write_bytes(b"")
    with pytest.raises(OSError) as caught:
        attach.Attacher().attach(str(view / "sub"), parent, "t", SEALED)
    assert caught.value.errno == errno.ENOTDIR
    assert mounts_under(mount_guard) == [str(view)] and list(elsewhere.iterdir()) == []


def test_a_missing_target_fails_and_nothing_is_left_mounted(
    mount_guard: pathlib.Path, view: pathlib.Path, parent: int
) -> None:
    with pytest.raises(FileNotFoundError):
        attach.Attacher().attach(str(view / "sub"), parent, "t", SEALED)
    assert mounts_under(mount_guard) == [str(view)]


def test_attached_under_a_shared_kubelet_directory_it_reaches_the_peers(
    mount_guard: pathlib.Path, view: pathlib.Path
) -> None:
    """In a cluster the kubelet directory is a shared mount (the plugin's container has it with
    Bidirectional propagation): the clone must appear in every peer, read-only, as a bind does."""
    kubelet, peer = mount_guard / "kubelet", mount_guard / "peer"
    kubelet.mkdir()
    peer.mkdir()
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    ms_shared = 1 << 20
    for source, at, flags in ((bytes(kubelet), bytes(kubelet), mounter.MS_BIND),
                              (None, bytes(kubelet), ms_shared),
                              (bytes(kubelet), bytes(peer), mounter.MS_BIND)):
        assert libc.mount(source, at, None, flags, None) == 0, ctypes.get_errno()
    (kubelet / "t").mkdir()
    fd = os.open(kubelet, os.O_PATH | os.O_DIRECTORY)
    try:
        assert attach.Attacher().attach(str(view / "sub"), fd, "t", SEALED)
    finally:
        os.close(fd)
    assert (peer / "t" / "weights.bin").read_bytes() == b"w" * 16
    assert os.statvfs(peer / "t").f_flag & SEALED == SEALED
    assert str(peer / "t") in mounts_under(mount_guard)
