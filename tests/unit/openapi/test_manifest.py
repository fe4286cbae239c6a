"""The manifest digest against a vector computed outside Python.

The expected values were produced with coreutils and git over the same bytes:
``git hash-object --stdin`` for the small file, ``sha256sum`` for the large one and for the
manifest text itself.
"""

import hashlib

import pytest

from openapi import manifest

CONFIG = b'{"a":1}\n'
WEIGHTS = b"x" * 1000
CONFIG_GITSHA1 = "0187f3b09d66cef7911083ad49f890f5a6589589"
WEIGHTS_SHA256 = "44f8354494a5ba03ba1792a8d3e9c534c47a9181980fde7a3f44b06ef2ae7c7f"
VECTOR_DIGEST = "sha256:d4dfb687b5582f6b3596c9f6cb15502ecf07d1d78cf016e87e77eb4e5b13b736"

ENTRIES = [
    manifest.Entry("model.safetensors", "sha256", WEIGHTS_SHA256, len(WEIGHTS)),
    manifest.Entry("config.json", "gitsha1", CONFIG_GITSHA1, len(CONFIG)),
]


def test_digest_matches_the_independent_vector() -> None:
    assert manifest.digest(ENTRIES) == VECTOR_DIGEST


def test_entries_are_sorted_by_utf8_bytes() -> None:
    text = manifest.canonical_bytes(ENTRIES)
    assert text.splitlines()[1].endswith(b"config.json")
    assert text.endswith(b"\n")


def test_git_blob_prefix_reproduces_git() -> None:
    h = hashlib.sha1(manifest.git_blob_sha1_prefix(len(CONFIG)) + CONFIG)
    assert h.hexdigest() == CONFIG_GITSHA1


def test_parse_round_trips() -> None:
    text = manifest.canonical_bytes(ENTRIES)
    assert manifest.canonical_bytes(manifest.parse(text)) == text


@pytest.mark.parametrize(
    "path", ["", "/abs", "a//b", "a/./b", "../x", "a/..", "tab\there", "del\x7f"]
)
def test_bad_paths_are_refused(path: str) -> None:
    with pytest.raises(manifest.ManifestError):
        manifest.check_path(path)


def test_duplicate_paths_are_refused() -> None:
    with pytest.raises(manifest.ManifestError):
        manifest.canonical_bytes([ENTRIES[0], ENTRIES[0]])


def test_parse_refuses_unsorted_text() -> None:
    lines = manifest.canonical_bytes(ENTRIES).splitlines(keepends=True)
    swapped = lines[0] + lines[2] + lines[1]
    with pytest.raises(manifest.ManifestError):
        manifest.parse(swapped)
