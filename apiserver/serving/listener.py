"""Serve an ASGI app over TLS with hypercorn's HTTP/1.1 and HTTP/2 protocols, giving every
request the client certificate chain its connection's handshake verified.

Hypercorn does not pass the peer certificate to the app (pgjones/hypercorn#62, #324), and a
header can never stand in for it. So this module runs hypercorn's per-connection protocol
handler (``TCPServer``) itself: for each accepted TLS connection it reads the verified chain from
the ``SSLObject`` once and wraps the app so that every request on that connection, over either
protocol, carries it in ``scope["extensions"]["tls"]`` (``apiserver.auth.middleware``). The rest
is hypercorn's own serving loop in small: lifespan, then listen, then on shutdown stop accepting,
give open connections the graceful timeout, and run the lifespan shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from hypercorn import config as hypercorn_config
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.asyncio.lifespan import Lifespan
from hypercorn.asyncio.worker_context import WorkerContext
from starlette.types import ASGIApp

from apiserver.auth import middleware
from apiserver.serving import hypercorn_guards, tls

log = logging.getLogger(__name__)

Trigger = Callable[[], Awaitable[Any]]


class WithPeer:
    """One connection's app: adds the connection's TLS facts to each request's scope."""

    def __init__(self, app: Any, facts: dict[str, Any]) -> None:
        self.app = app
        self.facts = facts

    async def __call__(self, scope: Any, receive: Any, send: Any, sync_spawn: Any,
                       call_soon: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            scope.setdefault("extensions", {})[middleware.TLS_EXTENSION] = self.facts
        await self.app(scope, receive, send, sync_spawn, call_soon)


def connection_facts(ssl_object: Any) -> dict[str, Any]:
    return {middleware.PEER_CHAIN: tls.peer_chain(ssl_object)}


def listen(bind: str, backlog: int) -> socket.socket:
    """A listening TCP socket for ``host:port`` (``[v6]:port`` for IPv6), or the inherited one
    ``fd://N`` names (a ``--workers`` child, ``apiserver.serving.processes``)."""
    if bind.startswith("fd://"):
        inherited = socket.socket(fileno=int(bind[len("fd://"):]))
        inherited.setblocking(False)
        return inherited
    host, _, port = bind.rpartition(":")
    host = host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port)))
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def serve(app: ASGIApp, config: hypercorn_config.Config, contexts: tls.ServingContexts,
                *, shutdown_trigger: Trigger, ssl_shutdown_timeout: float | None = None) -> None:
    """Serve on ``config.bind`` until ``shutdown_trigger`` returns; listening starts once the
    app's lifespan startup finished (as hypercorn does). ``ssl_shutdown_timeout`` bounds how long
    a connection's close waits for the client's close_notify (asyncio's default, 30 s, when
    None)."""
    loop = asyncio.get_running_loop()
    wrapped = ASGIWrapper(app)  # type: ignore[arg-type]
    state: dict[str, Any] = {}
    lifespan = Lifespan(wrapped, config, loop, state)
    lifespan_task = loop.create_task(lifespan.handle_lifespan())
    await lifespan.wait_for_startup()
    if lifespan_task.done() and lifespan_task.exception() is not None:
        raise lifespan_task.exception()  # type: ignore[misc]

    sockets = [listen(bind, config.backlog) for bind in config.bind]
    context = WorkerContext(None)
    connections: set[asyncio.Task[Any]] = set()

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            connections.add(task)
            task.add_done_callback(connections.discard)
        facts = connection_facts(writer.get_extra_info("ssl_object"))
        try:
            await hypercorn_guards.Connection(WithPeer(wrapped, facts), loop, config, context,
                                              state, reader, writer)
        except (ssl.SSLError, ConnectionError, TimeoutError) as exc:
            # a client that went away mid-close (APPLICATION_DATA_AFTER_CLOSE_NOTIFY, resets, a
            # close_notify never answered):
            # ordinary, not a server error
            log.debug("connection ended: %s", type(exc).__name__)

    servers = [
        await asyncio.start_server(connected, sock=sock, ssl=contexts.base,
                                   ssl_handshake_timeout=config.ssl_handshake_timeout,
                                   ssl_shutdown_timeout=ssl_shutdown_timeout,
                                   backlog=config.backlog)
        for sock in sockets
    ]
    for sock in sockets:
        address = sock.getsockname()
        log.info("serving on https://%s:%s", *address[:2])
    try:
        await shutdown_trigger()
    finally:
        await context.terminated.set()
        for server in servers:
            server.close()
        for server in servers:
            await server.wait_closed()
        if connections:
            _, pending = await asyncio.wait(set(connections), timeout=config.graceful_timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
        await lifespan.wait_for_shutdown()
        lifespan_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await lifespan_task
