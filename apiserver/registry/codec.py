"""Stored bytes and API objects: the resourceVersion lives in the revision, never in the bytes.

``encode`` always writes ``apiVersion``, ``kind`` and a non-empty ``metadata`` first, which lets
``raw`` splice the resourceVersion into the stored JSON without decoding it: GET, LIST and watch
serve plain JSON by copying bytes.
"""

from __future__ import annotations

from typing import Any

import orjson

from apiserver.storage import interface

_METADATA = b'"metadata":{'


def encode(obj: dict[str, Any]) -> bytes:
    """The storage form of ``obj``: no resourceVersion, head keys first."""
    metadata = dict(obj.get("metadata") or {})
    metadata.pop("resourceVersion", None)
    if not metadata.get("name"):
        raise ValueError("a stored object needs metadata.name")
    ordered: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": metadata,
    }
    for key, value in obj.items():
        if key not in ordered:
            ordered[key] = value
    return orjson.dumps(ordered)


def raw(record: interface.Record) -> bytes:
    """The object's JSON with ``metadata.resourceVersion`` set to the record's revision."""
    return record.value.replace(
        _METADATA, b'"metadata":{"resourceVersion":"%d",' % record.revision, 1
    )


def decode(record: interface.Record) -> dict[str, Any]:
    obj: dict[str, Any] = orjson.loads(record.value)
    obj["metadata"]["resourceVersion"] = str(record.revision)
    return obj


def labels(record: interface.Record) -> dict[str, str]:
    obj = orjson.loads(record.value)
    found: dict[str, str] = obj["metadata"].get("labels") or {}
    return found
