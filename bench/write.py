"""write: create, update and delete 2,000 ModelArtifacts over HTTP/2, 20 at a time; baseline: the
same operations on the storage layer alone (the same backend in-process, same value sizes).

Figures: p99 create latency (target <= 30 ms on SQLite), with update/delete p99 and throughput in
the params. The 20 writers are Python clients (httpx) sharing the machine's cores with the server,
about as much CPU per operation as the server's own; when ``h2load`` (nghttp2's C client) is
installed the params also carry 3,000 creates from 20 h2load connections of one stream each
(``h2load_*``, names from ``generateName``), the server's latency without that neighbour.
"""

from __future__ import annotations

import asyncio
import pathlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import orjson

from apiserver.storage import interface
from bench import _apiserver, result
from tests.support import apiserver

OBJECTS = 2000
CONCURRENCY = 20
H2LOAD_CREATES = 3000

Timings = dict[str, list[float]]


async def _timed(timings: Timings, op: str, call: Callable[[], Awaitable[object]]) -> object:
    started = time.perf_counter()
    value = await call()
    timings[op].append(time.perf_counter() - started)
    return value


async def _drive(one: Callable[[int, Timings], Awaitable[None]]) -> tuple[Timings, float]:
    timings: Timings = {"create": [], "update": [], "delete": []}
    queue = iter(range(OBJECTS))

    async def worker() -> None:
        for index in queue:
            await one(index, timings)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return timings, time.perf_counter() - started


async def _over_http(server: apiserver.RunningServer) -> tuple[Timings, float]:
    global _server_cpu
    before = _apiserver.cpu_seconds(server.process.pid)
    try:
        return await _http_ops(server)
    finally:
        _server_cpu = _apiserver.cpu_seconds(server.process.pid) - before


_server_cpu = 0.0
"""Server CPU seconds the HTTP run used (reported per operation)."""


async def _http_ops(server: apiserver.RunningServer) -> tuple[Timings, float]:
    async with _apiserver.client(server) as client:
        (await client.get("/readyz")).raise_for_status()

        async def one(index: int, timings: Timings) -> None:
            name = f"w-{index:05d}"
            url = f"{_apiserver.COLLECTION}/{name}"
            body = _apiserver.artifact(name, index)
            created = await _timed(
                timings, "create", lambda: client.post(_apiserver.COLLECTION, json=body)
            )
            obj = _checked(created, 201)
            obj["metadata"]["labels"]["step"] = "updated"
            _checked(await _timed(timings, "update", lambda: client.put(url, json=obj)), 200)
            _checked(await _timed(timings, "delete", lambda: client.delete(url)), 200)

        return await _drive(one)


async def _storage_alone(store: interface.Store) -> tuple[Timings, float]:
    await store.start()
    try:

        async def one(index: int, timings: Timings) -> None:
            key = f"/modelartifacts/{_apiserver.NAMESPACE}/w-{index:05d}"
            value = orjson.dumps(_apiserver.artifact(f"w-{index:05d}", index))
            record = await _timed(timings, "create", lambda: store.create(key, value))
            assert isinstance(record, interface.Record)
            updated = await _timed(
                timings, "update",
                lambda: store.update(key, value + b" ", expected_revision=record.revision),
            )  # fmt: skip
            assert isinstance(updated, interface.Record)
            await _timed(timings, "delete",
                         lambda: store.delete(key, expected_revision=updated.revision))  # fmt: skip

        return await _drive(one)
    finally:
        await store.close()


