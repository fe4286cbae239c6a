"""A loopback HTTP server that answers every request with one JSON list after a delay: a
kube-apiserver (or an aggregator in front of a busy server) slow to answer a LIST page."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

LIST = b'{"kind": "List", "metadata": {"resourceVersion": "7"}, "items": []}'


@contextlib.asynccontextmanager
async def serving(delay: float, body: bytes = LIST) -> AsyncIterator[str]:
    """Its ``http://`` URL while it runs."""
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        await asyncio.sleep(delay)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()
