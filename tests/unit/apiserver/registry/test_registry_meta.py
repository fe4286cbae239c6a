"""Generated names, and the storage codec's resourceVersion splice (ObjectMeta rules are tested in
tests/unit/openapi/test_objectmeta.py)."""

from __future__ import annotations

import orjson
import pytest

from apiserver.registry import codec, meta
from apiserver.storage import interface


def test_generated_names_use_the_upstream_alphabet() -> None:
    name = meta.generate_name("web-")
    assert name.startswith("web-") and len(name) == 9
    assert set(name[4:]) <= set(meta.NAME_ALPHABET)


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
