"""A lean HTTPS/1.1 client for ``GET /model/downloads`` (and the prefetches' ``POST
/model/prefetches``): h11 over asyncio streams, keep-alive connections per plugin.

Why not httpx here: a progress answer reads up to 64 plugins, and httpx's per-request cost
(about 1.5 ms of CPU each, measured by the ``progress`` benchmark) alone ate half of the 250 ms
target; h11 (the protocol engine httpx itself uses) on a kept-alive TLS stream costs a fraction
of that. Callers bound each request with their own deadline; a request cancelled or failed
mid-way closes its connection, since its state is unknown.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from urllib import parse

import h11

MAX_IDLE = 2


class PluginHttpError(Exception):
    """The plugin did not answer with a complete 200 (the message is safe to log)."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.protocol = h11.Connection(h11.CLIENT)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class Pool:
    """Idle connections to one ``https://host:port``."""

    def __init__(self, base: str, tls: ssl.SSLContext) -> None:
        parsed = parse.urlsplit(base)
        if parsed.scheme != "https" or not parsed.hostname:
            raise ValueError(f"not an https URL: {base[:100]}")
        self.host = parsed.hostname
        self.port = parsed.port or 443
        self.authority = parsed.netloc
        self._tls = tls
        self._idle: list[_Connection] = []

    async def _connect(self) -> _Connection:
        reader, writer = await asyncio.open_connection(
            self.host, self.port, ssl=self._tls, server_hostname=self.host)
        return _Connection(reader, writer)

    async def get(self, path: str, headers: list[tuple[str, str]], limit: int) -> bytes:
        """The body of a 200 answer to ``GET path`` (at most ``limit`` bytes)."""
        status, body = await self.request("GET", path, headers, limit)
        if status != 200:
            raise PluginHttpError(f"HTTP {status}")
        return body

    async def request(self, method: str, path: str, headers: list[tuple[str, str]],
                      limit: int, body: bytes = b"") -> tuple[int, bytes]:
        """The status and body (at most ``limit`` bytes) of any complete answer."""
        connection = self._idle.pop() if self._idle else await self._connect()
        reusable = False
        try:
            status, answer, reusable = await self._exchange(
                connection, method, path, headers, limit, body)
            return status, answer
        finally:
            if reusable and len(self._idle) < MAX_IDLE:
                self._idle.append(connection)
            else:
                connection.close()

    async def _exchange(self, connection: _Connection, method: str, path: str,
                        headers: list[tuple[str, str]], limit: int,
                        sent: bytes) -> tuple[int, bytes, bool]:
        protocol = connection.protocol
        framing = [("content-length", str(len(sent)))] if sent or method != "GET" else []
        request = h11.Request(method=method, target=path,
                              headers=[("host", self.authority), *framing, *headers])
        data = protocol.send(request)
        if sent:
            data += protocol.send(h11.Data(data=sent))
        connection.writer.write(data + protocol.send(h11.EndOfMessage()))
        await connection.writer.drain()
        status = 0
        body = bytearray()
        while True:
            try:
                event = protocol.next_event()
            except h11.RemoteProtocolError as exc:
                raise PluginHttpError(f"malformed answer ({exc})") from None
            if event is h11.NEED_DATA:
                chunk = await connection.reader.read(65536)
                if not chunk and protocol.their_state is not h11.DONE:
                    protocol.receive_data(b"")
                    raise PluginHttpError("the connection closed mid-answer")
                protocol.receive_data(chunk)
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > limit:
                    raise PluginHttpError("answer too large")
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                raise PluginHttpError("the connection closed mid-answer")
        reusable = protocol.our_state is h11.DONE and protocol.their_state is h11.DONE
        if reusable:
            protocol.start_next_cycle()
        return status, bytes(body), reusable

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()
