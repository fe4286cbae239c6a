"""An answer of the peer port whose every send is bounded: a caller that stops reading is cut.

The body comes from ``chunks`` (a file range read in ``wire.CHUNK_BYTES`` pieces in a worker
thread, or a stored manifest); each message to the server (the status line and headers, then
each piece) must be taken within ``send_timeout`` seconds. One that is not, because the caller
stopped reading and the connection's buffers are full, ends the answer: the server then closes
the connection under it (HTTP/1.1; over HTTP/2 the stream ends unanswered and the idle
connection is closed after its keep-alive timeout). A caller that goes away ends it too. Either
way ``on_end`` runs exactly once when the answer ends (the file is closed, the stream slot given
back), and the cut is logged without a traceback: a stalled reader is the caller's doing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from starlette import responses

log = logging.getLogger(__name__)

SEND_TIMEOUT_SECONDS = 30.0
"""As long as the pulling side waits for a byte before it gives up on a peer."""


class Answer(responses.Response):
    """A starlette response by its interface only (the route hands it the ASGI call)."""

    def __init__(self, status: int, headers: Mapping[str, str],
                 chunks: Callable[[], AsyncIterator[bytes]], *, send_timeout: float,
                 what: str, on_end: Callable[[], None] = lambda: None) -> None:
        self.status_code = status
        self.background = None
        self._raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        self._chunks = chunks
        self._send_timeout = send_timeout
        self._what = what
        self._on_end = on_end
        self.sent_bytes = 0
        self.cut = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        streaming = asyncio.ensure_future(self._stream(send))
        watching = asyncio.ensure_future(_disconnect(receive))
        try:
            await asyncio.wait({streaming, watching}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (streaming, watching):
                task.cancel()
            await asyncio.gather(streaming, watching, return_exceptions=True)
            self._on_end()

    async def _send(self, send: Any, message: dict[str, Any]) -> None:
        async with asyncio.timeout(self._send_timeout):
            await send(message)

    async def _stream(self, send: Any) -> None:
        try:
            await self._send(send, {"type": "http.response.start", "status": self.status_code,
                                    "headers": self._raw})
            async for chunk in self._chunks():
                await self._send(send, {"type": "http.response.body", "body": chunk,
                                        "more_body": True})
                self.sent_bytes += len(chunk)
            await self._send(send, {"type": "http.response.body", "body": b"",
                                    "more_body": False})
        except TimeoutError:
            self.cut = True
            log.info("peer answer %s cut after %d bytes: the caller read nothing for %gs",
                     self._what, self.sent_bytes, self._send_timeout)
        except OSError as exc:
            log.warning("peer answer %s ended after %d bytes: %s", self._what,
                        self.sent_bytes, exc)


async def _disconnect(receive: Any) -> None:
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return
