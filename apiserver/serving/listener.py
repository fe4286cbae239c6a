"""The API server's HTTPS port: ``tlsserver.listener`` with every request given the client
certificate chain its connection's handshake verified.

Hypercorn does not pass the peer certificate to the app (pgjones/hypercorn#62, #324), and a
header can never stand in for it. So for each accepted TLS connection the verified chain is read
from the ``SSLObject`` once and the app is wrapped so that every request on that connection, over
either protocol, carries it in ``scope["extensions"]["tls"]`` (``apiserver.auth.middleware``).
"""

from __future__ import annotations

from typing import Any

from hypercorn import config as hypercorn_config
from starlette.types import ASGIApp

from apiserver.auth import middleware
from apiserver.serving import tls
from tlsserver import listener

Trigger = listener.Trigger


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


def with_peer(wrapped: Any, ssl_object: Any) -> WithPeer:
    return WithPeer(wrapped, connection_facts(ssl_object))


async def serve(app: ASGIApp, config: hypercorn_config.Config, contexts: tls.ServingContexts,
                *, shutdown_trigger: Trigger, ssl_shutdown_timeout: float | None = None) -> None:
    """Serve on ``config.bind`` until ``shutdown_trigger`` returns (``tlsserver.listener``);
    ``ssl_shutdown_timeout`` bounds how long a connection's close waits for the client's
    close_notify (asyncio's default, 30 s, when None)."""
    await listener.serve(app, config, contexts.base, shutdown_trigger=shutdown_trigger,
                         ssl_shutdown_timeout=ssl_shutdown_timeout, per_connection=with_peer)
