"""The plugin's HTTPS port: ``/metrics``, ``/readyz``, ``/livez``, ``GET /model/downloads`` and
``POST /model/prefetches`` (``prefetchapi``, when the plugin gives its handler).

A small starlette app served by hypercorn over TLS. ``/model/downloads`` is for the worker's
identity only: standalone, the caller's bearer token is compared with the shared one read from
``--downloads-token-file``; in a cluster it is reviewed (``reviews.Reviewer``, a TokenReview) and
admitted when it authenticates ``--worker-user``. With neither the endpoint refuses everyone.
``/model/prefetches`` admits the same identity the same way.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import pathlib
from collections.abc import Awaitable, Callable, Sequence

from hypercorn import config as hypercorn_config
from prometheus_client import exposition, registry
from starlette import applications, requests, responses, routing

from certs import authority
from nodeplugin import reviews
from nodeplugin.materialize import interface
from openapi import plugin, states
from tlsserver import listener

log = logging.getLogger(__name__)

GRACE_SECONDS = 2.0
SSL_SHUTDOWN_SECONDS = 2.0
"""How long closing a served TLS connection waits for the peer's close_notify. asyncio waits
30 s and hypercorn has no setting for it: a scraper that keeps an idle connection would hold a
stop that long after the grace period. Set on the port's own connections only
(``tlsserver.listener``); the plugin's client connections keep asyncio's default."""


def downloads_body(running: Sequence[interface.Progress]) -> plugin.Downloads:
    return plugin.Downloads(downloads=[
        plugin.Download(digest=p.digest, downloadedBytes=p.received_bytes,
                        sizeBytes=p.total_bytes or 0, source=states.HUB)
        for p in running
    ])


def read_token(path: str) -> str | None:
    """The expected bearer token, re-read per request so a rotated file needs no restart."""
    try:
        token = pathlib.Path(path).read_text().strip()
    except OSError as exc:
        log.warning("cannot read the downloads token file: %s", type(exc).__name__)
        return None
    return token or None


def bearer(request: requests.Request) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def _status(code: int, reason: str, message: str) -> responses.JSONResponse:
    """A Kubernetes-style Status body, so API clients read the refusal the usual way."""
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
            "reason": reason, "code": code}
    return responses.JSONResponse(body, status_code=code)


def make_app(
    *,
    metrics: registry.CollectorRegistry,
    ready: Callable[[], str | None],
    running: Callable[[], Sequence[interface.Progress]],
    token_file: str | None,
    reviewer: reviews.Reviewer | None = None,
    worker_user: str = "",
    prefetch: Callable[[requests.Request], Awaitable[responses.Response]] | None = None,
) -> applications.Starlette:
    """``ready`` returns None when ready, else why not; ``running`` lists the attempts;
    ``prefetch`` serves ``POST /model/prefetches`` once the worker is admitted. The token file
    wins over the reviewer when both are given."""

    async def scrape(request: requests.Request) -> responses.Response:
        # Every figure is already in memory (no scrape touches the cache), so collection runs
        # on the event loop, where the state it reads is never changed halfway through.
        body = exposition.generate_latest(metrics)
        return responses.Response(body, media_type=exposition.CONTENT_TYPE_LATEST)

    async def readyz(request: requests.Request) -> responses.Response:
        why = ready()
        if why is not None:
            return responses.PlainTextResponse(f"not ready: {why}\n", status_code=503)
        return responses.PlainTextResponse("ok\n")

    async def livez(request: requests.Request) -> responses.Response:
        return responses.PlainTextResponse("ok\n")

    async def refusal(request: requests.Request) -> responses.Response | None:
        """None when the caller is the worker identity, else the answer refusing it."""
        if token_file is None and (reviewer is None or not worker_user):
            return _status(403, "Forbidden",
                           "downloads are served to the worker identity only, and this plugin "
                           "has neither --downloads-token-file nor --worker-user")
        given = bearer(request)
        if given is None:
            return _status(401, "Unauthorized", "a bearer token is required")
        if token_file is not None:
            expected = await asyncio.to_thread(read_token, token_file)
            if expected is None or not hmac.compare_digest(given.encode(), expected.encode()):
                return _status(403, "Forbidden", "this token may not read the running downloads")
        else:
            assert reviewer is not None
            try:
                user = await reviewer.user_of(given)
            except reviews.ReviewFailed as exc:
                return _status(503, "ServiceUnavailable", f"cannot check the token now: {exc}")
            if user is None:
                return _status(401, "Unauthorized", "the token is not valid for the audience "
                               f"{plugin.AUDIENCE} (the worker's token for this port)")
            if user != worker_user:
                return _status(403, "Forbidden", f'user "{user[:253]}" may not read the running '
                               "downloads (the worker identity only)")
        return None

    async def downloads(request: requests.Request) -> responses.Response:
        return await refusal(request) or responses.JSONResponse(downloads_body(running()))

    routes = [
        routing.Route("/metrics", scrape, methods=["GET"]),
        routing.Route("/readyz", readyz, methods=["GET"]),
        routing.Route("/livez", livez, methods=["GET"]),
        routing.Route(plugin.DOWNLOADS, downloads, methods=["GET"]),
    ]
    if prefetch is not None:
        warm = prefetch

        async def prefetches(request: requests.Request) -> responses.Response:
            return await refusal(request) or await warm(request)

        routes.append(routing.Route(plugin.PREFETCHES, prefetches, methods=["POST"]))
    return applications.Starlette(routes=routes)


def tls_files(
    tls_dir: pathlib.Path, cert: str | None, key: str | None, sans: Sequence[str] = ()
) -> tuple[str, str]:
    """The given certificate and key, or a self-signed pair kept under ``tls_dir``."""
    if cert and key:
        return cert, key
    if cert or key:
        raise ValueError("--tls-cert-file and --tls-private-key-file go together")
    files = authority.ensure(tls_dir, sans)
    return str(files.cert), str(files.key)


def hypercorn_config_for(bind: str, port: int, cert: str, key: str) -> hypercorn_config.Config:
    cfg = hypercorn_config.Config()
    host = f"[{bind}]" if ":" in bind else bind
    cfg.bind = [f"{host}:{port}"]
    cfg.certfile = cert
    cfg.keyfile = key
    cfg.alpn_protocols = ["h2", "http/1.1"]
    cfg.graceful_timeout = GRACE_SECONDS
    cfg.include_server_header = False
    cfg.accesslog = None
    cfg.errorlog = logging.getLogger("hypercorn.error")
    return cfg


async def serve(
    app: applications.Starlette, cfg: hypercorn_config.Config, stop: asyncio.Event
) -> None:
    """Serve until ``stop`` is set. A failure (say, the port is taken) is logged, not raised:
    the CSI socket matters more to the node than its metrics."""
    try:
        context = cfg.create_ssl_context()
        if context is None:
            raise ValueError("the HTTPS port needs --tls-cert-file and --tls-private-key-file")
        await listener.serve(app, cfg, context, shutdown_trigger=stop.wait,
                             ssl_shutdown_timeout=SSL_SHUTDOWN_SECONDS)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("the HTTPS port %s stopped serving", cfg.bind)
