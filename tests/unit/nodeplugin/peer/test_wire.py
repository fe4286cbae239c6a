"""The Range grammar the peer port serves, and its paths."""

from __future__ import annotations

import pytest

from nodeplugin.peer import wire


def test_ranges() -> None:
    assert wire.byte_range(None, 10) is None
    assert wire.byte_range("bytes=2-5", 10) == (2, 5)
    assert wire.byte_range("bytes=2-", 10) == (2, 9)
    assert wire.byte_range("bytes=2-99", 10) == (2, 9)
    for bad in ("bytes=-5", "bytes=1-2,4-5", "items=1-2", "bytes=10-", "bytes=5-2"):
        with pytest.raises(wire.RangeError):
            wire.byte_range(bad, 10)


def test_paths_are_quoted() -> None:
    assert wire.file_path("ab", "sub/a b.json") == "/peer/v1/trees/ab/files/sub/a%20b.json"
    assert wire.tree_path("ab") == "/peer/v1/trees/ab"


def test_range_numbers_are_bounded_before_they_are_converted() -> None:
    longest = "9" * wire.MAX_DIGITS
    assert wire.byte_range(f"bytes=0-{longest}", 10) == (0, 9)
    assert wire.byte_range("bytes=" + "0" * 19 + "-", 10) == (0, 9)
    for bad in ("bytes=" + "9" * 5000 + "-", "bytes=0-" + "9" * 5000, "bytes=" + "0" * 20 + "-",
                "bytes=٣-٤", "bytes=1-" + "2" * 20):
        with pytest.raises(wire.RangeError):
            wire.byte_range(bad, 10)
