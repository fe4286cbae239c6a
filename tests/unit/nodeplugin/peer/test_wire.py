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


SHA = ("sha256", "ab" * 32)
GIT = ("gitsha1", "cd" * 20)


def test_held_requests_round_trip_and_bad_bodies_are_refused() -> None:
    body = wire.held_request([SHA, GIT])
    assert body == f"sha256/{'ab' * 32}\ngitsha1/{'cd' * 20}\n".encode()
    assert wire.parse_held_request(body) == [SHA, GIT]
    assert wire.stored_file_path(*SHA) == f"/peer/v1/files/sha256/{'ab' * 32}"
    for bad, rule in ((b"sha256/" + b"AB" * 32, "line 1"), (b"md5/" + b"ab" * 16, "line 1"),
                      (b"gitsha1/" + b"ab" * 32, "line 1"), (b"\xff", "ASCII"),
                      (body + b"../etc/passwd\n", "line 3"),
                      (wire.held_request([SHA] * (wire.MAX_HELD + 1)), "at most")):
        with pytest.raises(wire.HeldError, match=rule):
            wire.parse_held_request(bad)


def test_a_held_answer_says_only_what_was_asked() -> None:
    answer = (f"sha256/{'ab' * 32} stored\n"
              f"gitsha1/{'cd' * 20} fetching 4096\n"
              f"sha256/{'ef' * 32} stored\n"            # not asked: ignored
              f"gitsha1/{'cd' * 20} fetching {'9' * 40}\n"  # an unbounded number: ignored
              "garbage\n").encode()
    assert wire.parse_held_answer(answer, {SHA, GIT}) == {SHA: None, GIT: 4096}
