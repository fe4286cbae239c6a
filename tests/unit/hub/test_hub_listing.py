"""hub.listing: patterns, path checks and the canonical digest."""

from __future__ import annotations

import pytest

from hub import errors, files, listing
from openapi import manifest

A = files.RemoteFile("config.json", 10, "gitsha1", "1" * 40, False)
B = files.RemoteFile("model.safetensors", 100, "sha256", "2" * 64, True)
C = files.RemoteFile("onnx/model.onnx", 50, "sha256", "3" * 64, True)


class StubSource:
    def __init__(self, listed: list[files.RemoteFile]) -> None:
        self.listed = listed
        self.tokens: list[str | None] = []

    async def list_files(
        self, repo: str, commit: str, *, token: str | None
    ) -> list[files.RemoteFile]:
        self.tokens.append(token)
        return self.listed


async def test_manifest_for_filters_and_digests() -> None:
    stub = StubSource([C, B, A])
    kept, entries, digest = await listing.manifest_for(
        stub, "org/model", "c" * 40, [], ["onnx/"], token="t"  # type: ignore[arg-type]
    )
    assert kept == [A, B]
    assert entries == [files.to_entry(A), files.to_entry(B)]
    assert digest == manifest.digest(entries)
    assert stub.tokens == ["t"]


def test_the_digest_does_not_depend_on_listing_order() -> None:
    assert listing.build([A, B, C], [], [])[2] == listing.build([C, A, B], [], [])[2]


@pytest.mark.parametrize("path", ["../etc/passwd", "/abs", "a//b", "a/./b", "bad\nname"])
def test_an_unusable_path_fails_the_whole_listing(path: str) -> None:
    bad = files.RemoteFile(path, 1, "sha256", "4" * 64, True)
    with pytest.raises(errors.HubError) as caught:
        listing.build([A, bad], ["config.json"], [])
    assert caught.value.reason == "InvalidRequest"
