"""One watch-fanout client process: many raw HTTP/1.1 watch streams, timestamping each event.

Run by ``bench.watch_fanout`` (several at once, so the client side is not what limits the
figure). Each watcher is its own TLS connection reading a chunked JSON-lines stream; parsing is
minimal (a plain protocol de-chunks, splits lines and runs one orjson.loads each). Prints
``ready`` once every stream answered 200, then one JSON line
``{"latencies": [...], "received": [...]}`` when every watcher saw all the updates, or when stdin
closes (the writer is done) and a grace period passed.

Usage: python -m bench._watch_client HOST PORT CA_FILE TOKEN PATH_AND_QUERY WATCHERS UPDATES
(the token comes on stdin's first line instead of argv when TOKEN is ``-``).
"""

from __future__ import annotations

import asyncio
import ssl
import sys
import time

import orjson

ANNOTATION = "bench.gpustack.ai/sent"
GRACE = 20.0
"""Seconds a client keeps reading after the writer finished, for stragglers."""
CONNECTING = 50
"""TLS handshakes in flight at once (the server has to answer them all)."""


class Watcher(asyncio.Protocol):
    """One stream over its own TLS connection: a plain protocol (no stream coroutines per read),
    de-chunking by hand, timestamping each read before parsing it."""

    def __init__(self, request: bytes, updates: int) -> None:
        self.request = request
        self.updates = updates
        self.received = 0
        self.latencies: list[float] = []
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self._head = True
        self._raw = b""
        self._lines = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.request)

    def connection_lost(self, exc: Exception | None) -> None:
        for future in (self.ready, self.done):
            if not future.done():
                future.set_exception(exc or ConnectionError("the server closed the stream"))

    def data_received(self, data: bytes) -> None:
        now = time.time()  # receipt: before any parsing
        self._raw += data
        if self._head:
            end = self._raw.find(b"\r\n\r\n")
            if end < 0:
                return
            head, self._raw = self._raw[:end], self._raw[end + 4:]
            self._head = False
            if head.split(b" ", 2)[1] != b"200" or b"chunked" not in head.lower():
                self.ready.set_exception(RuntimeError(f"watch answered {head!r}"))
                return
            self.ready.set_result(None)
        self._dechunk()
        while b"\n" in self._lines:
            line, self._lines = self._lines.split(b"\n", 1)
            if line:
                self._event(line, now)

    def _dechunk(self) -> None:
        raw = self._raw
        while True:
            end = raw.find(b"\r\n")
            if end < 0:
                break
            size = int(raw[:end].split(b";", 1)[0], 16)
            if len(raw) < end + 2 + size + 2:
                break
            self._lines += raw[end + 2:end + 2 + size]
            raw = raw[end + 2 + size + 2:]
        self._raw = raw

    def _event(self, line: bytes, now: float) -> None:
        event = orjson.loads(line)
        sent = event["object"]["metadata"].get("annotations", {}).get(ANNOTATION)
        if event["type"] == "MODIFIED" and sent:
            self.latencies.append(now - float(sent))
            self.received += 1
            if self.received >= self.updates and not self.done.done():
                self.done.set_result(None)


async def _connect(host: str, port: int, context: ssl.SSLContext, watcher: Watcher,
                   gate: asyncio.Semaphore) -> None:
    loop = asyncio.get_running_loop()
    async with gate:
        await loop.create_connection(lambda: watcher, host, port, ssl=context,
                                     server_hostname=host)
        await watcher.ready


async def _run(host: str, port: int, ca_file: str, token: str, target: str, count: int,
               updates: int) -> None:
    context = ssl.create_default_context(cafile=ca_file)
    request = (f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\n"
               f"Authorization: Bearer {token}\r\nAccept: application/json\r\n\r\n").encode()
    gate = asyncio.Semaphore(CONNECTING)
    watchers = [Watcher(request, updates) for _ in range(count)]
    await asyncio.gather(*(_connect(host, port, context, watcher, gate) for watcher in watchers))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    readers = [watcher.done for watcher in watchers]
    loop = asyncio.get_running_loop()
    # stdin reaching EOF means the writer is done: allow stragglers GRACE seconds more.
    writer_done = loop.run_in_executor(None, sys.stdin.read)
    everyone = asyncio.gather(*readers, return_exceptions=True)
    await asyncio.wait([everyone, writer_done], return_when=asyncio.FIRST_COMPLETED)
    if not everyone.done():
        await asyncio.wait([everyone], timeout=GRACE)
    for watcher in watchers:
        if watcher.transport is not None:
            watcher.transport.close()
    latencies = [value for watcher in watchers for value in watcher.latencies]
    sys.stdout.write(orjson.dumps({"latencies": latencies,
                                   "received": [w.received for w in watchers]}).decode() + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> None:
    host, port, ca_file, token, target, count, updates = argv
    if token == "-":
        token = sys.stdin.readline().strip()
    asyncio.run(_run(host, int(port), ca_file, token, target, int(count), int(updates)))


if __name__ == "__main__":
    main(sys.argv[1:])
