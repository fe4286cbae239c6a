"""hub.gitrefs: reading a smart-HTTP ref advertisement and resolving a name as git does."""

from __future__ import annotations

import pytest

from hub import errors, gitrefs

A, B, C = "a" * 40, "b" * 40, "c" * 40


def _pkt(data: bytes) -> bytes:
    return b"%04x" % (len(data) + 4) + data


def test_parse_reads_refs_peeled_tags_and_skips_capabilities() -> None:
    body = (_pkt(b"# service=git-upload-pack\n") + b"0000"
            + _pkt(f"{A} HEAD\0multi_ack side-band-64k\n".encode())
            + _pkt(f"{A} refs/heads/main\n".encode())
            + _pkt(f"{B} refs/tags/v1\n".encode())
            + _pkt(f"{C} refs/tags/v1^{{}}\n".encode()) + b"0000")
    refs = gitrefs.parse(body, "repo")
    assert refs == {"HEAD": A, "refs/heads/main": A, "refs/tags/v1": B, "refs/tags/v1^{}": C}
    assert gitrefs.commit_for(refs, "v1") == C  # peeled
    assert gitrefs.commit_for(refs, "main") == A
    assert gitrefs.commit_for(refs, "refs/heads/main") == A
    assert gitrefs.commit_for(refs, "nope") is None


def test_tags_win_over_branches_like_git() -> None:
    refs = {"refs/heads/v2": A, "refs/tags/v2": B}
    assert gitrefs.commit_for(refs, "v2") == B


def test_an_empty_repository_has_no_refs() -> None:
    body = (_pkt(b"# service=git-upload-pack\n") + b"0000"
            + _pkt(b"0" * 40 + b" capabilities^{}\0side-band\n") + b"0000")
    assert gitrefs.parse(body, "repo") == {}


@pytest.mark.parametrize("body", [b"zzzz", b"0009abc", _pkt(b"not a ref line\n"),
                                  _pkt(b"# service=git-receive-pack\n")])
def test_malformed_advertisements_are_source_unavailable(body: bytes) -> None:
    with pytest.raises(errors.HubError) as caught:
        gitrefs.parse(body, "org/model")
    assert caught.value.reason == "SourceUnavailable"
    assert "org/model" in caught.value.message
