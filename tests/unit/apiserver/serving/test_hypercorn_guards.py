"""The hypercorn guards, against a real hypercorn serving an app that answers before reading.

The app answers every request at once and never reads its body, the case ``ReadsBodyFirst``
cannot cover (a body past its drain budget): the client's remaining DATA reaches a stream hypercorn
already closed. Unguarded, hypercorn raised ``KeyError`` and tore the connection down.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypercorn import asyncio as hypercorn_asyncio
from hypercorn import config as hypercorn_config
from hypercorn.protocol import h2 as hypercorn_h2
from starlette.types import Receive, Scope, Send

from apiserver.serving import hypercorn_guards
from tests.support import apiserver as support
from tests.support import h2client


async def answers_at_once(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 404,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"nothing here"})


@pytest.fixture
async def port() -> AsyncIterator[int]:
    hypercorn_guards.install()
    chosen = support.free_port()
    config = hypercorn_config.Config()
    config.bind = [f"127.0.0.1:{chosen}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    stop = asyncio.Event()
    serving = asyncio.create_task(hypercorn_asyncio.serve(
        answers_at_once, config, shutdown_trigger=stop.wait))  # type: ignore[arg-type]
    for _ in range(200):  # wait for the listening socket (failure guard: ~10 s)
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", chosen)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        await writer.wait_closed()
        break
    yield chosen
    stop.set()
    await serving


def _exchange(port: int, body: bytes) -> dict[str, Any]:
    with h2client.Connection("127.0.0.1", port, None, timeout=60) as connection:
        first = connection.request("POST", "/anything", body)
        second = connection.request("GET", "/next")
        return {"first": first, "second": second, "terminated": connection.terminated}


async def test_data_for_an_answered_stream_keeps_the_connection(
        port: int, caplog: pytest.LogCaptureFixture) -> None:
    body = b"x" * (2 * 1024 * 1024)
    result = await asyncio.to_thread(_exchange, port, body)
    first, second = result["first"], result["second"]
    assert first.status == 404 and first.sent == len(body)
    assert first.sent_at_response is not None and first.sent_at_response < len(body)
    assert not result["terminated"]
    assert (second.status, bytes(second.body)) == (404, b"nothing here")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_install_is_idempotent_and_marks_what_it_patched() -> None:
    hypercorn_guards.install()
    patched = hypercorn_h2.H2Protocol._handle_events
    hypercorn_guards.install()
    assert hypercorn_h2.H2Protocol._handle_events is patched
    assert not hypercorn_guards.data_lookup_unguarded() or getattr(
        hypercorn_h2.H2Protocol, "_model_manager_guarded", False)


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

    guarded = hypercorn_guards.guard_close(close)
    with caplog.at_level(logging.DEBUG, logger=hypercorn_guards.__name__):
        await guarded(threading)  # any object stands for the TCPServer
    assert calls == [threading]
    [record] = [r for r in caplog.records if r.name == hypercorn_guards.__name__]
    assert record.levelno == logging.DEBUG and record.exc_info is None
    assert "ended uncleanly" in record.getMessage()


async def test_other_failures_at_close_still_surface() -> None:
    async def close(self: object) -> None:
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        await hypercorn_guards.guard_close(close)(object())
