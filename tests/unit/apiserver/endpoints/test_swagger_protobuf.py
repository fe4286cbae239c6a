"""The protobuf form of OpenAPI v2, read back with a minimal wire-format decoder."""

from __future__ import annotations

import struct
from typing import Any

import httpx
import orjson
from starlette.applications import Starlette

from apiserver.endpoints import openapi, swagger_protobuf
from openapi import documents

Fields = dict[int, list[Any]]


def decode(data: bytes) -> Fields:
    """Field number -> raw values (ints for varints, floats for fixed64, bytes otherwise)."""
    fields: Fields = {}
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return result

    while pos < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value = varint()
        elif wire == 1:
            value = struct.unpack("<d", data[pos : pos + 8])[0]
            pos += 8
        elif wire == 2:
            size = varint()
            value = data[pos : pos + size]
            pos += size
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        fields.setdefault(number, []).append(value)
    return fields


def named(fields: Fields, number: int) -> dict[str, Fields]:
    """A repeated gnostic Named* field as name -> decoded value."""
    pairs = (decode(raw) for raw in fields.get(number, []))
    return {pair[1][0].decode(): decode(pair[2][0]) for pair in pairs}


SAMPLE: dict[str, Any] = {
    "swagger": "2.0",
    "info": {"title": "t", "version": "v1"},
    "paths": {
        "/things/{name}": {
            "parameters": [{"name": "name", "in": "path", "required": True, "type": "string"}],
            "patch": {
                "consumes": ["application/merge-patch+json"],
                "parameters": [
                    {"name": "body", "in": "body", "required": True, "schema": {"type": "object"}},
                    {"name": "fieldValidation", "in": "query", "type": "string"},
                ],
                "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/T"}}},
                "x-kubernetes-group-version-kind": {"group": "g", "version": "v1", "kind": "T"},
            },
        }
    },
    "definitions": {
        "T": {
            "type": "object",
            "required": ["spec"],
            "properties": {
                "spec": {"type": "string", "maxLength": 10, "enum": ["a", "b"], "minimum": -1},
                "tags": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "open": {"type": "object", "additionalProperties": False},
            },
            "x-kubernetes-group-version-kind": [{"group": "g", "version": "v1", "kind": "T"}],
        }
    },
    "securityDefinitions": {
        "BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}
    },
    "security": [{"BearerToken": []}],
}


def test_document_fields() -> None:
    doc = decode(swagger_protobuf.encode(SAMPLE))
    assert doc[1] == [b"2.0"]
    info = decode(doc[2][0])
    assert (info[1], info[2]) == ([b"t"], [b"v1"])
    paths = named(decode(doc[8][0]), 2)
    item = paths["/things/{name}"]
    path_param = decode(decode(decode(item[9][0])[1][0])[2][0])  # ParametersItem>Parameter>NonBody
    path_schema = decode(path_param[4][0])  # PathParameterSubSchema
    assert (path_schema[1], path_schema[2], path_schema[4], path_schema[5]) == (
        [1], [b"path"], [b"name"], [b"string"]
    )
    patch = decode(item[8][0])
    assert patch[7] == [b"application/merge-patch+json"]
    body, query = (decode(decode(raw)[1][0]) for raw in patch[8])
    assert decode(body[1][0])[2] == [b"body"]  # BodyParameter.name
    query_schema = decode(decode(query[2][0])[3][0])  # NonBody > QueryParameterSubSchema
    assert (query_schema[4], query_schema[6]) == ([b"fieldValidation"], [b"string"])
    gvk = named(patch, 13)["x-kubernetes-group-version-kind"]
    assert orjson.loads(gvk[2][0]) == {"group": "g", "version": "v1", "kind": "T"}
    ok = named(decode(patch[9][0]), 1)["200"]
    response = decode(ok[1][0])
    assert response[1] == [b"OK"]
    assert decode(decode(response[2][0])[1][0])[1] == [b"#/definitions/T"]


def test_schema_fields() -> None:
    doc = decode(swagger_protobuf.encode(SAMPLE))
    definition = named(decode(doc[9][0]), 1)["T"]
    assert decode(definition[22][0])[1] == [b"object"]
    assert definition[19] == [b"spec"]
    props = named(decode(definition[25][0]), 1)
    spec = props["spec"]
    assert spec[11] == [10]
    assert [orjson.loads(decode(raw)[2][0]) for raw in spec[20]] == ["a", "b"]
    assert spec[9] == [-1.0]
    items = decode(props["tags"][23][0])
    assert decode(decode(items[1][0])[22][0])[1] == [b"string"]
    additional = decode(props["labels"][21][0])
    assert decode(decode(additional[1][0])[22][0])[1] == [b"string"]
    assert decode(props["open"][21][0]) == {2: [0]}  # false is still present (a oneof)
    gvk = named(definition, 31)["x-kubernetes-group-version-kind"]
    assert orjson.loads(gvk[2][0]) == [{"group": "g", "version": "v1", "kind": "T"}]
    security = named(decode(doc[13][0]), 1)["BearerToken"]
    assert decode(security[2][0])[2] == [b"authorization"]


def test_real_document_encodes() -> None:
    encoded = swagger_protobuf.encode(documents.openapi_v2())
    doc = decode(encoded)
    paths = named(decode(doc[8][0]), 2)
    assert "/apis/worker.gpustack.ai/v1/namespaces/{namespace}/modelartifacts/{name}" in paths


async def test_served_by_accept() -> None:
    docs = openapi.Documents({"swagger": "2.0", "info": {"title": "t", "version": "v1"}},
                             {"openapi": "3.0.0"})  # fmt: skip
    application = Starlette(routes=docs.routes())
    transport = httpx.ASGITransport(application)
    async with httpx.AsyncClient(transport=transport, base_url="https://t") as client:
        proto = await client.get(
            "/openapi/v2",
            headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"},
        )
        json = await client.get("/openapi/v2", headers={"Accept": "application/json"})
        cached = await client.get(
            "/openapi/v2",
            headers={"Accept": "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
                     "If-None-Match": proto.headers["etag"]},
        )  # fmt: skip
    assert proto.headers["content-type"] == "application/octet-stream"
    assert decode(proto.content)[1] == [b"2.0"]
    assert json.headers["content-type"] == "application/json"
    assert proto.headers["etag"] != json.headers["etag"]
    assert proto.headers["vary"] == "Accept"
    assert cached.status_code == 304


def test_wants_protobuf() -> None:
    pb = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
    assert openapi.wants_protobuf(pb)
    assert openapi.wants_protobuf(f"{pb}, application/json")
    assert not openapi.wants_protobuf(f"application/json, {pb}")
    assert not openapi.wants_protobuf("")
    assert not openapi.wants_protobuf("*/*")
