"""progress: GET .../progress on a standalone server holding 10,000 NodeModelStores, the digest
listed by 300 of them, 64 downloading and answering live in 50 ms from fake plugin endpoints on
loopback (HTTPS, worker token checked). Baseline: GET of the artifact itself on the same server.
Target p99 <= 250 ms. The 200 requests of each run in 4 interleaved rounds of 50 (progress,
artifact, progress, artifact ...): the p99s are pooled over all 200, and each round's own p99s
give the per-round ratios and their spread. A second figure: a node whose plugin answers in 20 s
is cut (per node at 2 s, the whole answer bounded at 13 s) and the answer comes without it; it
has no rounds, as its baseline (the plugin's 20 s) is a constant, not measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import pathlib
import socket
import ssl
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import h11
import httpx
import orjson

from apiserver.registry import build
from apiserver.storage import sqlite
from bench import _apiserver, result
from certs import authority
from devkit import admitting
from devkit.harness import apiserver
from openapi import anchors, reasons, sources, states
from openapi import plugin as plugin_api
from openapi.kinds import modelartifact

STORES = 10_000
HOLDERS = 300
DOWNLOADING = 64
REQUESTS = 200
ROUNDS = 4
DIGEST = "sha256:" + "5a" * 32
SLOW_DIGEST = "sha256:" + "5b" * 32
SIZE = 10 << 30
ARTIFACT = f"{_apiserver.GROUP}/namespaces/bench/modelartifacts/big"
SLOW_ARTIFACT = f"{_apiserver.GROUP}/namespaces/bench/modelartifacts/slow"


def address(node: int) -> str:
    """Each fast node's plugin on its own loopback address, as nodes are separate hosts (one
    connection each, kept alive between requests)."""
    return f"127.0.{1 + node // 250}.{1 + node % 250}"


PROCESSES = 4
"""The fast fake plugins are spread over this many processes (node i in process i % 4), so a
wave of 16 requests is answered on both cores, as real plugins answer on their own nodes."""


def _answer(token: str) -> tuple[bytes, bytes]:
    """The body a fake plugin answers with, and the header it expects."""
    body = orjson.dumps({"downloads": [
        plugin_api.Download(digest=d, downloadedBytes=7 << 30, sizeBytes=SIZE, source=states.HUB)
        for d in (DIGEST, SLOW_DIGEST)]})
    return body, f"Bearer {token}".encode()


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float,
                  body: bytes, expected: bytes) -> None:
    """One kept-alive HTTP/1.1 connection (h11), ``GET /model/downloads`` with the token."""
    conn = h11.Connection(h11.SERVER)
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                conn.receive_data(data)
                if not data:
                    return
                continue
            if isinstance(event, h11.Request):
                headers = dict(event.headers)
                ok = event.target == b"/model/downloads" and headers.get(b"authorization") \
                    == expected
                await asyncio.sleep(delay)
                answer = body if ok else b'{"message":"no"}'
                writer.write(conn.send(h11.Response(status_code=200 if ok else 403, headers=[
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(answer)).encode())])) or b"")
                writer.write(conn.send(h11.Data(data=answer)) or b"")
                writer.write(conn.send(h11.EndOfMessage()) or b"")
                await writer.drain()
            elif isinstance(event, h11.EndOfMessage):
                conn.start_next_cycle()
            elif isinstance(event, (h11.ConnectionClosed, h11.PAUSED)) or event is None:
                return
    except (OSError, h11.ProtocolError, asyncio.IncompleteReadError):
        return  # the server cut a slow answer at its deadline
    finally:
        writer.close()


def _serve(delay: float, token: str, cert: str, key: str, hosts: list[str], port: int) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    body, expected = _answer(token)

    async def serve() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: None)
        servers = [await asyncio.start_server(
            lambda r, w: _handle(r, w, delay, body, expected), host, port, ssl=context)
            for host in hosts]
        await asyncio.gather(*(server.serve_forever() for server in servers))

    asyncio.run(serve())


@contextlib.contextmanager
def plugin(delay: float, token: str, tls: authority.Files, hosts: list[str],
           processes: int = 1) -> Iterator[tuple[int, list[int]]]:
    """Fake plugin HTTPS ports on ``hosts`` (one port), in processes of their own (so they
    compete with neither the server nor the measuring client for a core's GIL); yields the
    port and the processes' pids."""
    port = apiserver.free_port()
    context = multiprocessing.get_context("spawn")
    started = [context.Process(target=_serve, daemon=True, args=(
        delay, token, str(tls.cert), str(tls.key), hosts[k::processes], port))
        for k in range(processes)]
    for process in started:
        process.start()
    deadline = time.monotonic() + 30
    for host in hosts[:processes]:
        while True:
            try:
                with socket.create_connection((host, port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the fake plugin did not start") from None
                time.sleep(0.05)
    try:
        yield port, [p.pid for p in started if p.pid is not None]
    finally:
        for process in started:
            process.terminate()
            process.join(10)


async def _seed(path: pathlib.Path) -> None:
    store = sqlite.Store(path)
    await store.start()
    try:
        registry = build.build(store, admission=admitting.standalone())
        for name, digest in (("big", DIGEST), ("slow", SLOW_DIGEST)):
            created = await registry.modelartifacts.create({
                "metadata": {"name": name},
                "spec": {"source": {sources.HUGGING_FACE: {"repository": f"org/{name}"}}}},
                namespace="bench")
            created["status"] = {"resolved": modelartifact.Resolved(
                revision="c" * 40, manifestDigest=digest, digestSource=anchors.DIGEST_FROM_HUB,
                fileCount=9, sizeBytes=SIZE)}
            await registry.modelartifacts.update_status(created, namespace="bench", name=name)
        for start in range(0, STORES, 100):
            await asyncio.gather(*(_node(registry, i) for i in range(start, start + 100)))
    finally:
        await store.close()


def _models(i: int) -> list[dict[str, Any]]:
    other = {"digest": f"sha256:{i:064x}", "state": states.READY, "sizeBytes": 1,
             "downloadedBytes": 1}
    downloading = {"state": states.DOWNLOADING, "downloadedBytes": 3 << 30}
    if i == 0:  # its plugin answers in 20 s; it downloads only the "slow" artifact's digest
        return [other, {"digest": SLOW_DIGEST, "sizeBytes": SIZE, **downloading}]
    if i > HOLDERS:
        return [other]
    slow = [{"digest": SLOW_DIGEST, "sizeBytes": SIZE, **downloading}] if i <= 3 else []
    if i <= DOWNLOADING:  # nodes 1-64 answer in 50 ms
        state = downloading
    elif i % 7 == 0:
        state = {"state": states.FAILED, "downloadedBytes": 0,
                 "reason": reasons.SOURCE_UNAVAILABLE}
    else:
        state = {"state": states.READY, "downloadedBytes": SIZE}
    return [other, {"digest": DIGEST, "sizeBytes": SIZE, **state}, *slow]


async def _node(registry: build.Registry, i: int) -> None:
    created = await registry.nodemodelstores.create({"metadata": {"name": f"node-{i:05d}"},
                                                     "spec": {}})
    created["status"] = {"models": _models(i)}
    await registry.nodemodelstores.update_status(created, name=f"node-{i:05d}")


async def _time(server: apiserver.RunningServer, path: str, count: int, warm: int = 5
                ) -> tuple[list[float], dict[str, Any]]:
    async with _apiserver.client(server) as client:
        for _ in range(warm):
            (await client.get(path)).raise_for_status()
        return await _latencies(client, path, count)


async def _latencies(client: httpx.AsyncClient, path: str, count: int
                     ) -> tuple[list[float], dict[str, Any]]:
    body: dict[str, Any] = {}
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


async def _rounds(server: apiserver.RunningServer, fakes: list[int]) -> tuple[
        list[float], list[float], list[tuple[float, float]], float, float, dict[str, Any]]:
    """``REQUESTS`` progress and artifact GETs, in ``ROUNDS`` interleaved rounds (after 5 warm
    requests of each; one connection for each kind, kept alive, as before): all latencies of
    each, each round's p99s (ms), and the server's and the fake plugins' CPU seconds per
    progress request (its warm ones included, as before)."""
    progress: list[float] = []
    floor: list[float] = []
    rounds: list[tuple[float, float]] = []
    cpu = fake_cpu = 0.0
    body: dict[str, Any] = {}
    share = REQUESTS // ROUNDS
    async with _apiserver.client(server) as ours_client, \
            _apiserver.client(server) as floor_client:
        for client, path in ((ours_client, ARTIFACT + "/progress"), (floor_client, ARTIFACT)):
            began_cpu = _apiserver.cpu_seconds(server.process.pid)
            began_fake = sum(_apiserver.cpu_seconds(pid) for pid in fakes)
            for _ in range(5):
                (await client.get(path)).raise_for_status()
            if client is ours_client:
                cpu += _apiserver.cpu_seconds(server.process.pid) - began_cpu
                fake_cpu += sum(_apiserver.cpu_seconds(pid) for pid in fakes) - began_fake
        for _ in range(ROUNDS):
            began_cpu = _apiserver.cpu_seconds(server.process.pid)
            began_fake = sum(_apiserver.cpu_seconds(pid) for pid in fakes)
            ours, body = await _latencies(ours_client, ARTIFACT + "/progress", share)
            cpu += _apiserver.cpu_seconds(server.process.pid) - began_cpu
            fake_cpu += sum(_apiserver.cpu_seconds(pid) for pid in fakes) - began_fake
            theirs, _ = await _latencies(floor_client, ARTIFACT, share)
            progress += ours
            floor += theirs
            rounds.append((_apiserver.percentile(ours, 0.99) * 1000,
                           _apiserver.percentile(theirs, 0.99) * 1000))
    return progress, floor, rounds, cpu / (REQUESTS + 5), fake_cpu / (REQUESTS + 5), body


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
        with plugin(0.05, token, tls, hosts, PROCESSES) as (fast, fakes), \
                plugin(20.0, token, tls, ["127.0.0.1"]) as (slow, _):
            # the slow node sorts first, so it is always among the 64 asked
            nodes = [f"--node=node-{i + 1:05d}=https://{address(i)}:{fast}"
                     for i in range(DOWNLOADING)]
            nodes.append(f"--node=node-00000=https://127.0.0.1:{slow}")
            with apiserver.running(data, extra_args=[
                "--log-level", "WARNING", "--plugin-ca-file", str(tls.ca_cert), *nodes,
            ]) as server:
                asyncio.run(_wait_served(server))
                progress, floor, rounds, cpu, fake_cpu, body = asyncio.run(
                    _rounds(server, fakes))
                cut, slow_body = asyncio.run(_time(server, SLOW_ARTIFACT + "/progress", 3,
                                                   warm=0))
    p99 = _apiserver.percentile(progress, 0.99) * 1000
    params = {"node_stores": STORES, "holders": HOLDERS, "downloading": DOWNLOADING,
              "plugin_delay_ms": 50, "requests": REQUESTS, "live": body.get("live"),
              "p50_ms": round(_apiserver.percentile(progress, 0.5) * 1000, 1),
              "floor_p99_ms": round(_apiserver.percentile(floor, 0.99) * 1000, 1),
              "server_cpu_ms_per_request": round(cpu * 1000, 1),
              "fake_plugins_cpu_ms_per_request": round(fake_cpu * 1000, 1),
              "target_p99_ms": 250, "rounds": ROUNDS,
              "p99_rounds_ms": [round(a, 1) for a, _ in rounds],
              "floor_p99_rounds_ms": [round(b, 2) for _, b in rounds]}
    result.report("progress", p99, "ms p99", _apiserver.percentile(floor, 0.99) * 1000,
                  higher_is_better=False, params=params, rounds=rounds)
    result.report("progress-slow-node", max(cut), "s max", 20.0, higher_is_better=False,
                  params={"slow_node_answers_in_s": 20, "per_node_s": 2, "budget_s": 13,
                          "live": slow_body.get("live"),
                          "downloading": slow_body.get("downloading")})


if __name__ == "__main__":
    main()
