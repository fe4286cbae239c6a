"""App assembly: one Status renderer, 404/405 as Status, 413 body limit, 500 without internals,
authentication in front, readiness tied to storage start."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apiserver import errors
from apiserver.auth import authenticator, authorizer, bearer, policy, rbac, static
from apiserver.storage import sqlite
from apiserver.wiring import app

TOKEN = "unit-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LIMIT = 1024


async def echo(request: Request) -> JSONResponse:
    return JSONResponse({"size": len(await request.body())})


async def conflict(request: Request) -> JSONResponse:
    raise errors.Conflict("it changed", headers={"Retry-After": "1"})


async def boom(request: Request) -> JSONResponse:
    raise RuntimeError("secret internal detail")


@pytest.fixture
async def application(tmp_path: pathlib.Path) -> AsyncIterator[Starlette]:
    routes = [
        Route("/echo", echo, methods=["POST"]),
        Route("/conflict", conflict),
        Route("/boom", boom),
    ]
    built = app.build(
        storage=sqlite.Store(tmp_path / "store.db"),
        authentication=authenticator.Chain([bearer.Bearer([bearer.StaticTokens(
            static.TokenTable([static.Entry(TOKEN, "tester", groups=("system:masters",))]))])]),
        authorization=authorizer.Delegating(rbac.Evaluator(policy.builtin(worker="w",
                                                                          plugin="p"))),
        resource_routes=routes,
        max_body_bytes=LIMIT,
    )
    assert built.state.ready is False
    async with built.router.lifespan_context(built):
        yield built
    assert built.state.ready is False


@pytest.fixture
async def client(application: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(application, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="https://t", headers=AUTH) as c:
        yield c


async def test_ready_after_start(application: Starlette, client: httpx.AsyncClient) -> None:
    assert application.state.ready is True
    assert (await client.get("/readyz")).status_code == 200


async def test_unknown_path_is_404_status(client: httpx.AsyncClient) -> None:
    response = await client.get("/nothing/here")
    assert response.status_code == 404
    body = response.json()
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "NotFound", 404)


async def test_wrong_method_is_405_status(client: httpx.AsyncClient) -> None:
    response = await client.delete("/version")
    assert response.status_code == 405
    assert response.json()["reason"] == "MethodNotAllowed"


async def test_status_error_rendered_with_headers(client: httpx.AsyncClient) -> None:
    response = await client.get("/conflict")
    assert response.status_code == 409
    assert response.headers["retry-after"] == "1"
    assert response.json() == errors.Conflict("it changed").body()


async def test_unexpected_exception_is_500_without_internals(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    response = await client.get("/boom")
    assert response.status_code == 500
    assert response.json()["reason"] == "InternalError"
    assert "secret internal detail" not in response.text
    assert "secret internal detail" in caplog.text


async def test_body_at_limit_passes(client: httpx.AsyncClient) -> None:
    response = await client.post("/echo", content=b"x" * LIMIT)
    assert response.json() == {"size": LIMIT}


async def test_body_over_limit_by_length_is_413(client: httpx.AsyncClient) -> None:
    response = await client.post("/echo", content=b"x" * (LIMIT + 1))
    assert response.status_code == 413
    body = response.json()
    assert body["reason"] == "RequestEntityTooLarge"
    assert str(LIMIT) in body["message"]


async def test_streamed_body_over_limit_is_413(client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(4):
            yield b"y" * 400

    response = await client.post("/echo", content=chunks())
    assert response.status_code == 413


async def test_a_bad_token_is_401_and_none_is_anonymous(client: httpx.AsyncClient) -> None:
    assert (await client.get("/version", headers={"Authorization": "Bearer x"})).status_code == 401
    anonymous = await client.get("/apis/worker.gpustack.ai/v1", headers={"Authorization": ""})
    assert anonymous.status_code == 403
    assert "system:anonymous" in anonymous.json()["message"]


async def test_discovery_and_openapi_are_mounted(client: httpx.AsyncClient) -> None:
    assert (await client.get("/apis/worker.gpustack.ai/v1")).json()["kind"] == "APIResourceList"
    assert (await client.get("/openapi/v3")).status_code == 200


async def test_shutdown_ends_open_streams_cleanly() -> None:
    async def forever(request: Request) -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            yield b'{"type":"ADDED"}\n'
            await asyncio.Event().wait()  # a watch with nothing more to say
            yield b""

        return StreamingResponse(chunks(), media_type="application/json")

    shutdown = app.Shutdown()
    inner = Starlette(routes=[Route("/watch", forever)])
    draining = app.Draining(inner, shutdown)
    sent: list[Message] = []
    first_chunk = asyncio.Event()

    async def receive() -> Message:
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            first_chunk.set()

    scope = {
        "type": "http", "method": "GET", "path": "/watch", "headers": [], "query_string": b"",
        "root_path": "", "scheme": "https", "http_version": "2",
    }  # fmt: skip
    task = asyncio.create_task(draining(scope, receive, send))
    await asyncio.wait_for(first_chunk.wait(), 5)
    assert len(shutdown.streams) == 1
    shutdown.begin()
    await asyncio.wait_for(task, 5)  # returns normally: no cancellation leaks to the server
    assert sent[0]["status"] == 200
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert not shutdown.streams


async def test_shutdown_leaves_plain_requests_alone(
    client: httpx.AsyncClient, application: Starlette
) -> None:
    application.state.shutdown.begin()
    response = await client.get("/version")
    assert response.status_code == 200
    assert response.json()["gitVersion"]


def _chunks(sizes: list[int]) -> tuple[list[Message], list[str]]:
    """Request messages of ``sizes`` and a log both the app and the server side append to."""
    messages: list[Message] = [
        {"type": "http.request", "body": b"x" * size, "more_body": index < len(sizes) - 1}
        for index, size in enumerate(sizes)]
    return messages, []


async def _run(inner: ASGIApp, messages: list[Message], log: list[str], *,
               drain: int = app.DRAIN_BYTES) -> None:
    queue = list(messages)

    async def receive() -> Message:
        if not queue:
            await asyncio.Event().wait()  # nothing more until the client goes away
        message = queue.pop(0)
        log.append(f"read {len(message.get('body', b''))}")
        return message

    async def send(message: Message) -> None:
        log.append(message["type"])

    scope = {"type": "http", "method": "POST", "path": "/x", "headers": [],
             "query_string": b"", "root_path": "", "scheme": "https", "http_version": "2"}
    await asyncio.wait_for(app.ReadsBodyFirst(inner, drain)(scope, receive, send), 5)


async def _refuses_without_reading(scope: Scope, receive: Receive,
                                   send: Send) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b"no"})


async def test_an_answer_waits_until_the_body_is_read() -> None:
    messages, log = _chunks([10, 20, 30])
    await _run(_refuses_without_reading, messages, log)
    assert log == ["read 10", "read 20", "read 30", "http.response.start", "http.response.body"]


async def test_past_the_drain_budget_the_answer_goes_out() -> None:
    messages, log = _chunks([100, 100, 100, 100])
    await _run(_refuses_without_reading, messages, log, drain=150)
    assert log == ["read 100", "read 100", "http.response.start", "http.response.body"]


async def test_a_body_the_app_read_is_not_read_again() -> None:
    async def reads(scope: Scope, receive: Receive, send: Send) -> None:
        while (await receive()).get("more_body"):
            pass
        await _refuses_without_reading(scope, receive, send)

    messages, log = _chunks([10, 20])
    await _run(reads, messages, log)
    assert log == ["read 10", "read 20", "http.response.start", "http.response.body"]


async def test_a_streaming_answer_with_a_disconnect_listener_is_not_held() -> None:
    async def listens(scope: Scope, receive: Receive, send: Send) -> None:
        listener = asyncio.ensure_future(receive())  # as StreamingResponse listens
        await asyncio.sleep(0)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        listener.cancel()

    log: list[str] = []
    await _run(listens, [], log)
    assert log == ["http.response.start", "http.response.body"]


async def test_a_client_that_stops_sending_does_not_hold_the_answer() -> None:
    sent: list[str] = []
    first = {"type": "http.request", "body": b"x", "more_body": True}
    given = False

    async def receive() -> Message:
        nonlocal given
        if not given:
            given = True
            return first
        await asyncio.Event().wait()  # the rest never comes
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message["type"])

    scope = {"type": "http", "method": "POST", "path": "/x", "headers": [],
             "query_string": b"", "root_path": "", "scheme": "https", "http_version": "2"}
    guarded = app.ReadsBodyFirst(_refuses_without_reading, patience=0.01)
    await asyncio.wait_for(guarded(scope, receive, send), 30)  # a failure guard only
    assert sent == ["http.response.start", "http.response.body"]
