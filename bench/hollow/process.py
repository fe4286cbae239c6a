"""One process of hollow nodes: their plugins' API side, and their HTTPS port.

``run`` is the process's body (spawned by ``fleet.Fleet``): once told to, it starts its nodes
a few at a time (as a fleet's plugins come up over a while, not in one instant); it serves every
node's HTTPS port on the node's own loopback address through the plugin's own app
(``nodeplugin.serve.make_app``: the worker's token checked, ``GET /model/downloads`` answered from
the node's running downloads); and it answers the scenario's commands on a pipe:

- ``("go",)``: start the nodes (a few at a time);
- ``("ready",)``: how many of its nodes are synced and wrote their first status;
- ``("start", [(node, digest, size, delay, seconds), ...])``: begin downloads after ``delay``;
- ``("counts",)``: what its nodes counted (``node.Counts``, summed; lags and publications
  listed), the reporters' writes and the nodes' memory;
- ``("stop",)``: stop everything and exit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import pathlib
import resource
import ssl
from multiprocessing import connection
from typing import Any

from hypercorn import asyncio as hypercorn_asyncio
from hypercorn import config as hypercorn_config
from prometheus_client import registry

from bench.hollow import node as hollow
from nodeplugin import serve

START_BATCH = 5
START_PAUSE = 1.0
"""Each process starts 5 nodes a second (a DaemonSet's plugins restart over a while)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Spec:
    name: str
    kubeconfig: str
    address: str
    holds: list[tuple[str, int]]


@dataclasses.dataclass(frozen=True, slots=True)
class Setup:
    nodes: list[Spec]
    namespace: str
    port: int
    cert: str
    key: str
    token_file: str


class _ByAddress:
    """The ASGI app of each node's HTTPS port, picked by the local address the request came to."""

    def __init__(self, apps: dict[str, Any]) -> None:
        self._apps = apps

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        app = self._apps.get((scope.get("server") or ("",))[0])
        if app is None:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)


def run(setup: Setup, pipe: connection.Connection) -> None:
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(_main(setup, pipe))


def _quiet_tls(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The server closes its connection to a node's port after a progress read; hypercorn then
    logs the TLS close it did not expect (the plugin's own port, ``tlsserver``, handles it)."""
    if not isinstance(context.get("exception"), ssl.SSLError):
        loop.default_exception_handler(context)


async def _main(setup: Setup, pipe: connection.Connection) -> None:
    asyncio.get_running_loop().set_exception_handler(_quiet_tls)
    nodes = [hollow.HollowNode(spec.name, pathlib.Path(spec.kubeconfig),
                               namespace=setup.namespace) for spec in setup.nodes]
    for spec, one in zip(setup.nodes, nodes, strict=True):
        for digest, size in spec.holds:
            one.disk.hold(digest, size)
    apps = {spec.address: serve.make_app(metrics=registry.CollectorRegistry(),
                                         ready=lambda: None, running=one.disk.running,
                                         token_file=setup.token_file)
            for spec, one in zip(setup.nodes, nodes, strict=True)}
    config = hypercorn_config.Config()
    config.bind = sorted({f"{spec.address}:{setup.port}" for spec in setup.nodes})
    config.certfile, config.keyfile = setup.cert, setup.key
    config.loglevel = "WARNING"
    config.accesslog = None
    stopping = asyncio.Event()
    server = asyncio.create_task(hypercorn_asyncio.serve(
        _ByAddress(apps), config, shutdown_trigger=stopping.wait))
    starting: asyncio.Task[None] | None = None
    loop = asyncio.get_running_loop()
    while True:
        command = await loop.run_in_executor(None, pipe.recv)
        what = command[0]
        if what == "go":
            starting = asyncio.create_task(_start(nodes))
            pipe.send(len(nodes))
        elif what == "ready":
            pipe.send(sum(1 for one in nodes if one.ready))
        elif what == "start":
            for index, digest, size, delay, seconds in command[1]:
                loop.call_later(delay, nodes[index].disk.start, digest, size, seconds)
            pipe.send(len(command[1]))
        elif what == "counts":
            pipe.send(_counts(nodes))
        elif what == "stop":
            break
    if starting is not None:
        starting.cancel()
    await asyncio.gather(*(one.stop() for one in nodes), return_exceptions=True)
    stopping.set()
    await asyncio.gather(server, return_exceptions=True)
    pipe.send("stopped")


async def _start(nodes: list[hollow.HollowNode]) -> None:
    for first in range(0, len(nodes), START_BATCH):
        for one in nodes[first:first + START_BATCH]:
            one.start()
        await asyncio.sleep(START_PAUSE)


def _counts(nodes: list[hollow.HollowNode]) -> dict[str, Any]:
    """What the nodes counted since the last call (each call starts the counts afresh)."""
    total: dict[str, Any] = {"artifact_events": 0, "store_events": 0, "bookmarks": 0,
                             "relists": 0, "writes": 0,
                             "progress_writes": 0, "lags": [], "published": []}
    for one in nodes:
        counts = one.counts
        for key in ("artifact_events", "store_events", "bookmarks", "relists"):
            total[key] += getattr(counts, key)
            setattr(counts, key, 0)
        total["writes"] += one.reporter.writes - counts.writes_seen
        total["progress_writes"] += one.reporter.progress_writes - counts.progress_writes_seen
        counts.writes_seen, counts.progress_writes_seen = (one.reporter.writes,
                                                           one.reporter.progress_writes)
        total["lags"].extend(counts.lags)
        total["published"].extend(counts.published)
        counts.lags = []
        counts.published = []
    total["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return total
