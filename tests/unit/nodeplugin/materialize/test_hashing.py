"""The resumable hasher agrees with hashlib and git, and survives save/restore."""

from __future__ import annotations

import hashlib
import os

import pytest

from nodeplugin.materialize import hashing
from openapi import manifest


def test_libcrypto_is_available_here() -> None:
    assert hashing.resumable()


@pytest.mark.parametrize("algorithm", ["sha256", "gitsha1"])
def test_matches_hashlib_across_odd_chunks(algorithm: manifest.Algorithm) -> None:
    data = os.urandom(1_000_003)
    hasher = hashing.Hasher(algorithm)
    for start in range(0, len(data), 65_537):
        hasher.update(data[start : start + 65_537])
    reference = hashlib.sha256() if algorithm == "sha256" else hashlib.sha1()
    reference.update(data)
    assert hasher.hexdigest() == reference.hexdigest()


def test_git_blob_sha1_matches_git_hash_object() -> None:
    data = b"Hello, World!"
    entry = manifest.Entry("a.txt", "gitsha1", "0" * 40, len(data))
    hasher = hashing.Hasher.for_entry(entry)
    hasher.update(data)
    assert hasher.hexdigest() == "b45ef6fec89518d314f546fd6c3025367b721684"


@pytest.mark.parametrize("algorithm", ["sha256", "gitsha1"])
def test_save_restore_continues_the_same_digest(algorithm: manifest.Algorithm) -> None:
    data = os.urandom(300_001)
    first = hashing.Hasher(algorithm)
    first.update(data[:123_457])
    state = first.save()
    assert state is not None
    first.update(b"diverge")  # the saved copy must not see later updates
    resumed = hashing.Hasher.restore(algorithm, state)
    resumed.update(data[123_457:])
    whole = hashing.Hasher(algorithm)
    whole.update(data)
    assert resumed.hexdigest() == whole.hexdigest()


def test_hexdigest_does_not_finalize() -> None:
    hasher = hashing.Hasher("sha256")
    hasher.update(b"ab")
    assert hasher.hexdigest() == hashlib.sha256(b"ab").hexdigest()
    hasher.update(b"c")
    assert hasher.hexdigest() == hashlib.sha256(b"abc").hexdigest()


def test_restore_refuses_foreign_state() -> None:
    state = hashing.Hasher("sha256").save()
    assert state is not None
    with pytest.raises(hashing.HashStateError):
        hashing.Hasher.restore("gitsha1", state)
    with pytest.raises(hashing.HashStateError):
        hashing.Hasher.restore("sha256", state[:-1])


def test_restore_refuses_a_state_from_another_libcrypto_version() -> None:
    state = hashing.Hasher("sha256").save()
    assert state is not None
    head, version, raw = state.split(b":", 2)  # b"mmh1sha256", hex version, the struct
    other = b":".join([head, b"%x" % (int(version, 16) + 1), raw])
    with pytest.raises(hashing.HashStateError):
        hashing.Hasher.restore("sha256", other)
