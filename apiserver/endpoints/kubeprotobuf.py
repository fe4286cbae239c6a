"""Read the few built-in objects clients send as protobuf (``application/vnd.kubernetes.protobuf``).

client-go sends built-in kinds as protobuf: kubectl's SelfSubjectAccessReview,
SelfSubjectRulesReview and SelfSubjectReview arrive so. The body is kube's envelope: the magic
``k8s\\0`` and a ``runtime.Unknown`` (typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2) whose
``raw`` is the object itself. This module reads that envelope and the fields the self reviews
use (field numbers of k8s.io/api's generated.proto, checked against what kubectl sends), into
the JSON shape the handlers read; answers go back as JSON, which client-go accepts (its Accept
lists ``application/json``). A body that is not such a message is a 400; nothing here grows
with more than the bounded body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Union

from apiserver import errors

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
MAX_DEPTH = 8

Schema = Mapping[int, tuple[str, Union["Schema", None]]]
"""Field number -> (JSON name, the nested message's schema, or None for a string)."""

RESOURCE_ATTRIBUTES: Schema = {
    1: ("namespace", None), 2: ("verb", None), 3: ("group", None), 4: ("version", None),
    5: ("resource", None), 6: ("subresource", None), 7: ("name", None),
}
NON_RESOURCE_ATTRIBUTES: Schema = {1: ("path", None), 2: ("verb", None)}
SCHEMAS: Mapping[str, Schema] = {
    "SelfSubjectAccessReview": {2: ("spec", {
        1: ("resourceAttributes", RESOURCE_ATTRIBUTES),
        2: ("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES),
    })},
    "SelfSubjectRulesReview": {2: ("spec", {1: ("namespace", None)})},
    "SelfSubjectReview": {},
}
_TYPE_META: Schema = {1: ("apiVersion", None), 2: ("kind", None)}


def _bad(why: str) -> errors.BadRequest:
    return errors.BadRequest(f"the protobuf body could not be decoded: {why}")


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise _bad("a truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> list[tuple[int, bytes | None]]:
    """(field number, payload) of each field; None for the non-bytes wire types, skipped."""
    found: list[tuple[int, bytes | None]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, at = _varint(data, at)
            found.append((number, None))
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise _bad("a field runs past the end")
            found.append((number, data[at:at + size]))
            at += size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
            if at > len(data):
                raise _bad("a truncated fixed-size field")
            found.append((number, None))
        else:
            raise _bad(f"wire type {wire} is not supported")
    return found


def _message(data: bytes, schema: Schema, depth: int = 0) -> dict[str, Any]:
    if depth > MAX_DEPTH:
        raise _bad("nested too deeply")
    out: dict[str, Any] = {}
    for number, payload in _fields(data):
        entry = schema.get(number)
        if entry is None or payload is None:
            continue  # a field the self reviews do not read (metadata, status, selectors)
        name, nested = entry
        if nested is None:
            try:
                out[name] = payload.decode("utf-8")
            except UnicodeDecodeError:
                raise _bad(f"{name} is not UTF-8") from None
        else:
            out[name] = _message(payload, nested, depth + 1)
    return out


def decode(body: bytes) -> dict[str, Any]:
    """The object of a protobuf body, as JSON would carry it (apiVersion, kind, spec...)."""
    if not body.startswith(MAGIC):
        raise _bad("it does not start with kube's protobuf magic")
    envelope = _fields(body[len(MAGIC):])
    meta = next((p for n, p in envelope if n == 1 and p is not None), b"")
    raw = next((p for n, p in envelope if n == 2 and p is not None), b"")
    document = _message(meta, _TYPE_META)
    schema = SCHEMAS.get(str(document.get("kind", "")))
    if schema is None:
        raise errors.UnsupportedMediaType(
            f"{MEDIA_TYPE} is accepted only for the self reviews, not for"
            f" {str(document.get('kind', ''))[:64]!r}")
    document.update(_message(raw, schema))
    return document
