"""Assemble the starlette application: routes, middleware, the one error handler, lifespan.

Middleware, outermost first: every request timed and counted for ``/metrics``
(``apiserver.endpoints.metrics``); on shutdown, open streams (watches) are ended cleanly; no
response starts before the request body was read to its end (up to a bound); unexpected
exceptions become a 500 ``Status`` (logged, never echoed); request bodies over the limit get 413
(the one place the limit lives); authentication, impersonation and authorization
(``apiserver.auth.middleware``). Inside, every ``StatusError`` raised by a route is rendered by
one handler, and unknown paths or methods get a 404/405 ``Status`` instead of starlette's plain
text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from prometheus_client import registry as prometheus_registry
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apiserver import errors
from apiserver.auth import authenticator, authorizer, middleware
from apiserver.endpoints import body as bodies
from apiserver.endpoints import discovery, health, openapi
from apiserver.endpoints import metrics as served_metrics
from apiserver.flags import config
from apiserver.registry import statuses
from apiserver.storage import interface, marks

log = logging.getLogger(__name__)

StartupHook = Callable[[], Awaitable[None]]
DRAIN_BYTES = 64 * 1024 * 1024
"""How much of an unread request body is read and dropped before an answer, to keep the
connection."""
DRAIN_SECONDS = 30.0
"""How long an answer waits for the rest of an unread body."""


def build(
    *,
    storage: interface.Store,
    authentication: authenticator.Chain,
    authorization: authorizer.Authorizer,
    resource_routes: Sequence[BaseRoute],
    groups: Sequence[discovery.Group] = (),
    startup: Sequence[StartupHook] = (),
    stop: Sequence[StartupHook] = (),
    checks: Sequence[health.Check] = (),
    collectors: Sequence[prometheus_registry.Collector] = (),
    max_body_bytes: int = config.MAX_BODY_BYTES,
    revisions: marks.Guarded | None = None,
) -> Starlette:
    """The API server app. ``resource_routes`` serve everything under the group version except
    its discovery document; ``groups`` are the other groups this mode serves (listed in
    discovery); ``startup`` hooks run after storage started, before readiness;
    ``stop`` hooks run (in reverse order) before storage closes; ``checks`` are more readiness
    checks (``/readyz``) and ``collectors`` more metrics (``/metrics``); ``revisions``: the
    storage itself when it keeps a revision mark (``storage.marks``), for the metrics."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await storage.start()
        try:
            for hook in startup:
                await hook()
            app.state.ready = True
            yield
        finally:
            app.state.ready = False
            for hook in reversed(stop):
                try:
                    await hook()
                except Exception:
                    log.exception("a shutdown step failed")
            await storage.close()

    # discovery first: it owns the exact group-version path the resource routes leave alone
    observed = served_metrics.Metrics(revisions)
    for collector in collectors:
        observed.registry.register(collector)
    routes: list[BaseRoute] = [
        *health.routes(),
        *served_metrics.routes(observed),
        *discovery.routes(extra=groups),
        *openapi.routes(),
        *resource_routes,
    ]
    shutdown = Shutdown()
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(served_metrics.Observe, metrics=observed),
            Middleware(Draining, shutdown=shutdown),
            Middleware(ReadsBodyFirst),
            Middleware(CatchAll),
            Middleware(BodyLimit, limit=max_body_bytes),
            Middleware(middleware.Filter, authentication=authentication,
                       authorization=authorization),
        ],
        exception_handlers={errors.StatusError: render, HTTPException: render_http,
                            interface.StorageError: render_storage},
        lifespan=lifespan,
    )
    app.state.ready = False
    app.state.shutdown = shutdown
    app.state.storage = storage
    app.state.checks = tuple(checks)
    app.state.metrics = observed
    return app


def status_response(err: errors.StatusError) -> Response:
    return Response(
        errors.encoded(err),
        status_code=err.code,
        headers=err.headers,
        media_type="application/json",
    )


async def render(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, errors.StatusError):  # starlette dispatches by class; never taken
        raise exc
    return status_response(exc)


async def render_storage(request: Request, exc: Exception) -> Response:
    """A storage failure the registry did not turn into a status (the backend is down, hung or
    broken), rendered through the one mapping, ``registry.statuses.from_storage``."""
    if not isinstance(exc, interface.StorageError):  # starlette dispatches by class; never taken
        raise exc
    log.warning("storage failure serving %s %s: %s", request.method, request.url.path, exc)
    return status_response(statuses.from_storage(exc))


