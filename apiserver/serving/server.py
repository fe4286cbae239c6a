"""Serve an ASGI app with hypercorn over TLS (HTTP/2 via ALPN, and HTTP/1.1) until a signal.

SIGTERM and SIGINT stop accepting connections, give open requests (watches) the configured time
to finish, then run the app's lifespan shutdown (storage closes last). TLS is
``apiserver.serving``: the serving certificate is reloaded when its files change, and each request
carries its connection's verified client certificate chain.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from asyncio import sslproto
from collections.abc import Callable

from hypercorn import config as hypercorn_config
from starlette.types import ASGIApp

from apiserver.flags import config
from apiserver.serving import listener, tls
from tlsserver import listener as tls_listener

log = logging.getLogger(__name__)

SSL_SHUTDOWN_SECONDS = 2.0
"""How long closing a TLS connection waits for the peer's close_notify.

asyncio waits 30 s by default and hypercorn offers no setting for it, so the listener passes it
to ``asyncio.start_server`` for the served connections only. A pooled client that keeps
an idle connection without reading (urllib3, informers) never answers, so every such connection
would hold a graceful stop for 30 s after the grace period already ran out.
"""


TLS_READ_BUFFER = 32 * 1024
"""Bytes one TLS connection of this process receives at a time (asyncio's default: 256 KiB).

asyncio gives every TLS connection a receive buffer of ``SSLProtocol.max_size`` bytes, allocated
and zeroed when the connection opens, so it is resident for the connection's whole life. Every
node plugin holds about three connections to the server (its artifact watch, its store's watch,
its writes), so at 256 KiB each the buffers alone were about 0.75 MiB of server memory per node
(docs/performance.md, "Fleet"). A TLS record carries at most 16 KiB, and nothing this process
receives is bulk (request bodies are bounded; its own clients read JSON), so 32 KiB, two records
per receive, costs nothing measurable.
"""


def lean_tls_reads() -> None:
    """Every TLS connection this process opens or accepts from now on gets a receive buffer of
    ``TLS_READ_BUFFER`` bytes. Process-wide (asyncio has no per-server setting), so only the API
    server's serving processes call it, never the node plugin, whose hub downloads are bulk."""
    sslproto.SSLProtocol.max_size = TLS_READ_BUFFER


def hypercorn_settings(settings: config.Settings,
                       listen_fd: int | None = None) -> hypercorn_config.Config:
    """``listen_fd``: serve on this already listening socket (a ``--processes`` child) instead of
    binding ``--bind``/``--port``."""
    cfg = tls_listener.Config()
    host = f"[{settings.bind}]" if ":" in settings.bind else settings.bind
    cfg.bind = [f"fd://{listen_fd}"] if listen_fd is not None else [f"{host}:{settings.port}"]
    cfg.alpn_protocols = ["h2", "http/1.1"]
    cfg.graceful_timeout = settings.shutdown_timeout
    # clients such as informers keep one connection for hours; do not recycle it every 1,000
    cfg.keep_alive_max_requests = 1_000_000_000
    cfg.keep_alive_timeout = 75
    cfg.include_server_header = False
    cfg.accesslog = None
    # hand hypercorn our configured logger so its lines go through one handler, not two
    cfg.errorlog = logging.getLogger("hypercorn.error")
    cfg.loglevel = settings.log_level
    return cfg


def contexts(settings: config.Settings) -> tls.ServingContexts:
    """The TLS contexts for ``--tls-cert-file`` / ``--tls-private-key-file`` (reloaded)."""
    return tls.ServingContexts(settings.tls_cert_file, settings.tls_private_key_file)


async def serve(
    app: ASGIApp,
    settings: config.Settings,
    serving: tls.ServingContexts,
    *,
    on_stop: Callable[[], None] | None = None,
    listen_fd: int | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT; ``on_stop`` runs first (the app ends its open streams)."""
    lean_tls_reads()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _stopper(stop, signum, on_stop))
    try:
        await listener.serve(app, hypercorn_settings(settings, listen_fd), serving,
                             shutdown_trigger=stop.wait,
                             ssl_shutdown_timeout=SSL_SHUTDOWN_SECONDS)
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    log.info("stopped")


def _stopper(
    stop: asyncio.Event, signum: signal.Signals, on_stop: Callable[[], None] | None
) -> Callable[[], None]:
    def handler() -> None:
        log.info("received %s, shutting down", signum.name)
        if on_stop is not None:
            on_stop()
        stop.set()

    return handler
