"""The fixture hub command's arguments and how it lays out a local directory as a repository."""

from __future__ import annotations

import argparse
import pathlib

import pytest

from devkit.fixturehub import __main__ as command
from devkit.fixturehub import content


def test_addresses() -> None:
    assert command.address("10.250.0.1:8080") == ("10.250.0.1", 8080)
    assert command.address("0.0.0.0:0") == ("0.0.0.0", 0)
    assert command.address("[::1]:9000") == ("::1", 9000)
    for bad in ("10.250.0.1", "host:port", "host:70000", "[::zz]:80"):
        with pytest.raises(argparse.ArgumentTypeError):
            command.address(bad)


def test_generated_files_and_their_sizes() -> None:
    assert command.generated("org/m:w.bin=3Mi") == ("org/m", "w.bin", 3 << 20)
    assert command.generated("org/m:a/b.safetensors=2G") == ("org/m", "a/b.safetensors", 2 * 10**9)
    assert command.generated("org/m:x=17") == ("org/m", "x", 17)
    for bad in ("org/m:w.bin", "org:w.bin=1", "org/m=1", "org/m:w.bin=1Ti", "org/m:=1"):
        with pytest.raises(argparse.ArgumentTypeError):
            command.generated(bad)


def test_a_local_repository_needs_a_directory(tmp_path: pathlib.Path) -> None:
    assert command.local_repo(f"org/m={tmp_path}") == ("org/m", tmp_path)
    for bad in (f"org={tmp_path}", f"org/m={tmp_path / 'missing'}", "org/m"):
        with pytest.raises(argparse.ArgumentTypeError):
            command.local_repo(bad)


def test_a_directory_is_stored_as_hugging_face_stores_an_upload(tmp_path: pathlib.Path) -> None:
    (tmp_path / "config.json").write_bytes(b"{}")
    (tmp_path / "tiny.safetensors").write_bytes(b"x")
    with (tmp_path / "big.txt").open("wb") as big:
        big.truncate(content.LFS_SIZE + 1)  # sparse: no disk
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "vocab.txt").write_bytes(b"a\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_bytes(b"ref")
    (tmp_path / ".hidden").write_bytes(b"")
    found = content.from_directory(tmp_path)
    assert {path: spec.lfs for path, spec in found.items()} == {
        "big.txt": True, "config.json": False, "sub/vocab.txt": False, "tiny.safetensors": True}
    served, lfs = content.make("org/m", "sub/vocab.txt", found["sub/vocab.txt"])
    assert (served.size, served.read(), lfs) == (2, b"a\n", False)
    assert served.read(1) == b"\n"


def test_a_repository_commit_follows_its_files(tmp_path: pathlib.Path) -> None:
    (tmp_path / "w.bin").write_bytes(b"one")
    first = command.commit_of("org/m", content.from_directory(tmp_path))
    assert command.commit_of("org/m", content.from_directory(tmp_path)) == first
    (tmp_path / "w.bin").write_bytes(b"three")
    assert command.commit_of("org/m", content.from_directory(tmp_path)) != first
