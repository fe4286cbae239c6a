"""Serve an ASGI app over TLS with hypercorn's HTTP/1.1 and HTTP/2 protocols on sockets of our
own: hypercorn's serving loop in small (lifespan, then listen, then on shutdown stop accepting,
give open connections the graceful timeout, run the lifespan shutdown), with hypercorn's
per-connection ``TCPServer`` replaced by ``guards.Connection``.

What hypercorn's own ``serve`` cannot be told: ``ssl_shutdown_timeout`` bounds how long a served
connection's close waits for the client's close_notify (asyncio waits 30 s, and only its
process-wide constant would change that for hypercorn's servers, and for every client
connection of the process with them), and ``per_connection`` gives each accepted connection an
app of its own, built from its ``SSLObject``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any

from hypercorn import config as hypercorn_config
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.asyncio.lifespan import Lifespan
from hypercorn.asyncio.worker_context import WorkerContext

from tlsserver import guards

log = logging.getLogger(__name__)

Trigger = Callable[[], Awaitable[Any]]
PerConnection = Callable[[Any, Any], Any]
"""(hypercorn's wrapped app, the connection's ``SSLObject``) -> the connection's app."""


class Config(hypercorn_config.Config):
    """hypercorn's settings, with the headers it adds to every response (``date``, and
    ``server`` or ``alt-svc`` when configured) built once a second instead of per response.

    hypercorn formats the date of every response afresh; the headers change only when the
    second does (the settings behind the others are fixed once serving starts). The list is
    shared: hypercorn only ever concatenates it into a response's own header list."""

    _kept: tuple[int, dict[str, list[tuple[bytes, bytes]]]] = (-1, {})

    def response_headers(self, protocol: str) -> list[tuple[bytes, bytes]]:
        second = int(time.time())
        kept_second, kept = self._kept
        if kept_second != second:
            kept = {}
            self._kept = (second, kept)
        headers = kept.get(protocol)
        if headers is None:
            headers = kept[protocol] = super().response_headers(protocol)
        return headers


def listen(bind: str, backlog: int) -> socket.socket:
    """A listening TCP socket for ``host:port`` (``[v6]:port`` for IPv6), or the inherited one
    ``fd://N`` names (a ``--workers`` child of the API server)."""
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


async def serve(app: Any, config: hypercorn_config.Config, context: ssl.SSLContext, *,
                shutdown_trigger: Trigger, ssl_shutdown_timeout: float | None = None,
                per_connection: PerConnection | None = None) -> None:
    """Serve ``app`` on ``config.bind`` with ``context`` until ``shutdown_trigger`` returns;
    listening starts once the app's lifespan startup finished (as hypercorn does)."""
    loop = asyncio.get_running_loop()
    wrapped = ASGIWrapper(app)
    state: dict[str, Any] = {}
    lifespan = Lifespan(wrapped, config, loop, state)
    lifespan_task = loop.create_task(lifespan.handle_lifespan())
    await lifespan.wait_for_startup()
    if lifespan_task.done() and lifespan_task.exception() is not None:
        raise lifespan_task.exception()  # type: ignore[misc]

    sockets = [listen(bind, config.backlog) for bind in config.bind]
    worker = WorkerContext(None)
    connections: set[asyncio.Task[Any]] = set()

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            connections.add(task)
            task.add_done_callback(connections.discard)
        served = wrapped if per_connection is None else per_connection(
            wrapped, writer.get_extra_info("ssl_object"))
        try:
            await guards.Connection(served, loop, config, worker, state, reader, writer)
        except (ssl.SSLError, ConnectionError, TimeoutError) as exc:
            # a client that went away mid-close (APPLICATION_DATA_AFTER_CLOSE_NOTIFY, resets, a
            # close_notify never answered): ordinary, not a server error
            log.debug("connection ended: %s", type(exc).__name__)

    servers = [
        await asyncio.start_server(connected, sock=sock, ssl=context,
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
        await worker.terminated.set()
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
