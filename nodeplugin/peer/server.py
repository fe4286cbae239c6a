"""The peer port: a published tree's stored manifest and its files by byte range, to plugins only.

``GET /peer/v1/trees/{hex}`` answers the canonical manifest the publish stored beside the tree
(``.gpustack-manifest``), after checking it still hashes to the digest (``cache.check.stored``,
the rule every use of a tree passes); ``GET /peer/v1/trees/{hex}/files/{path}`` answers one file
named by that manifest, whole (200) or one ``Range`` (206). Only published trees are served, and
not those ``withheld`` (found at start and not checked yet): a quarantined tree is no longer
under ``objects/``, a partial download never is, and a path the manifest does not name is 404,
so nothing outside the tree (no ``..``, no marker, no symlink) can be asked for. Every request
passes ``admission`` first, which names the caller (the plugin Pod its token is bound to).

The node's stored files are served by their content identity too, whichever tree links them or
while their tree is still being downloaded (``stored``: ``GET /peer/v1/files/{algorithm}/{hex}``
and ``POST /peer/v1/held``).

A file answer takes a stream slot (``slots.Slots``: ``max_streams`` at once, ``per_peer`` of
them per caller, the rest waiting their turn or refused 429/503 with ``Retry-After``) before the
file is opened and before its status line is sent, and gives it back when the answer ends.
Every send of an answer is bounded by ``send_timeout`` (``answer.Answer``): a caller that stops
reading is cut, and its file and slot freed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable

from starlette import applications, requests, responses, routing

from nodeplugin import reviews
from nodeplugin.cache import check, layout
from nodeplugin.peer import admission, answer, sending, slots, stored, wire
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
    per_peer: int | None = None,
    send_timeout: float = answer.SEND_TIMEOUT_SECONDS,
    wait_seconds: float = slots.WAIT_SECONDS,
) -> applications.Starlette:
    """``per_peer``: None gives half of ``max_streams``."""
    trees = Trees(cache, withheld)
    streams = slots.Slots(max_streams, per_peer=per_peer, wait_seconds=wait_seconds)
    served = {"bytes": 0}

    async def admitted(request: requests.Request
                       ) -> tuple[reviews.Identity, str, tuple[bytes, dict[str, int]]] | (
                           responses.Response):
        found_caller = await gate.admit(request)
        if isinstance(found_caller, responses.Response):
            return found_caller
        digest = _digest(request.path_params["hex"])
        found = await asyncio.to_thread(trees.listing, digest) if digest else None
        if digest is None or found is None:
            return admission.status(404, "NotFound", "no published tree with that digest")
        return found_caller, digest, found

    async def tree(request: requests.Request) -> responses.Response:
        checked = await admitted(request)
        if isinstance(checked, responses.Response):
            return checked
        caller, _, (stored, _) = checked

        async def body() -> AsyncIterator[bytes]:
            yield stored

        return answer.Answer(200, {"content-type": "text/plain; charset=utf-8",
                                   "content-length": str(len(stored))}, body,
                             send_timeout=send_timeout, what=f"manifest for {caller.key}")

    async def file(request: requests.Request) -> responses.Response:
        checked = await admitted(request)
        if isinstance(checked, responses.Response):
            return checked
        caller, digest, (_, sizes) = checked
        path = request.path_params["path"]
        if path not in sizes:
            return admission.status(404, "NotFound", "no such file in a published tree")
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
        return await sending.send(
            sizes[path], request.headers.get("range"),
            lambda: os.open(cache.published_path(digest) / path, flags),
            caller=caller, streams=streams, send_timeout=send_timeout, served=served,
            what=f"{path[:64]} of {digest[:19]}")

    by_identity = stored.Stored(cache, gate, streams, send_timeout=send_timeout, served=served)
    app = applications.Starlette(routes=[
        routing.Route(wire.PREFIX + "{hex}", tree, methods=["GET"]),
        routing.Route(wire.PREFIX + "{hex}/files/{path:path}", file, methods=["GET"]),
        routing.Route(wire.FILES_PREFIX + "{algorithm}/{hex}", by_identity.file,
                      methods=["GET"]),
        routing.Route(wire.HELD_PATH, by_identity.held, methods=["POST"]),
    ])
    app.state.served = served
    app.state.slots = streams
    return app
