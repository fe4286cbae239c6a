"""progress: GET .../progress on a standalone server holding 10,000 NodeModelStores, the digest
listed by 300 of them, 64 downloading and answering live in 50 ms from fake plugin endpoints on
loopback (HTTPS, worker token checked). Baseline: GET of the artifact itself on the same server.
Target p99 <= 250 ms. A second figure: a node whose plugin answers in 20 s is cut (per node at
2 s, the whole answer bounded at 13 s) and the answer comes without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import pathlib
import socket
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from hypercorn import asyncio as hypercorn_asyncio
from hypercorn import config as hypercorn_config
from starlette import applications, requests, responses, routing

from apiserver.registry import build
from apiserver.storage import sqlite
from bench import _apiserver, result
from certs import authority
from tests.support import apiserver

STORES = 10_000
HOLDERS = 300
DOWNLOADING = 64
REQUESTS = 200
DIGEST = "sha256:" + "5a" * 32
SLOW_DIGEST = "sha256:" + "5b" * 32
SIZE = 10 << 30
ARTIFACT = f"{_apiserver.GROUP}/namespaces/bench/modelartifacts/big"
SLOW_ARTIFACT = f"{_apiserver.GROUP}/namespaces/bench/modelartifacts/slow"


def plugin_app(delay: float, token: str) -> applications.Starlette:
    async def downloads(request: requests.Request) -> responses.Response:
        if request.headers.get("authorization") != f"Bearer {token}":
            return responses.JSONResponse({"message": "no"}, status_code=403)
        await asyncio.sleep(delay)
        return responses.JSONResponse({"downloads": [
            {"digest": d, "downloadedBytes": 7 << 30, "sizeBytes": SIZE, "source": "Hub"}
            for d in (DIGEST, SLOW_DIGEST)]})

    return applications.Starlette(routes=[routing.Route("/model/downloads", downloads)])


def address(node: int) -> str:
    """Each fast node's plugin on its own loopback address, as nodes are separate hosts (one
    connection each, kept alive between requests)."""
    return f"127.0.{1 + node // 250}.{1 + node % 250}"


def _serve(delay: float, token: str, cert: str, key: str, binds: list[str]) -> None:
    cfg = hypercorn_config.Config()
    cfg.bind = binds
    cfg.certfile, cfg.keyfile = cert, key
    cfg.accesslog = None
    cfg.errorlog = None

    async def serve() -> None:
        # the server cuts slow answers at its deadline: hypercorn reports each cut connection
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: None)
        await hypercorn_asyncio.serve(plugin_app(delay, token), cfg)  # type: ignore[arg-type]

    asyncio.run(serve())


@contextlib.contextmanager
def plugin(delay: float, token: str, tls: authority.Files, hosts: list[str]) -> Iterator[int]:
    """A fake plugin HTTPS port on ``hosts``, in a process of its own (so it competes with
    neither the server nor the measuring client for a core's GIL); yields the port."""
    port = apiserver.free_port()
    context = multiprocessing.get_context("spawn")
    process = context.Process(target=_serve, daemon=True, args=(
        delay, token, str(tls.cert), str(tls.key), [f"{h}:{port}" for h in hosts]))
    process.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection((hosts[0], port), timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake plugin did not start") from None
            time.sleep(0.05)
    try:
        yield port
    finally:
        process.terminate()
        process.join(10)


async def _seed(path: pathlib.Path) -> None:
    store = sqlite.Store(path)
    await store.start()
    try:
        registry = build.build(store)
        for name, digest in (("big", DIGEST), ("slow", SLOW_DIGEST)):
            created = await registry.modelartifacts.create({
                "metadata": {"name": name},
                "spec": {"source": {"huggingFace": {"repository": f"org/{name}"}}}},
                namespace="bench")
            created["status"] = {"resolved": {"revision": "c" * 40, "manifestDigest": digest,
                                              "digestSource": "Hub", "fileCount": 9,
                                              "sizeBytes": SIZE}}
            await registry.modelartifacts.update_status(created, namespace="bench", name=name)
        for start in range(0, STORES, 100):
            await asyncio.gather(*(_node(registry, i) for i in range(start, start + 100)))
    finally:
        await store.close()


def _models(i: int) -> list[dict[str, Any]]:
    other = {"digest": f"sha256:{i:064x}", "state": "Ready", "sizeBytes": 1, "downloadedBytes": 1}
    downloading = {"state": "Downloading", "downloadedBytes": 3 << 30}
    if i == 0:  # its plugin answers in 20 s; it downloads only the "slow" artifact's digest
        return [other, {"digest": SLOW_DIGEST, "sizeBytes": SIZE, **downloading}]
    if i > HOLDERS:
        return [other]
    slow = [{"digest": SLOW_DIGEST, "sizeBytes": SIZE, **downloading}] if i <= 3 else []
    if i <= DOWNLOADING:  # nodes 1-64 answer in 50 ms
        state = downloading
    elif i % 7 == 0:
        state = {"state": "Failed", "downloadedBytes": 0, "reason": "SourceUnavailable"}
    else:
        state = {"state": "Ready", "downloadedBytes": SIZE}
    return [other, {"digest": DIGEST, "sizeBytes": SIZE, **state}, *slow]


async def _node(registry: build.Registry, i: int) -> None:
    created = await registry.nodemodelstores.create({"metadata": {"name": f"node-{i:05d}"},
                                                     "spec": {}})
    created["status"] = {"models": _models(i)}
    await registry.nodemodelstores.update_status(created, name=f"node-{i:05d}")


async def _time(server: apiserver.RunningServer, path: str, count: int, warm: int = 5
                ) -> tuple[list[float], dict[str, Any]]:
    async with _apiserver.client(server) as client:
        body: dict[str, Any] = {}
        for _ in range(warm):
            (await client.get(path)).raise_for_status()
        latencies = []
        for _ in range(count):
            began = time.perf_counter()
            response = await client.get(path)
            latencies.append(time.perf_counter() - began)
            response.raise_for_status()
            body = response.json()
        return latencies, body


async def _wait_served(server: apiserver.RunningServer) -> None:
    async with _apiserver.client(server) as client:
        deadline = time.monotonic() + 120
        while (await client.get(ARTIFACT + "/progress")).status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("progress never served")
            await asyncio.sleep(0.1)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-progress-") as tmp:
        base = pathlib.Path(tmp)
        data = base / "api"
        data.mkdir()
        asyncio.run(_seed(data / "store.db"))
        hosts = [address(i) for i in range(DOWNLOADING)]
        tls = authority.ensure(base / "plugin-tls", hosts)
        # the server generates the worker token on its first start: start once to learn it
        with apiserver.running(data, extra_args=["--log-level", "WARNING"]) as first:
            token = first.worker_token
        with plugin(0.05, token, tls, hosts) as fast, \
                plugin(20.0, token, tls, ["127.0.0.1"]) as slow:
            # the slow node sorts first, so it is always among the 64 asked
            nodes = [f"--node=node-{i + 1:05d}=https://{address(i)}:{fast}"
                     for i in range(DOWNLOADING)]
            nodes.append(f"--node=node-00000=https://127.0.0.1:{slow}")
            with apiserver.running(data, extra_args=[
                "--log-level", "WARNING", "--plugin-ca-file", str(tls.ca_cert), *nodes,
            ]) as server:
                asyncio.run(_wait_served(server))
                cpu = _apiserver.cpu_seconds(server.process.pid)
                progress, body = asyncio.run(_time(server, ARTIFACT + "/progress", REQUESTS))
                cpu = (_apiserver.cpu_seconds(server.process.pid) - cpu) / (REQUESTS + 5)
                floor, _ = asyncio.run(_time(server, ARTIFACT, REQUESTS))
                cut, slow_body = asyncio.run(_time(server, SLOW_ARTIFACT + "/progress", 3,
                                                   warm=0))
    p99 = _apiserver.percentile(progress, 0.99) * 1000
    params = {"node_stores": STORES, "holders": HOLDERS, "downloading": DOWNLOADING,
              "plugin_delay_ms": 50, "requests": REQUESTS, "live": body.get("live"),
              "p50_ms": round(_apiserver.percentile(progress, 0.5) * 1000, 1),
              "floor_p99_ms": round(_apiserver.percentile(floor, 0.99) * 1000, 1),
              "server_cpu_ms_per_request": round(cpu * 1000, 1), "target_p99_ms": 250}
    result.report("progress", p99, "ms p99", _apiserver.percentile(floor, 0.99) * 1000,
                  higher_is_better=False, params=params)
    result.report("progress-slow-node", max(cut), "s max", 20.0, higher_is_better=False,
                  params={"slow_node_answers_in_s": 20, "per_node_s": 2, "budget_s": 13,
                          "live": slow_body.get("live"),
                          "downloading": slow_body.get("downloading")})


if __name__ == "__main__":
    main()