def _h2load_creates(server: apiserver.RunningServer, directory: pathlib.Path) -> dict[str, float]:
    """Creates from ``CONCURRENCY`` h2load connections, one stream each: latency from h2load's
    per-request log, server CPU from /proc."""
    body = _apiserver.artifact("unused", 1)
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "h-"
    data = directory / "create.json"
    data.write_bytes(orjson.dumps(body))
    log = directory / "h2load.tsv"

    def run(count: int) -> None:
        log.unlink(missing_ok=True)
        subprocess.run(
            ["h2load", "-n", str(count), "-c", str(CONCURRENCY), "-m", "1", "-t", "1",
             "-d", str(data), "-H", "Content-Type: application/json",
             "-H", f"Authorization: Bearer {server.admin_token}", "--log-file", str(log),
             server.url + _apiserver.COLLECTION],
            capture_output=True, timeout=300, check=True,
        )  # fmt: skip

    run(CONCURRENCY * 10)  # warm: connections, caches
    before = _apiserver.cpu_seconds(server.process.pid)
    started = time.perf_counter()
    run(H2LOAD_CREATES)
    seconds = time.perf_counter() - started
    cpu = _apiserver.cpu_seconds(server.process.pid) - before
    rows = [line.split("\t") for line in log.read_text().splitlines() if line]
    failed = [row for row in rows if row[1] != "201"]
    if len(rows) != H2LOAD_CREATES or failed:
        raise RuntimeError(f"h2load creates: {len(rows)} answered, failures {failed[:3]}")
    latencies = [int(row[2]) / 1e6 for row in rows]  # microseconds
    return {
        "h2load_create_p50_ms": _ms(latencies, 0.5),
        "h2load_create_p99_ms": _ms(latencies, 0.99),
        "h2load_ops_per_s": round(len(rows) / seconds),
        "h2load_server_cpu_ms_per_op": round(cpu / len(rows) * 1000, 3),
    }


def _checked(response: object, status: int) -> dict[str, Any]:
    if not isinstance(response, httpx.Response):
        raise TypeError(f"expected a response, got {response!r}")
    if response.status_code != status:
        raise RuntimeError(f"{response.request.method} {response.status_code}: {response.text}")
    body: dict[str, Any] = response.json()
    return body


def _ms(values: list[float], fraction: float) -> float:
    return round(_apiserver.percentile(values, fraction) * 1000, 2)


def main() -> None:
    for storage in _apiserver.storages():
        _one(storage)


def _one(storage: str) -> None:
    client_cpu = time.process_time()
    with _apiserver.running(storage=storage) as server:
        http, http_seconds = asyncio.run(_over_http(server))
    client_cpu = time.process_time() - client_cpu
    c_client: dict[str, float] = {}
    if shutil.which("h2load"):
        with _apiserver.running(storage=storage) as server, \
                tempfile.TemporaryDirectory(prefix="bench-h2load-") as tmp:
            c_client = _h2load_creates(server, pathlib.Path(tmp))
    with tempfile.TemporaryDirectory(prefix="bench-storage-") as tmp, \
            _apiserver.backend(storage, pathlib.Path(tmp)) as flags:
        store = _apiserver.open_store(storage, pathlib.Path(tmp), flags)
        base, base_seconds = asyncio.run(_storage_alone(store))
    params = {
        "storage": storage, "objects": OBJECTS, "concurrency": CONCURRENCY,
        "target_p99_create_ms": 30,
        "ops_per_s": round(3 * OBJECTS / http_seconds),
        "storage_ops_per_s": round(3 * OBJECTS / base_seconds),
        "server_cpu_ms_per_op": round(_server_cpu / (3 * OBJECTS) * 1000, 3),
        "client_cpu_ms_per_op": round(client_cpu / (3 * OBJECTS) * 1000, 3),
        **{f"{op}_p50_ms": _ms(http[op], 0.5) for op in http},
        **{f"{op}_p99_ms": _ms(http[op], 0.99) for op in http},
        **{f"storage_{op}_p99_ms": _ms(base[op], 0.99) for op in base},
        **c_client,
    }  # fmt: skip
    result.report(_apiserver.name("write", storage), _ms(http["create"], 0.99), "ms p99",
                  _ms(base["create"], 0.99), higher_is_better=False, params=params)  # fmt: skip


if __name__ == "__main__":
    main()
