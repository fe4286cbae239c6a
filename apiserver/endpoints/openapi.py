"""OpenAPI serving: ``/openapi/v2`` and ``/openapi/v3`` (index plus the group-version document).

The documents come from ``openapi.documents`` and are encoded once. Every document carries an
ETag and answers a matching ``If-None-Match`` with 304. ``/openapi/v2`` is JSON, or the gnostic
protobuf form when ``Accept`` prefers it (kubectl up to 1.28 asks for nothing else). The v3 index
points at the group-version document with ``?hash=<etag>``; a request carrying a stale hash is
redirected (301) to the current one and a matching hash is marked ``Cache-Control: public,
immutable``, as kube-openapi's handler3 does, so the aggregator and kubectl cache it safely.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from apiserver.endpoints import swagger_protobuf
from apiserver.request import info as infos
from openapi import documents, resources

V3_GROUP_PATH = f"apis/{resources.GROUP_VERSION}"
V3_URL = f"/openapi/v3/{V3_GROUP_PATH}"


def document_hash(body: bytes) -> str:
    """Upper-case hex SHA-512, the format kube-openapi uses for v3 hashes and ETags."""
    return hashlib.sha512(body).hexdigest().upper()


def wants_protobuf(accept: str) -> bool:
    """True when the protobuf form comes before any JSON alternative in ``Accept``."""
    for part in accept.split(","):
        media = part.split(";")[0].strip().lower()
        if media.startswith(swagger_protobuf.ACCEPT_PREFIX):
            return True
        if media in ("application/json", "application/*", "*/*"):
            return False
    return False


def etag_matches(if_none_match: str, tag: str) -> bool:
    return any(c.strip().removeprefix("W/") in ("*", tag) for c in if_none_match.split(","))


class Documents:
    """Encoded OpenAPI documents and their hashes."""

    def __init__(self, v2: dict[str, Any], v3: dict[str, Any]) -> None:
        self.v2 = orjson.dumps(v2)
        self.v2_etag = f'"{document_hash(self.v2)}"'
        self.v2_protobuf = swagger_protobuf.encode(v2)
        self.v2_protobuf_etag = f'"{document_hash(self.v2_protobuf)}"'
        self.v3 = orjson.dumps(v3)
        self.v3_hash = document_hash(self.v3)
        self.v3_etag = f'"{self.v3_hash}"'
        index = {"paths": {V3_GROUP_PATH: {"serverRelativeURL": f"{V3_URL}?hash={self.v3_hash}"}}}
        self.v3_index = orjson.dumps(index)
        self.v3_index_etag = f'"{document_hash(self.v3_index)}"'

    @classmethod
    def build(cls) -> Documents:
        return cls(documents.openapi_v2(), documents.openapi_v3())

    async def serve_v2(self, request: Request) -> Response:
        vary = {"Vary": "Accept"}
        if wants_protobuf(request.headers.get("accept", "")):
            return _cached(request, self.v2_protobuf, self.v2_protobuf_etag, vary,
                           media_type=swagger_protobuf.CONTENT_TYPE)  # fmt: skip
        return _cached(request, self.v2, self.v2_etag, vary)

    async def serve_v3_index(self, request: Request) -> Response:
        return _cached(request, self.v3_index, self.v3_index_etag)

    async def serve_v3_group(self, request: Request) -> Response:
        query = infos.served(request.scope).query
        wanted = query.get("hash") if query.has("hash") else None
        if wanted is not None and wanted != self.v3_hash:
            return RedirectResponse(f"{V3_URL}?hash={self.v3_hash}", status_code=301)
        extra = {"Cache-Control": "public, immutable"} if wanted is not None else {}
        return _cached(request, self.v3, self.v3_etag, extra)

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/openapi/v2", self.serve_v2, methods=["GET"]),
            Route("/openapi/v3", self.serve_v3_index, methods=["GET"]),
            Route(V3_URL, self.serve_v3_group, methods=["GET"]),
        ]


def routes() -> list[BaseRoute]:
    return Documents.build().routes()


def _cached(
    request: Request,
    body: bytes,
    tag: str,
    extra: dict[str, str] | None = None,
    *,
    media_type: str = "application/json",
) -> Response:
    headers = {"ETag": tag, **(extra or {})}
    if etag_matches(request.headers.get("if-none-match", ""), tag):
        return Response(status_code=304, headers=headers)
    return Response(body, headers=headers, media_type=media_type)
