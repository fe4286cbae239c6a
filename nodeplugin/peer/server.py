"""The peer port: a published tree's stored manifest and its files by byte range, to plugins only.

``GET /peer/v1/trees/{hex}`` answers the canonical manifest the publish stored beside the tree
(``.gpustack-manifest``), after checking it still hashes to the digest (``cache.check.stored``,
the rule every use of a tree passes); ``GET /peer/v1/trees/{hex}/files/{path}`` answers one file
named by that manifest, whole (200) or one ``Range`` (206). Only published trees are served, and
not those ``withheld`` (found at start and not checked yet): a quarantined tree is no longer
under ``objects/``, a partial download never is, and a path the manifest does not name is 404,
so nothing outside the tree (no ``..``, no marker, no symlink) can be asked for. At most
``max_streams`` file answers run at once; the others wait their turn. Every request passes
``admission`` first.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable

from starlette import applications, requests, responses, routing

from nodeplugin.cache import check, layout
from nodeplugin.peer import admission, wire
from openapi import grammar

Withheld = Callable[[str], bool]


class Trees:
    """The served trees' manifests, read once per tree (published trees never change)."""

    def __init__(self, cache: layout.Layout, withheld: Withheld) -> None:
        self._cache = cache
        self._withheld = withheld
        self._manifests: dict[str, tuple[bytes, dict[str, int]]] = {}

    def listing(self, digest: str) -> tuple[bytes, dict[str, int]] | None:
        """The stored manifest and its files' sizes, or None (blocking)."""
        if self._withheld(digest) or not self._cache.is_published(digest):
            self._manifests.pop(digest, None)
            return None
        known = self._manifests.get(digest)
        if known is not None:
            return known
        try:
            data, entries = check.stored(self._cache, digest)
        except check.Damaged:
            return None
        known = (data, {e.path: e.size for e in entries})
        self._manifests[digest] = known
        return known


def _digest(hex_digest: str) -> str | None:
    digest = "sha256:" + hex_digest
    return digest if grammar.is_digest(digest) else None


def make_app(
    cache: layout.Layout,
    gate: admission.Admission,
    *,
    withheld: Withheld = lambda digest: False,
    max_streams: int = 8,
) -> applications.Starlette:
    trees = Trees(cache, withheld)
    streams = asyncio.Semaphore(max_streams)
    served = {"bytes": 0}

    async def tree(request: requests.Request) -> responses.Response:
        refused = await gate.refusal(request)
        if refused is not None:
            return refused
        digest = _digest(request.path_params["hex"])
        found = await asyncio.to_thread(trees.listing, digest) if digest else None
        if found is None:
            return admission.status(404, "NotFound", "no published tree with that digest")
        return responses.Response(found[0], media_type="text/plain; charset=utf-8")

    async def file(request: requests.Request) -> responses.Response:
        refused = await gate.refusal(request)
        if refused is not None:
            return refused
        digest = _digest(request.path_params["hex"])
        path = request.path_params["path"]
        found = await asyncio.to_thread(trees.listing, digest) if digest else None
        if digest is None or found is None or path not in found[1]:
            return admission.status(404, "NotFound", "no such file in a published tree")
        size = found[1][path]
        try:
            wanted = wire.byte_range(request.headers.get("range"), size)
        except wire.RangeError as exc:
            return admission.status(416, "RequestedRangeNotSatisfiable", str(exc))
        start, end = wanted if wanted is not None else (0, size - 1)
        full = cache.published_path(digest) / path
        try:
            fd = await asyncio.to_thread(os.open, full, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return admission.status(404, "NotFound", "no such file in a published tree")

        async def body() -> AsyncIterator[bytes]:
            try:
                async with streams:
                    offset = start
                    while offset <= end:
                        chunk = await asyncio.to_thread(
                            os.pread, fd, min(wire.CHUNK_BYTES, end - offset + 1), offset)
                        if not chunk:
                            return
                        offset += len(chunk)
                        served["bytes"] += len(chunk)
                        yield chunk
            finally:
                os.close(fd)

        headers = {"content-length": str(end - start + 1), "accept-ranges": "bytes"}
        if wanted is None:
            return responses.StreamingResponse(body(), 200, headers,
                                               media_type="application/octet-stream")
        headers["content-range"] = f"bytes {start}-{end}/{size}"
        return responses.StreamingResponse(body(), 206, headers,
                                           media_type="application/octet-stream")

    app = applications.Starlette(routes=[
        routing.Route(wire.PREFIX + "{hex}", tree, methods=["GET"]),
        routing.Route(wire.PREFIX + "{hex}/files/{path:path}", file, methods=["GET"]),
    ])
    app.state.served = served
    return app
