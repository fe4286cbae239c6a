"""JSON responses with orjson, a delete's success Status, and Warning headers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from starlette import responses

from apiserver import errors

JSON = "application/json"


def raw_response(body: bytes, status: int = 200,
                 headers: Mapping[str, str] | None = None) -> responses.Response:
    """Already-encoded JSON bytes."""
    return responses.Response(body, status_code=status, headers=headers, media_type=JSON)


def json_bytes(obj: Any) -> bytes:
    return orjson.dumps(obj)


def json_response(obj: Any, status: int = 200,
                  headers: Mapping[str, str] | None = None) -> responses.Response:
    return raw_response(orjson.dumps(obj), status, headers)


def success(details: errors.StatusDetails) -> dict[str, Any]:
    """The ``Status`` a delete returns once the object is gone."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": dict(details)}


def warn(response: responses.Response, messages: Iterable[str]) -> None:
    """One ``Warning: 299 - "<text>"`` header per message, as kube-apiserver sends them."""
    for message in messages:
        escaped = message.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.append("Warning", f'299 - "{escaped}"')
