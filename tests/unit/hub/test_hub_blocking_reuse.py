"""``hub.blocking.Connections`` reusing kept-alive connections after the server closed them: the
replacement for a stale connection is a new one, not the next idle one (a server's keep-alive
timeout closes every idle connection alike; a peer's port, hypercorn, does after 5 s)."""

from __future__ import annotations

import concurrent.futures
import http.server
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from hub import blocking, config
from tests.support import plainhttp

BODY = b"0123456789"


class Server(http.server.ThreadingHTTPServer):
    accepted: list[socket.socket]
    gate: threading.Barrier


class Handler(plainhttp.Handler):
    server: Server

    def setup(self) -> None:
        super().setup()
        self.server.accepted.append(self.request)

    def do_GET(self) -> None:
        self.server.gate.wait(10)  # the first requests are in flight together
        self.answer(206, {"content-range": f"bytes 0-9/{len(BODY)}"}, BODY)


@pytest.fixture
def server() -> Iterator[Server]:
    with plainhttp.serving(Server, Handler) as running:
        running.accepted = []
        running.gate = threading.Barrier(3)
        yield running


def _get(connections: blocking.Connections, url: str) -> bytes:
    body = blocking.open_range(connections, url, endpoint=url, token=None, what="f",
                               mapper=lambda answer, data, what: AssertionError(what),
                               start=0, end=9)
    buffer = memoryview(bytearray(len(BODY)))
    try:
        got = 0
        while got < len(BODY):
            got += body.readinto(buffer[got:])
    finally:
        body.close()
    return bytes(buffer)


def test_a_stale_connection_is_replaced_by_a_new_one_not_the_next_idle(server: Server) -> None:
    url = f"http://127.0.0.1:{server.server_address[1]}/f"
    connections = blocking.Connections(config.HubConfig(read_timeout=5.0))
    try:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            assert list(pool.map(lambda _: _get(connections, url), range(3))) == [BODY] * 3
        server.gate = threading.Barrier(1)
        assert len(connections._idle[blocking._key(httpx.URL(url))]) == 3
        for accepted in list(server.accepted):  # the keep-alive timeout: all three closed
            accepted.shutdown(socket.SHUT_RDWR)
        assert _get(connections, url) == BODY
        assert len(server.accepted) == 4  # one new connection, after one stale one
    finally:
        connections.close()
