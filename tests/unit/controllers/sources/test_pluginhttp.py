"""The lean plugin client over real TLS on loopback: keep-alive reuse, refusals, a connection
closed mid-answer, the body limit, and the bearer token on the wire."""

from __future__ import annotations

import asyncio
import pathlib
import ssl
from collections.abc import AsyncIterator

import pytest

from certs import authority
from controllers.sources import pluginhttp, plugins


class Server:
    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[bytes] = []
        self.answers: list[bytes] = []


def _answer(status: int, body: bytes, *, length: int | None = None) -> bytes:
    return (b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
            % (status, len(body) if length is None else length)) + body


@pytest.fixture
async def server(tmp_path: pathlib.Path) -> AsyncIterator[tuple[Server, str, ssl.SSLContext]]:
    files = authority.ensure(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(files.cert, files.key)
    state = Server()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                state.requests.append(head + await reader.readexactly(length))
                answer = state.answers.pop(0)
                writer.write(answer)
                await writer.drain()
                if b"close-after" in answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    listening = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    port = listening.sockets[0].getsockname()[1]
    try:
        yield state, f"https://127.0.0.1:{port}", plugins.ssl_context(str(files.ca_cert))
    finally:
        listening.close()


async def test_answers_reuse_the_connection(
        server: tuple[Server, str, ssl.SSLContext]) -> None:
    state, base, tls = server
    pool = pluginhttp.Pool(base, tls)
    state.answers = [_answer(200, b'{"downloads": []}'), _answer(200, b'{"a": 1}')]
    assert await pool.get("/model/downloads", [("authorization", "Bearer w")], 100) == (
        b'{"downloads": []}')
    assert await pool.get("/model/downloads", [], 100) == b'{"a": 1}'
    assert state.connections == 1
    assert b"authorization: Bearer w" in state.requests[0]
    assert state.requests[0].startswith(b"GET /model/downloads HTTP/1.1")
    pool.close()


async def test_refusals_truncation_and_limits(
        server: tuple[Server, str, ssl.SSLContext]) -> None:
    state, base, tls = server
    pool = pluginhttp.Pool(base, tls)
    state.answers = [_answer(403, b"{}")]
    with pytest.raises(pluginhttp.PluginHttpError, match="HTTP 403"):
        await pool.get("/model/downloads", [], 100)
    state.answers = [_answer(200, b"close-after", length=50)]
    with pytest.raises(pluginhttp.PluginHttpError, match="closed"):
        await pool.get("/model/downloads", [], 100)
    state.answers = [_answer(200, b"x" * 200)]
    with pytest.raises(pluginhttp.PluginHttpError, match="too large"):
        await pool.get("/model/downloads", [], 100)
    pool.close()


async def test_an_unverified_certificate_is_refused_with_a_ca(
        server: tuple[Server, str, ssl.SSLContext], tmp_path: pathlib.Path) -> None:
    _, base, _ = server
    other = authority.ensure(tmp_path / "other")
    pool = pluginhttp.Pool(base, plugins.ssl_context(str(other.ca_cert)))
    with pytest.raises(ssl.SSLError):
        await pool.get("/model/downloads", [], 100)


async def test_a_post_carries_its_body_and_any_complete_answer_is_returned(
        server: tuple[Server, str, ssl.SSLContext]) -> None:
    state, base, tls = server
    pool = pluginhttp.Pool(base, tls)
    state.answers = [_answer(403, b'{"reason": "Forbidden"}'), _answer(200, b"{}")]
    assert await pool.request("POST", "/model/prefetches", [], 100, b'{"a": 1}') == (
        403, b'{"reason": "Forbidden"}')
    assert state.requests[0].startswith(b"POST /model/prefetches HTTP/1.1")
    assert b"content-length: 8" in state.requests[0]
    assert state.requests[0].endswith(b'\r\n\r\n{"a": 1}')
    assert await pool.get("/model/downloads", [], 100) == b"{}"
    assert state.connections == 1  # a refusal is a complete answer: the connection stays
    pool.close()
