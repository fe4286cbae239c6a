"""Targets below the kubelet directory: canonical paths, and no symlink followed on the way.

Every test runs twice: with openat2 (one call) and with the component-by-component walk the
plugin falls back to where the kernel lacks openat2.
"""

from __future__ import annotations

import os
import pathlib

import pytest

from nodeplugin import errors
from nodeplugin.cache import nofollow, targets


class Counting(nofollow.Opener):
    """openat2, counting the parents it opened itself (the rest were walked)."""

    def __init__(self, *, enabled: bool) -> None:
        super().__init__(enabled=enabled)
        self.enabled = enabled
        self.opened = 0

    def open(self, path: str, flags: int) -> int | None:
        fd = super().open(path, flags)
        self.opened += fd is not None
        return fd


@pytest.fixture(params=["openat2", "walk"])
def opener(request: pytest.FixtureRequest) -> Counting:
    return Counting(enabled=request.param == "openat2")


def _kubelet(tmp_path: pathlib.Path, opener: Counting) -> tuple[pathlib.Path, targets.Targets]:
    kubelet = tmp_path / "kubelet"
    (kubelet / "pods" / "a" / "volumes").mkdir(parents=True)
    return kubelet, targets.Targets(str(kubelet), opener=opener)


def test_canonical_paths_lie_strictly_below_the_kubelet_dir(
    tmp_path: pathlib.Path, opener: Counting
) -> None:
    kubelet, rules = _kubelet(tmp_path, opener)
    canonical = rules.canonical(f"{kubelet}/pods/a//volumes/./mount")
    assert canonical == f"{kubelet}/pods/a/volumes/mount"
    for outside in ("/etc/x", str(kubelet), f"{kubelet}/../x", f"{kubelet}/pods/../../x", "rel/x"):
        with pytest.raises(errors.PermissionDenied, match="target path"):
            rules.canonical(outside)


def test_a_symlinked_kubelet_dir_is_followed_and_reported_by_its_real_path(
    tmp_path: pathlib.Path, opener: Counting
) -> None:
    real = tmp_path / "data" / "kubelet"
    (real / "pods" / "u").mkdir(parents=True)
    os.symlink(real, tmp_path / "kubelet")
    rules = targets.Targets(str(tmp_path / "kubelet"), opener=opener)
    canonical = rules.check(str(tmp_path / "kubelet" / "pods" / "u" / "mount"))
    assert canonical == str(real / "pods" / "u" / "mount")
    with rules.open(canonical) as opened:
        assert opened is not None and opened.name == "mount"
        assert os.readlink(f"/proc/self/fd/{opened.parent}") == str(real / "pods" / "u")


def test_a_target_that_is_a_symlink_is_refused_wherever_it_points(
    tmp_path: pathlib.Path, opener: Counting
) -> None:
    kubelet, rules = _kubelet(tmp_path, opener)
    inside = kubelet / "pods" / "a" / "volumes" / "other"
    inside.mkdir()
    for name, destination in (("out", tmp_path), ("in", inside)):
        os.symlink(destination, kubelet / "pods" / "a" / "volumes" / name)
        with pytest.raises(errors.PermissionDenied, match="is a symlink; nothing below the "
                                                           "kubelet directory may be a symlink"):
            rules.check(str(kubelet / "pods" / "a" / "volumes" / name))


def test_a_symlink_on_the_way_is_refused_even_when_it_stays_inside(
    tmp_path: pathlib.Path, opener: Counting
) -> None:
    kubelet, rules = _kubelet(tmp_path, opener)
    os.symlink(kubelet / "pods" / "a", kubelet / "pods" / "b")
    os.symlink("/etc", kubelet / "pods" / "escape")
    for via in ("b", "escape"):
        with pytest.raises(errors.PermissionDenied, match=f"passes through the symlink "
                                                           f"'{kubelet}/pods/{via}'"):
            rules.check(str(kubelet / "pods" / via / "volumes" / "mount"))


def test_something_other_than_a_directory_is_a_failed_precondition(
    tmp_path: pathlib.Path, opener: Counting
) -> None:
    kubelet, rules = _kubelet(tmp_path, opener)
    (kubelet / "pods" / "a" / "volumes" / "mount").write_bytes(b"")
    (kubelet / "pods" / "file").write_bytes(b"")
    with pytest.raises(errors.FailedPrecondition, match="exists and is not a directory"):
        rules.check(str(kubelet / "pods" / "a" / "volumes" / "mount"))
    with pytest.raises(errors.FailedPrecondition, match="which is not a directory"):
        rules.check(str(kubelet / "pods" / "file" / "mount"))


def test_missing_directories_open_as_none(tmp_path: pathlib.Path, opener: Counting) -> None:
    kubelet, rules = _kubelet(tmp_path, opener)
    canonical = rules.check(str(kubelet / "pods" / "gone" / "volumes" / "mount"))
    with rules.open(canonical) as opened:
        assert opened is None
    with rules.open(str(kubelet / "pods" / "a" / "volumes" / "mount")) as opened:
        assert opened is not None and opened.lstat() is None


def test_a_directory_swapped_for_a_symlink_after_the_walk_is_not_followed(
    tmp_path: pathlib.Path, opener: Counting
) -> None:
    kubelet, rules = _kubelet(tmp_path, opener)
    target = kubelet / "pods" / "a" / "volumes" / "mount"
    target.mkdir()
    with rules.open(str(target)) as opened:
        assert opened is not None
        target.rmdir()
        os.symlink(tmp_path, target)
        with pytest.raises(NotADirectoryError):
            opened.open_directory()


def test_long_paths_are_cut_in_messages(tmp_path: pathlib.Path, opener: Counting) -> None:
    _, rules = _kubelet(tmp_path, opener)
    with pytest.raises(errors.PermissionDenied) as caught:
        rules.canonical("/elsewhere/" + "x" * 10_000)
    assert len(caught.value.message) < 400


def test_a_repointed_kubelet_dir_is_followed_within_a_second(
    tmp_path: pathlib.Path, opener: Counting
) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    for real in (first, second):
        (real / "pods" / "u").mkdir(parents=True)
    os.symlink(first, tmp_path / "kubelet")
    now = [100.0]
    rules = targets.Targets(str(tmp_path / "kubelet"), clock=lambda: now[0], opener=opener)
    target = str(tmp_path / "kubelet" / "pods" / "u" / "mount")
    assert rules.check(target) == str(first / "pods" / "u" / "mount")
    os.unlink(tmp_path / "kubelet")
    os.symlink(second, tmp_path / "kubelet")
    now[0] += targets.REAL_BASE_SECONDS / 2
    assert rules.check(target) == str(first / "pods" / "u" / "mount")  # reused meanwhile
    now[0] += targets.REAL_BASE_SECONDS
    assert rules.check(target) == str(second / "pods" / "u" / "mount")



def test_openat2_opens_the_parent_in_one_call_where_the_kernel_has_it(
    tmp_path: pathlib.Path, opener: Counting
) -> None:
    kubelet, rules = _kubelet(tmp_path, opener)
    with rules.open(str(kubelet / "pods" / "a" / "volumes" / "mount")) as opened:
        assert opened is not None
        assert os.readlink(f"/proc/self/fd/{opened.parent}") == str(kubelet / "pods" / "a" /
                                                                     "volumes")
    with rules.open(str(kubelet / "pods" / "gone" / "mount")) as opened:
        assert opened is None
    # this kernel has openat2: the parent came from one call, not from the walk
    assert opener.opened == (1 if opener.enabled else 0)
