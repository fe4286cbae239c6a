"""Encode the Swagger 2.0 document in the protobuf form (gnostic ``openapi.v2.Document``).

kubectl up to 1.28 reads ``/openapi/v2`` only as
``application/com.github.proto-openapi.spec.v2@v1.0+protobuf`` (client-side validation, the
server-side validation probe, ``explain``). In a cluster kube-apiserver serves that form of the
merged document; a standalone server talked to directly has to serve it itself.

The encoder is a small table-driven protobuf writer: each message is a map from the JSON key to
its field number and kind. Values of free shape (``default``, ``enum``, ``example`` and every
``x-`` vendor extension) travel as gnostic ``Any`` messages carrying YAML text; JSON is YAML, so
they are written as JSON.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

import orjson

ACCEPT_PREFIX = "application/com.github.proto-openapi.spec.v2"
# the answer is labelled octet-stream, as kube-openapi does: Go's mime parser rejects the "@"
CONTENT_TYPE = "application/octet-stream"

Encoder = Callable[[Any], bytes]


# --- protobuf wire format ------------------------------------------------------------------------
def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 values are sent as their two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _tag(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(payload)) + payload


def _string(number: int, value: Any) -> bytes:
    return _bytes_field(number, str(value).encode())


def _varint_field(number: int, value: int) -> bytes:
    return _tag(number, 0) + _varint(value) if value else b""


def _double(number: int, value: Any) -> bytes:
    return _tag(number, 1) + struct.pack("<d", float(value)) if value else b""


# --- field kinds -------------------------------------------------------------------------------
Field = Callable[[int, Any], bytes]


def _str(number: int, value: Any) -> bytes:
    return _string(number, value) if value != "" else b""


def _strs(number: int, value: Any) -> bytes:
    items = value if isinstance(value, list) else [value]
    return b"".join(_string(number, item) for item in items)


def _bool(number: int, value: Any) -> bytes:
    return _varint_field(number, 1 if value else 0)


def _int(number: int, value: Any) -> bytes:
    return _varint_field(number, int(value))


def _any_message(value: Any) -> bytes:
    return _string(2, orjson.dumps(value).decode())


def _any(number: int, value: Any) -> bytes:
    return _bytes_field(number, _any_message(value))


def _anys(number: int, value: Any) -> bytes:
    return b"".join(_any(number, item) for item in value)


def _message(encode: Encoder) -> Field:
    return lambda number, value: _bytes_field(number, encode(value))


def _messages(encode: Encoder) -> Field:
    return lambda number, value: b"".join(_bytes_field(number, encode(v)) for v in value)


def _named(number: int, name: str, payload: bytes) -> bytes:
    """A gnostic ``Named*`` pair: name = 1, value = 2."""
    return _bytes_field(number, _string(1, name) + _bytes_field(2, payload))


def _map(number: int, value: Mapping[str, Any], encode: Encoder) -> bytes:
    return b"".join(_named(number, name, encode(item)) for name, item in value.items())


def _object(fields: Mapping[str, tuple[int, Field]], extensions: int) -> Encoder:
    """An encoder for a message whose JSON keys map one-to-one onto fields."""

    def encode(value: Mapping[str, Any]) -> bytes:
        out = bytearray()
        for key, item in value.items():
            if key in fields:
                number, kind = fields[key]
                out += kind(number, item)
            elif key.startswith("x-") and extensions:
                out += _named(extensions, key, _any_message(item))
        return bytes(out)

    return encode


# --- messages ----------------------------------------------------------------------------------
def _schema(value: Mapping[str, Any]) -> bytes:
    return _SCHEMA(value)


def _additional_properties(number: int, value: Any) -> bytes:
    if isinstance(value, bool):
        return _bytes_field(number, _bool(2, value) or _tag(2, 0) + b"\x00")
    return _bytes_field(number, _bytes_field(1, _schema(value)))


def _items(number: int, value: Any) -> bytes:
    schemas = value if isinstance(value, list) else [value]
    return _bytes_field(number, b"".join(_bytes_field(1, _schema(s)) for s in schemas))


def _properties(number: int, value: Mapping[str, Any]) -> bytes:
    return _bytes_field(number, _map(1, value, _schema))


_SCHEMA = _object(
    {
        "$ref": (1, _str), "format": (2, _str), "title": (3, _str), "description": (4, _str),
        "default": (5, _any), "multipleOf": (6, _double), "maximum": (7, _double),
        "exclusiveMaximum": (8, _bool), "minimum": (9, _double), "exclusiveMinimum": (10, _bool),
        "maxLength": (11, _int), "minLength": (12, _int), "pattern": (13, _str),
        "maxItems": (14, _int), "minItems": (15, _int), "uniqueItems": (16, _bool),
        "maxProperties": (17, _int), "minProperties": (18, _int), "required": (19, _strs),
        "enum": (20, _anys), "additionalProperties": (21, _additional_properties),
        "type": (22, lambda n, v: _bytes_field(n, _strs(1, v))), "items": (23, _items),
        "allOf": (24, _messages(_schema)), "properties": (25, _properties),
        "discriminator": (26, _str), "readOnly": (27, _bool), "example": (30, _any),
    },
    extensions=31,
)  # fmt: skip

_PRIMITIVE_KEYS = (
    "type", "format", "items", "collectionFormat", "default", "maximum", "exclusiveMaximum",
    "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
    "uniqueItems", "enum", "multipleOf",
)  # fmt: skip
_PRIMITIVE_KINDS: dict[str, Field] = {
    "type": _str, "format": _str, "collectionFormat": _str, "default": _any,
    "maximum": _double, "exclusiveMaximum": _bool, "minimum": _double, "exclusiveMinimum": _bool,
    "maxLength": _int, "minLength": _int, "pattern": _str, "maxItems": _int, "minItems": _int,
    "uniqueItems": _bool, "enum": _anys, "multipleOf": _double,
}  # fmt: skip


def _primitive_fields(first: int) -> dict[str, tuple[int, Field]]:
    """The run of primitive-type fields that every parameter layout repeats from ``first``."""
    fields: dict[str, tuple[int, Field]] = {}
    for offset, key in enumerate(_PRIMITIVE_KEYS):
        kind = _message(_primitive_items) if key == "items" else _PRIMITIVE_KINDS[key]
        fields[key] = (first + offset, kind)
    return fields


def _primitive_items(value: Mapping[str, Any]) -> bytes:
    return _PRIMITIVE_ITEMS(value)


_PRIMITIVE_ITEMS = _object(_primitive_fields(1), extensions=18)
_HEAD = {"required": (1, _bool), "in": (2, _str), "description": (3, _str), "name": (4, _str)}
# query and formData parameters have allowEmptyValue at 5; path and header ones do not
_QUERY_LIKE = _object({**_HEAD, "allowEmptyValue": (5, _bool), **_primitive_fields(6)}, 23)
_PATH_LIKE = _object({**_HEAD, **_primitive_fields(5)}, 22)
_NON_BODY = {"header": (1, _PATH_LIKE), "formData": (2, _QUERY_LIKE), "query": (3, _QUERY_LIKE),
             "path": (4, _PATH_LIKE)}  # fmt: skip
_BODY = _object(
    {"description": (1, _str), "name": (2, _str), "in": (3, _str), "required": (4, _bool),
     "schema": (5, _message(_schema))},
    extensions=6,
)  # fmt: skip


def _parameter(value: Mapping[str, Any]) -> bytes:
    if value.get("in") == "body":
        return _bytes_field(1, _BODY(value))
    number, encode = _NON_BODY[value["in"]]
    return _bytes_field(2, _bytes_field(number, encode(value)))


def _parameters_item(value: Mapping[str, Any]) -> bytes:
    if "$ref" in value:
        return _bytes_field(2, _str(1, value["$ref"]) + _str(2, value.get("description", "")))
    return _bytes_field(1, _parameter(value))


def _schema_item(number: int, value: Mapping[str, Any]) -> bytes:
    return _bytes_field(number, _bytes_field(1, _schema(value)))


_RESPONSE = _object({"description": (1, _str), "schema": (2, _schema_item)}, extensions=5)


def _response_value(value: Mapping[str, Any]) -> bytes:
    if "$ref" in value:
        return _bytes_field(2, _str(1, value["$ref"]))
    return _bytes_field(1, _RESPONSE(value))


def _responses(value: Mapping[str, Any]) -> bytes:
    codes = {k: v for k, v in value.items() if not k.startswith("x-")}
    extensions = {k: v for k, v in value.items() if k.startswith("x-")}
    return _map(1, codes, _response_value) + _map(2, extensions, _any_message)


def _security_requirement(value: Mapping[str, Any]) -> bytes:
    return _map(1, value, lambda scopes: _strs(1, scopes))


_OPERATION = _object(
    {
        "tags": (1, _strs), "summary": (2, _str), "description": (3, _str),
        "operationId": (5, _str), "produces": (6, _strs), "consumes": (7, _strs),
        "parameters": (8, _messages(_parameters_item)), "responses": (9, _message(_responses)),
        "schemes": (10, _strs), "deprecated": (11, _bool),
        "security": (12, _messages(_security_requirement)),
    },
    extensions=13,
)  # fmt: skip
_PATH_ITEM = _object(
    {
        "$ref": (1, _str), "get": (2, _message(_OPERATION)), "put": (3, _message(_OPERATION)),
        "post": (4, _message(_OPERATION)), "delete": (5, _message(_OPERATION)),
        "options": (6, _message(_OPERATION)), "head": (7, _message(_OPERATION)),
        "patch": (8, _message(_OPERATION)), "parameters": (9, _messages(_parameters_item)),
    },
    extensions=10,
)  # fmt: skip
_INFO = _object({"title": (1, _str), "version": (2, _str), "description": (3, _str),
                 "termsOfService": (4, _str)}, extensions=7)  # fmt: skip
_API_KEY = _object({"type": (1, _str), "name": (2, _str), "in": (3, _str),
                    "description": (4, _str)}, extensions=5)  # fmt: skip
_BASIC = _object({"type": (1, _str), "description": (2, _str)}, extensions=3)


def _security_definition(value: Mapping[str, Any]) -> bytes:
    if value.get("type") == "basic":
        return _bytes_field(1, _BASIC(value))
    if value.get("type") == "apiKey":
        return _bytes_field(2, _API_KEY(value))
    raise ValueError(f"security scheme {value.get('type')!r} has no protobuf encoding here")


def _paths(value: Mapping[str, Any]) -> bytes:
    extensions = {k: v for k, v in value.items() if k.startswith("x-")}
    paths = {k: v for k, v in value.items() if not k.startswith("x-")}
    return _map(1, extensions, _any_message) + _map(2, paths, _PATH_ITEM)


_DOCUMENT = _object(
    {
        "swagger": (1, _str), "info": (2, _message(_INFO)), "host": (3, _str),
        "basePath": (4, _str), "schemes": (5, _strs), "consumes": (6, _strs),
        "produces": (7, _strs), "paths": (8, _message(_paths)),
        "definitions": (9, lambda n, v: _bytes_field(n, _map(1, v, _schema))),
        "parameters": (10, lambda n, v: _bytes_field(n, _map(1, v, _parameter))),
        "responses": (11, lambda n, v: _bytes_field(n, _map(1, v, _RESPONSE))),
        "security": (12, _messages(_security_requirement)),
        "securityDefinitions": (13, lambda n, v: _bytes_field(n, _map(1, v, _security_definition))),
    },
    extensions=16,
)  # fmt: skip


def encode(document: Mapping[str, Any]) -> bytes:
    """The Swagger 2.0 ``document`` (JSON shape) as a serialized ``openapi.v2.Document``."""
    return _DOCUMENT(document)
