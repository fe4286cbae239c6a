"""hub.patterns: fnmatchcase, trailing-slash subtrees, empty allow, ignore wins."""

from __future__ import annotations

from hub import files, patterns

PATHS = ["config.json", "model.safetensors", "onnx/model.onnx", "onnx/sub/x.bin", "README.md"]


def test_empty_allow_keeps_everything() -> None:
    assert patterns.select(PATHS, [], []) == PATHS


def test_glob_is_case_sensitive_and_crosses_slashes() -> None:
    assert patterns.select(PATHS, ["*.json", "*.ONNX"], []) == ["config.json"]
    assert patterns.select(PATHS, ["*.onnx"], []) == ["onnx/model.onnx"]


def test_trailing_slash_is_a_subtree() -> None:
    assert patterns.select(PATHS, ["onnx/"], []) == ["onnx/model.onnx", "onnx/sub/x.bin"]
    kept = ["config.json", "model.safetensors", "README.md"]
    assert patterns.select(PATHS, [], ["onnx/"]) == kept


def test_ignore_wins_over_allow() -> None:
    assert patterns.select(PATHS, ["*.json", "*.md"], ["README*"]) == ["config.json"]


def test_select_keeps_remote_files() -> None:
    remote = files.RemoteFile("a.bin", 1, "sha256", "0" * 64, True)
    other = files.RemoteFile("b.txt", 1, "gitsha1", "0" * 40, False)
    assert patterns.select([remote, other], ["*.bin"], []) == [remote]
