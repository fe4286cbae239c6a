"""The node's stored files by content identity, to other plugins (node-to-node sync by file).

``GET /peer/v1/files/{algorithm}/{hex}`` answers the stored file of that identity
(``cache.files``: ``files/<algorithm>/<hex>``), whole or one ``Range``, whichever published tree
links it, and also while its own tree is still being downloaded: a downloading node stores each
file as soon as it verifies, so it serves its finished files at once. A file it is still
fetching from a hub is served too, by range, as its bytes arrive (``growing``). A file the scrub
condemned or collection swept is no longer under its name (404); one opened before keeps its bytes.

``POST /peer/v1/held`` takes up to ``wire.MAX_HELD`` identities, one ``<algorithm>/<hex>`` a
line, and answers the ones this node has, a line each: ``<algorithm>/<hex> stored``, or
``<algorithm>/<hex> fetching <bytes so far>`` for a file an attempt of this node is fetching from
a hub now (``cache.inflight``). Pullers use it to find a file's holders and to leave a file to
the node already fetching it (``materialize/swarm.py``). Nothing here is trusted by the puller
beyond where to ask: every byte is hashed against the puller's own manifest.

Both pass ``admission`` first; file answers take stream slots as the tree routes do.
"""

from __future__ import annotations

import asyncio
import os
import stat

from starlette import requests, responses

from nodeplugin.cache import files, inflight, layout
from nodeplugin.peer import admission, growing, sending, slots, wire


class Stored:
    def __init__(self, cache: layout.Layout, gate: admission.Admission, streams: slots.Slots, *,
                 send_timeout: float, served: dict[str, int]) -> None:
        self._store = files.of(cache)
        self._inflight = inflight.of(cache)
        self._gate = gate
        self._streams = streams
        self._send_timeout = send_timeout
        self._served = served

    async def file(self, request: requests.Request) -> responses.Response:
        caller = await self._gate.admit(request)
        if isinstance(caller, responses.Response):
            return caller
        ident = wire.identity(f"{request.path_params['algorithm']}/{request.path_params['hex']}")
        if ident is None:
            return admission.status(404, "NotFound", "no stored file of that identity")
        path = self._store.path(ident)
        try:
            info = await asyncio.to_thread(os.lstat, path)
        except OSError:
            info = None
        if info is None or not stat.S_ISREG(info.st_mode) or info.st_size == 0:
            fetching = self._inflight.fetching(ident)
            if fetching is None:
                return admission.status(404, "NotFound", "no stored file of that identity")
            return await growing.send(
                ident, fetching, request.headers.get("range"), registry=self._inflight,
                store=self._store, caller=caller, streams=self._streams,
                send_timeout=self._send_timeout, served=self._served,
                what=f"fetching {ident[0]}/{ident[1][:16]}")
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
        return await sending.send(
            info.st_size, request.headers.get("range"), lambda: os.open(path, flags),
            caller=caller, streams=self._streams, send_timeout=self._send_timeout,
            served=self._served, what=f"stored {ident[0]}/{ident[1][:16]}")

    async def held(self, request: requests.Request) -> responses.Response:
        caller = await self._gate.admit(request)
        if isinstance(caller, responses.Response):
            return caller
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > wire.MAX_HELD_BODY:
                break
        try:
            asked = wire.parse_held_request(bytes(body))
        except wire.HeldError as exc:
            return admission.status(400, "BadRequest", f"body: {exc}")
        lines = await asyncio.to_thread(self._answer, asked)
        return responses.Response("".join(lines), media_type="text/plain; charset=utf-8")

    def _answer(self, asked: list[files.Identity]) -> list[str]:
        lines: list[str] = []
        for ident in asked:
            name = f"{ident[0]}/{ident[1]}"
            try:
                info = os.lstat(self._store.path(ident))
            except OSError:
                info = None
            if info is not None and stat.S_ISREG(info.st_mode):
                lines.append(f"{name} {wire.STORED}\n")
                continue
            received = self._inflight.received(ident)
            if received is not None:
                lines.append(f"{name} {wire.FETCHING} {received}\n")
        return lines
