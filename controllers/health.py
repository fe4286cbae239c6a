"""``python -m controllers --health-port N``: ``/readyz``, ``/livez`` and ``/metrics`` over plain
HTTP, for a kubelet probe and a scraper (as controller-runtime's probe and metrics ports are).

``/readyz`` answers ``ok`` once the worker identity is learned (the controllers run); before, 503
with the reason (``[-]worker-identity failed: ...``). ``/livez`` answers ``ok`` while the process
serves. ``/metrics`` has the identity's attempts and the process's own figures. Nothing here
carries a secret.
"""

from __future__ import annotations

import asyncio
import logging

import prometheus_client
from hypercorn import asyncio as hypercorn_asyncio
from hypercorn import config as hypercorn_config
from prometheus_client import exposition, registry
from starlette import applications, requests, responses, routing

from controllers.runtime import identity

log = logging.getLogger(__name__)


def make_app(learning: identity.Learning) -> applications.Starlette:
    metrics = registry.CollectorRegistry(auto_describe=True)
    prometheus_client.ProcessCollector(registry=metrics)
    metrics.register(learning)

    async def readyz(request: requests.Request) -> responses.Response:
        why = learning.failing()
        if not why:
            return responses.PlainTextResponse("ok")
        return responses.PlainTextResponse(
            f"[+]ping ok\n[-]{learning.name} failed: {why}\nreadyz check failed\n",
            status_code=503)

    async def livez(request: requests.Request) -> responses.Response:
        return responses.PlainTextResponse("ok")

    async def scrape(request: requests.Request) -> responses.Response:
        return responses.Response(exposition.generate_latest(metrics),
                                  media_type=exposition.CONTENT_TYPE_LATEST)

    return applications.Starlette(routes=[
        routing.Route("/readyz", readyz, methods=["GET"]),
        routing.Route("/livez", livez, methods=["GET"]),
        routing.Route("/metrics", scrape, methods=["GET"]),
    ])


async def serve(learning: identity.Learning, address: str, port: int,
                stop: asyncio.Event) -> None:
    """Serve the port until ``stop`` is set."""
    config = hypercorn_config.Config()
    host = f"[{address}]" if ":" in address else address
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    log.info("serving /readyz, /livez and /metrics on %s:%d", address, port)
    await hypercorn_asyncio.serve(make_app(learning), config,  # type: ignore[arg-type]
                                  shutdown_trigger=stop.wait)
