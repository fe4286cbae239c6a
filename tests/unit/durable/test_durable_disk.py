"""The one atomic write: unique temporary name, exact mode, fsync of the file then its directory."""

from __future__ import annotations

import os
import pathlib
import stat
import threading

import pytest

from durable import disk


class Recorder:
    """Records what each fsync made durable (the path behind the descriptor) and syncs it."""

    def __init__(self) -> None:
        self.synced: list[str] = []

    def __call__(self, fd: int) -> None:
        self.synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        os.fsync(fd)


def test_replaces_the_content_private_by_default(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "state.json"
    target.write_bytes(b"old")
    target.chmod(0o644)
    disk.write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    disk.write_atomic(str(target), b"newer")  # a str path works too
    assert target.read_bytes() == b"newer"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_the_mode_is_exact_whatever_the_umask(tmp_path: pathlib.Path) -> None:
    previous = os.umask(0o077)
    try:
        disk.write_atomic(tmp_path / "public", b"x", mode=0o644)
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "public").stat().st_mode) == 0o644


def test_the_file_then_its_directory_are_fsynced(tmp_path: pathlib.Path) -> None:
    recorder = Recorder()
    target = tmp_path / "tokens.csv"
    disk.write_atomic(target, b"data", fsync=recorder)
    assert len(recorder.synced) == 2
    temporary, directory = recorder.synced
    # The file is synced under its temporary name, before the rename; then the directory.
    assert pathlib.Path(temporary).parent == tmp_path and temporary != str(target)
    assert directory == str(tmp_path)


def test_nothing_planted_at_a_predictable_name_is_followed(tmp_path: pathlib.Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    directory = tmp_path / "data"
    directory.mkdir()
    for name in (".kubeconfig.tmp", ".kubeconfig.tmp.tmp", "kubeconfig.tmp"):
        os.symlink(victim, directory / name)
    disk.write_atomic(directory / "kubeconfig", b"secret")
    assert victim.read_bytes() == b"precious"
    assert (directory / "kubeconfig").read_bytes() == b"secret"


def test_concurrent_writers_never_share_a_temporary_file(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "usage.json"
    payloads = [bytes([65 + i]) * 200_000 for i in range(8)]
    start = threading.Barrier(len(payloads))
    errors: list[BaseException] = []

    def write(data: bytes) -> None:
        start.wait()
        try:
            disk.write_atomic(target, data)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.read_bytes() in payloads  # one writer's whole content, never a mix
    assert [p.name for p in tmp_path.iterdir()] == ["usage.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "record"
    target.write_bytes(b"old")

    def failing(fd: int) -> None:
        raise OSError(5, "injected I/O error")

    with pytest.raises(OSError, match="injected"):
        disk.write_atomic(target, b"new", fsync=failing)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["record"]


def test_fsync_path_syncs_a_directory(tmp_path: pathlib.Path) -> None:
    recorder = Recorder()
    disk.fsync_path(tmp_path, fsync=recorder)
    assert recorder.synced == [str(tmp_path)]
