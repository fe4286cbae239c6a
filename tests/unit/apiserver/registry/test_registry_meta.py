"""Names, generated names and metadata checks, plus the storage codec's resourceVersion splice."""

from __future__ import annotations

import orjson
import pytest

from apiserver.registry import codec, meta
from apiserver.storage import interface


@pytest.mark.parametrize("name", ["a", "a.b-c", "x" * 253, "0abc"])
def test_valid_names(name: str) -> None:
    assert meta.validate_name(name) == []


@pytest.mark.parametrize("name", ["A", "-a", "a-", "a_b", ".", "..", "a/b", "a%b", "x" * 254])
def test_invalid_names(name: str) -> None:
    [problem] = meta.validate_name(name)[:1]
    assert problem.field == "metadata.name"


def test_generated_names_use_the_upstream_alphabet() -> None:
    name = meta.generate_name("web-")
    assert name.startswith("web-") and len(name) == 9
    assert set(name[4:]) <= set(meta.NAME_ALPHABET)


def test_label_annotation_and_finalizer_checks() -> None:
    assert meta.validate({"labels": {"a.io/b": "c"}, "finalizers": ["x.io/y"]}) == []
    fields = {p.field for p in meta.validate({"labels": {"bad key": "v", "k": "bad value"},
                                              "finalizers": ["ok", "no/pe/x"]})}
    assert fields == {"metadata.labels", "metadata.labels[k]", "metadata.finalizers[1]"}


def test_codec_splices_the_revision_without_decoding() -> None:
    stored = codec.encode({"spec": {"metadata": {"a": 1}}, "kind": "K", "apiVersion": "g/v",
                           "metadata": {"name": "n", "resourceVersion": "9"}})
    assert stored.startswith(b'{"apiVersion":"g/v","kind":"K","metadata":{"name":"n"}')
    record = interface.Record("/k/n", stored, 12, 3)
    raw = orjson.loads(codec.raw(record))
    assert raw == codec.decode(record)
    assert raw["metadata"] == {"resourceVersion": "12", "name": "n"}
    assert raw["spec"] == {"metadata": {"a": 1}}
    with pytest.raises(ValueError):
        codec.encode({"metadata": {}})