async def render_http(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 (no route, wrong method) as Kubernetes statuses."""
    if not isinstance(exc, HTTPException):  # starlette dispatches by class; never taken
        raise exc
    err: errors.StatusError
    if exc.status_code == 404:
        err = errors.NotFound("the server could not find the requested resource")
    elif exc.status_code == 405:
        err = errors.MethodNotAllowed(
            "the server does not allow this method on the requested resource"
        )
    else:
        err = errors.StatusError(str(exc.detail))
        err.code = exc.status_code
    err.headers.update(exc.headers or {})
    return status_response(err)


class BodyLimit:
    """413 for bodies over ``limit``: at once from ``Content-Length``, else while streaming.

    The rest of an oversized body is read and dropped by ``ReadsBodyFirst`` before the answer.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await errors.send(send, bodies.body_too_large(self.limit))
                return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise bodies.body_too_large(self.limit)
            return message

        await self.app(scope, limited, send)


class ReadsBodyFirst:
    """No response starts before the request body has been read to its end.

    A handler that refuses a request without reading its body (a 404 or 405 from the router, a 401,
    a 413) would otherwise answer while the client is still sending: over HTTP/1.1 the connection
    cannot be reused, and hypercorn (0.18, its issue #329) tears down the whole HTTP/2 connection,
    every other stream on it included, when DATA arrives for a stream it already answered. So the
    rest of the body is read and dropped first, up to ``drain`` bytes or ``patience`` seconds (a
    client that stops sending holds nothing); past that the answer goes out anyway
    (``tlsserver.guards`` keeps such a connection alive).
    """

    def __init__(self, app: ASGIApp, drain: int = DRAIN_BYTES,
                 patience: float = DRAIN_SECONDS) -> None:
        self.app = app
        self.drain = drain
        self.patience = patience

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        ended = False
        readers = 0

        async def reading() -> Message:
            nonlocal ended, readers
            readers += 1
            try:
                message = await receive()
            finally:
                readers -= 1
            if message["type"] != "http.request" or not message.get("more_body", False):
                ended = True
            return message

        async def answering(message: Message) -> None:
            nonlocal ended
            # a streaming response listens for the disconnect meanwhile, and so reads (and
            # drops) the body itself: a second reader would wait for a message it took
            if message["type"] == "http.response.start" and not ended and readers == 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.patience):
                        await _discard(reading, self.drain)
                ended = True
            await send(message)

        await self.app(scope, reading, answering)


async def _discard(receive: Receive, budget: int) -> None:
    """Read and drop request body chunks until the body ends or ``budget`` bytes were read."""
    while budget > 0:
        message = await receive()
        if message["type"] != "http.request":
            return
        budget -= len(message.get("body", b""))
        if not message.get("more_body", False):
            return


class Shutdown:
    """Ends open streaming responses when the server stops.

    A watch never finishes by itself; without this, stopping would wait the whole grace period
    and then have hypercorn cancel connections mid-frame. Ending the stream cleanly lets clients
    see a normal end of watch and reconnect elsewhere.
    """

    def __init__(self) -> None:
        self.stopping = False
        self.streams: set[asyncio.Task[object]] = set()
        self.ended: set[asyncio.Task[object]] = set()

    def begin(self) -> None:
        self.stopping = True
        for task in list(self.streams):
            self.end(task)

    def end(self, task: asyncio.Task[object]) -> None:
        if task not in self.ended:
            self.ended.add(task)
            task.cancel()


class Draining:
    """Registers each response while it streams, so ``Shutdown.begin`` can end it.

    A response without a ``Content-Length`` is a stream (a watch); responses of known length are
    never interrupted.
    """

    def __init__(self, app: ASGIApp, shutdown: Shutdown) -> None:
        self.app = app
        self.shutdown = shutdown

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        if scope["type"] != "http" or task is None:
            await self.app(scope, receive, send)
            return
        shutdown = self.shutdown

        async def tracking(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.start":
                if not any(name == b"content-length" for name, _ in message["headers"]):
                    # no declared length: a stream (hypercorn runs each request in its own task)
                    shutdown.streams.add(task)
                    if shutdown.stopping:
                        shutdown.end(task)
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                shutdown.streams.discard(task)

        try:
            await self.app(scope, receive, tracking)
        except asyncio.CancelledError:
            if task not in shutdown.ended:
                raise
            task.uncancel()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            shutdown.streams.discard(task)
            shutdown.ended.discard(task)


class CatchAll:
    """An unexpected exception becomes a 500 ``Status`` without internals; details go to the log."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception:
            log.exception("unexpected error serving %s %s", scope["method"], scope["path"])
            if not started:
                await errors.send(send, errors.InternalError("an internal error occurred"))
