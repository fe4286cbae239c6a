"""The hypercorn guards, against real hypercorn connections serving an app that answers before
reading.

The app answers every request at once and never reads its body, the case ``ReadsBodyFirst``
cannot cover (a body past its drain budget): the client's remaining DATA reaches a stream hypercorn
already closed. Unguarded, hypercorn raised ``KeyError`` and tore the connection down. Served both
as the API server serves (the listener: TLS, HTTP/2 chosen by ALPN) and over cleartext with prior
knowledge, where hypercorn starts on HTTP/1.1 and switches to HTTP/2 (its other construction path).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pathlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from hypercorn import config as hypercorn_config
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.asyncio import tcp_server
from hypercorn.asyncio.worker_context import WorkerContext
from hypercorn.protocol import h2 as hypercorn_h2
from starlette.types import ASGIApp, Receive, Scope, Send

from devkit.controlplane import Authority
from devkit.harness import apiserver as support
from tests.support import asgi, h2client
from tlsserver import guards as hypercorn_guards
from tlsserver import listener


def _http_app(respond: Callable[[Scope, Send], Awaitable[None]]) -> ASGIApp:
    """An app answering HTTP requests with ``respond`` (and the lifespan, ignoring the rest)."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await asgi.lifespan(receive, send)
        elif scope["type"] == "http":
            await respond(scope, send)

    return app


async def _nothing_here(scope: Scope, send: Send) -> None:
    await send({"type": "http.response.start", "status": 404,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"nothing here"})


answers_at_once = _http_app(_nothing_here)
"""Answers every request at once, never reading its body."""


async def _listening(port: int) -> None:
    for _ in range(200):  # wait for the listening socket (failure guard: ~10 s)
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        await writer.wait_closed()
        return


def _config(port: int) -> hypercorn_config.Config:
    config = hypercorn_config.Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    return config


@pytest.fixture
async def over_tls(tmp_path: pathlib.Path) -> AsyncIterator[tuple[int, str]]:
    async with _serving_tls(tmp_path, answers_at_once) as served:
        yield served


@contextlib.asynccontextmanager
async def _serving_tls(tmp_path: pathlib.Path, app: Any) -> AsyncIterator[tuple[int, str]]:
    authority = Authority("server-ca")
    cert, key = authority.serving(("localhost", "127.0.0.1")).write(tmp_path, "serving")
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(authority.cert_pem)
    port = support.free_port()
    stop = asyncio.Event()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["h2", "http/1.1"])
    serving = asyncio.create_task(listener.serve(
        app, _config(port), context, shutdown_trigger=stop.wait,
        ssl_shutdown_timeout=2.0))
    await _listening(port)
    yield port, str(ca_file)
    stop.set()
    await asyncio.wait_for(serving, 30)


@pytest.fixture
async def cleartext() -> AsyncIterator[int]:
    port = support.free_port()
    loop = asyncio.get_running_loop()
    config, context = _config(port), WorkerContext(None)

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await hypercorn_guards.Connection(ASGIWrapper(answers_at_once), loop,  # type: ignore[arg-type]
                                          config, context, {}, reader, writer)

    server = await asyncio.start_server(connected, "127.0.0.1", port)
    yield port
    await context.terminated.set()
    server.close()
    await server.wait_closed()


def _exchange(port: int, ca_file: str | None, body: bytes) -> dict[str, Any]:
    with h2client.Connection("127.0.0.1", port, ca_file, timeout=60) as connection:
        first = connection.request("POST", "/anything", body)
        second = connection.request("GET", "/next")
        return {"first": first, "second": second, "terminated": connection.terminated}


def _keeps_the_connection(result: dict[str, Any], body: bytes,
                          caplog: pytest.LogCaptureFixture) -> None:
    first, second = result["first"], result["second"]
    assert first.status == 404 and first.sent == len(body)
    assert first.sent_at_response is not None and first.sent_at_response < len(body)
    assert not result["terminated"]
    assert (second.status, bytes(second.body)) == (404, b"nothing here")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_data_for_an_answered_stream_keeps_the_connection(
        over_tls: tuple[int, str], caplog: pytest.LogCaptureFixture) -> None:
    body = b"x" * (2 * 1024 * 1024)
    port, ca_file = over_tls
    _keeps_the_connection(await asyncio.to_thread(_exchange, port, ca_file, body), body, caplog)


async def test_the_guard_covers_http2_reached_from_http1(
        cleartext: int, caplog: pytest.LogCaptureFixture) -> None:
    body = b"x" * (2 * 1024 * 1024)
    _keeps_the_connection(await asyncio.to_thread(_exchange, cleartext, None, body), body, caplog)


def test_hypercorn_itself_is_left_alone() -> None:
    # the guards are subclasses used by this server's listener; nothing is patched in place
    assert "_handle_events" not in vars(hypercorn_guards.Protocols)
    assert hypercorn_h2.H2Protocol._handle_events is not hypercorn_guards.H2._handle_events
    assert issubclass(hypercorn_guards.H2, hypercorn_h2.H2Protocol)


def _guarded(close: Any) -> hypercorn_guards.Connection:
    """A ``Connection`` whose hypercorn close is ``close`` (no socket: only the close is tested)."""

    class Failing(tcp_server.TCPServer):
        _close = close

    class Guarded(hypercorn_guards.Connection, Failing):  # the guard's super() is Failing
        def __init__(self) -> None:
            pass

    return Guarded()


@pytest.mark.parametrize("failure", [
    ssl.SSLError(1, "[SSL: APPLICATION_DATA_AFTER_CLOSE_NOTIFY] application data after close"),
    ConnectionResetError(104, "Connection reset by peer"),
    TimeoutError("SSL shutdown timed out"),
])
async def test_a_client_ending_its_tls_badly_is_a_debug_line(
        failure: Exception, caplog: pytest.LogCaptureFixture) -> None:
    calls: list[object] = []

    async def close(self: object) -> None:
        calls.append(self)
        raise failure

    guarded = _guarded(close)
    with caplog.at_level(logging.DEBUG, logger=hypercorn_guards.__name__):
        await guarded._close()
    assert calls == [guarded]
    [record] = [r for r in caplog.records if r.name == hypercorn_guards.__name__]
    assert record.levelno == logging.DEBUG and record.exc_info is None
    assert "ended uncleanly" in record.getMessage()


async def test_other_failures_at_close_still_surface() -> None:
    async def close(self: object) -> None:
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        await _guarded(close)._close()


BIG = bytes(range(256)) * 4096 * 3
"""3 MiB: more than the test client's 64 KiB window, so a direct send stops mid-body."""


async def _big(scope: Scope, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    if scope["path"] == "/whole":
        await send({"type": "http.response.body", "body": BIG})
        return
    for part in (b"first,", BIG, b",last"):
        await send({"type": "http.response.body", "body": part, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


answers_big = _http_app(_big)
"""``/whole``: BIG in one body message; ``/parts``: small, then BIG, then small again."""


def _big_exchanges(port: int, ca_file: str) -> list[tuple[int | None, bytes]]:
    with h2client.Connection("127.0.0.1", port, ca_file, timeout=60) as connection:
        return [(found.status, bytes(found.body)) for found in (
            connection.request("GET", "/whole"), connection.request("GET", "/parts"),
            connection.request("GET", "/whole"))]


async def test_bodies_past_the_windows_arrive_whole_and_in_order(
        tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    async with _serving_tls(tmp_path, answers_big) as (port, ca_file):
        got = await asyncio.to_thread(_big_exchanges, port, ca_file)
    assert got == [(200, BIG), (200, b"first," + BIG + b",last"), (200, BIG)]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
