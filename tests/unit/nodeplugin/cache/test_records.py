"""Per-digest records in state/: one file a digest, atomic, unreadable ones skipped."""

from __future__ import annotations

import json
import logging
import os
import pathlib

import pytest

from nodeplugin.cache import layout, records

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


def _decode(data: bytes) -> str:
    return str(json.loads(data)["digest"])


def _records(tmp_path: pathlib.Path, prefix: str = "thing-") -> records.DigestRecords:
    cache = layout.Layout(tmp_path)
    cache.create()
    return records.DigestRecords(cache, prefix, "thing")


def test_written_records_load_back_and_deleted_ones_do_not(tmp_path: pathlib.Path) -> None:
    kept = _records(tmp_path)
    kept.write(DIGEST, json.dumps({"digest": DIGEST}).encode())
    kept.write(OTHER, json.dumps({"digest": OTHER}).encode())
    assert os.fspath(kept.path(DIGEST)).endswith("/state/thing-" + "ab" * 32 + ".json")
    assert sorted(_records(tmp_path).load(_decode)) == [DIGEST, OTHER]
    kept.delete(OTHER)
    kept.delete(OTHER)  # already gone: nothing to do
    assert _records(tmp_path).load(_decode) == [DIGEST]


def test_other_prefixes_are_not_ours(tmp_path: pathlib.Path) -> None:
    _records(tmp_path, "a-").write(DIGEST, json.dumps({"digest": DIGEST}).encode())
    assert _records(tmp_path, "b-").load(_decode) == []


def test_an_unreadable_record_is_skipped_with_a_warning(
        tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    kept = _records(tmp_path)
    kept.write(DIGEST, b"{torn")
    kept.write(OTHER, json.dumps({"digest": OTHER}).encode())
    with caplog.at_level(logging.WARNING):
        assert _records(tmp_path).load(_decode) == [OTHER]
    assert "ignoring unreadable thing record thing-" in caplog.text


def test_a_missing_state_directory_holds_no_records(tmp_path: pathlib.Path) -> None:
    assert records.DigestRecords(layout.Layout(tmp_path / "nowhere"), "x-", "x").load(
        _decode) == []


def test_a_digest_that_is_not_one_is_refused(tmp_path: pathlib.Path) -> None:
    with pytest.raises(layout.LayoutError):
        _records(tmp_path).path("sha256:short")
