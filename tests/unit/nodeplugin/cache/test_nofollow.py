"""openat2 with RESOLVE_NO_SYMLINKS, and the fallback when the kernel refuses the call."""

from __future__ import annotations

import ctypes
import errno
import os
import pathlib

import pytest

from nodeplugin.cache import nofollow

FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


def test_this_kernel_has_openat2_and_it_opens_a_directory(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    opener = nofollow.Opener()
    fd = opener.open(str(tmp_path / "a" / "b"), FLAGS)
    assert fd is not None and opener.available
    try:
        assert os.readlink(f"/proc/self/fd/{fd}") == str(tmp_path / "a" / "b")
    finally:
        os.close(fd)


@pytest.mark.parametrize("where", ["middle", "last"])
def test_a_symlink_in_any_component_is_refused(tmp_path: pathlib.Path, where: str) -> None:
    (tmp_path / "real" / "b").mkdir(parents=True)
    os.symlink(tmp_path / "real", tmp_path / "link")
    path = tmp_path / "link" / "b" if where == "middle" else tmp_path / "link"
    with pytest.raises(OSError) as caught:
        nofollow.Opener().open(str(path), FLAGS)
    assert caught.value.errno == errno.ELOOP


def test_missing_and_non_directories_fail_as_the_kernel_says(tmp_path: pathlib.Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(FileNotFoundError):
        nofollow.Opener().open(str(tmp_path / "gone" / "x"), FLAGS)
    with pytest.raises(NotADirectoryError):
        nofollow.Opener().open(str(tmp_path / "file"), FLAGS)


@pytest.mark.parametrize("refusal", [errno.ENOSYS, errno.EPERM])
def test_a_kernel_that_refuses_the_call_makes_it_unavailable_for_good(
    tmp_path: pathlib.Path, refusal: int
) -> None:
    calls = []

    def refused(*args: object) -> int:
        calls.append(args)
        ctypes.set_errno(refusal)
        return -1

    opener = nofollow.Opener(syscall=refused)
    assert opener.open(str(tmp_path), FLAGS) is None
    assert opener.open(str(tmp_path), FLAGS) is None
    assert not opener.available and len(calls) == 1


def test_disabled_means_never_called(tmp_path: pathlib.Path) -> None:
    assert nofollow.Opener(enabled=False).open(str(tmp_path), FLAGS) is None
