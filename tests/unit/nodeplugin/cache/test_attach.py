"""The new mount API's bind (open_tree + move_mount) without a kernel's say: refusals that make
it unavailable for good, and how the errors it answers are reported."""

from __future__ import annotations

import ctypes
import errno
import os
import pathlib

import pytest

from nodeplugin.cache import attach


class Calls:
    """A ``syscall`` that answers open_tree with a real descriptor (or an errno) and
    move_mount with an errno (or success), recording each call."""

    def __init__(self, base: pathlib.Path, *, open_tree: int = 0, move_mount: int = 0) -> None:
        self.base = base
        self.open_tree_errno = open_tree
        self.move_mount_errno = move_mount
        self.numbers: list[int] = []
        self.opened: list[int] = []

    def __call__(self, number: int, *args: object) -> int:
        self.numbers.append(number)
        failing = self.open_tree_errno if number == attach.SYS_OPEN_TREE else self.move_mount_errno
        if failing:
            ctypes.set_errno(failing)
            return -1
        if number == attach.SYS_OPEN_TREE:
            fd = os.open(self.base, os.O_PATH | os.O_DIRECTORY)
            self.opened.append(fd)
            return fd
        return 0

    def all_closed(self) -> bool:
        for fd in self.opened:
            try:
                os.fstat(fd)
            except OSError:
                continue
            return False
        return True


@pytest.mark.parametrize("refusal", [errno.ENOSYS, errno.EPERM])
def test_a_kernel_that_refuses_open_tree_makes_it_unavailable_for_good(
    tmp_path: pathlib.Path, refusal: int
) -> None:
    calls = Calls(tmp_path, open_tree=refusal)
    attacher = attach.Attacher(syscall=calls)
    assert attacher.attach(str(tmp_path), -1, "t", 0) is False
    assert attacher.attach(str(tmp_path), -1, "t", 0) is False
    assert not attacher.available and calls.numbers == [attach.SYS_OPEN_TREE]


def test_disabled_it_never_calls_the_kernel(tmp_path: pathlib.Path) -> None:
    calls = Calls(tmp_path)
    assert attach.Attacher(enabled=False, syscall=calls).attach(str(tmp_path), -1, "t", 0) is False
    assert calls.numbers == []


def test_another_open_tree_error_is_the_kernels(tmp_path: pathlib.Path) -> None:
    attacher = attach.Attacher(syscall=Calls(tmp_path, open_tree=errno.ENOENT))
    with pytest.raises(OSError) as caught:
        attacher.attach(str(tmp_path / "gone"), -1, "t", 0)
    assert caught.value.errno == errno.ENOENT and attacher.available


def test_a_clone_without_the_sealed_flags_is_closed_unattached(tmp_path: pathlib.Path) -> None:
    calls = Calls(tmp_path)
    sealed = os.ST_RDONLY | os.ST_NOSUID | os.ST_NODEV  # tmp_path's mount is writable
    assert attach.Attacher(syscall=calls).attach(str(tmp_path), -1, "t", sealed) is False
    assert calls.numbers == [attach.SYS_OPEN_TREE] and calls.all_closed()


def test_attached_the_clone_descriptor_is_closed(tmp_path: pathlib.Path) -> None:
    calls = Calls(tmp_path)
    assert attach.Attacher(syscall=calls).attach(str(tmp_path), -1, "t", 0) is True
    assert calls.numbers == [attach.SYS_OPEN_TREE, attach.SYS_MOVE_MOUNT] and calls.all_closed()


@pytest.mark.parametrize(
    ("there", "reported"),
    [("file", errno.ENOTDIR), ("symlink", errno.ENOTDIR), ("directory", errno.EINVAL)],
)
def test_einval_at_something_not_a_directory_is_reported_as_enotdir(
    tmp_path: pathlib.Path, there: str, reported: int
) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    if there == "file":
        (parent / "t").write_bytes(b"")
    elif there == "symlink":
        os.symlink(tmp_path, parent / "t")
    else:
        (parent / "t").mkdir()
    calls = Calls(tmp_path, move_mount=errno.EINVAL)
    fd = os.open(parent, os.O_PATH | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as caught:
            attach.Attacher(syscall=calls).attach(str(tmp_path), fd, "t", 0)
    finally:
        os.close(fd)
    assert caught.value.errno == reported and calls.all_closed()
