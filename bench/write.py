"""write: create, update and delete 2,000 ModelArtifacts over HTTP/2, 20 writers at a time;
baseline: the same operations on the storage layer alone (the same backend in-process).

The figure: p99 create latency (target <= 30 ms on SQLite) of 20 writers that are h2load clients
(nghttp2's C load generator, as ``get`` and ``get-replicas`` measure reads), each with one request
in flight: 2,000 creates, then a merge-patch update and a delete of each created object, phase
after phase; every phase's p50, p99, rate and server CPU per operation are in the params
(``h2load_*``). Three rounds, each on a fresh server, interleaved with three rounds of the store
alone (writers, store, writers, store ...); the figure and its baseline pool every round's
creates, and the per-round ratios show the spread.

The same 2,000 x create/update/delete also run from 20 Python writers (httpx, HTTP/2 over TLS,
one connection, one event loop; ``python_*`` in the params). That client costs about as much CPU
per operation as the server and runs on one thread, so it saturates first: at about 1 ms of
client CPU per operation its 20 writers cannot see less than about 20 ms on average whatever the
server does. Without h2load those figures are the headline (``writers`` in the params says
which).
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
from devkit.harness import apiserver

OBJECTS = 2000
CONCURRENCY = 20
ROUNDS = 3

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
        _server_cpu += _apiserver.cpu_seconds(server.process.pid) - before


_server_cpu = 0.0
"""Server CPU seconds the Python writers' runs used (reported per operation)."""


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


class H2loadRun:
    """Latencies, server CPU seconds and wall seconds of each h2load phase."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.timings: Timings = {}
        self.cpu: dict[str, float] = {}
        self.seconds: dict[str, float] = {}

    def phase(self, name: str, run: Callable[[], list[float]]) -> None:
        before, started = _apiserver.cpu_seconds(self.pid), time.perf_counter()
        self.timings[name] = run()
        self.seconds[name] = time.perf_counter() - started
        self.cpu[name] = _apiserver.cpu_seconds(self.pid) - before

    @staticmethod
    def pooled(runs: list[H2loadRun]) -> dict[str, float]:
        """Every phase's p50 and p99 over the latencies of all ``runs``, its rate and server CPU
        per operation over their sums."""
        found: dict[str, float] = {}
        for op in runs[0].timings:
            latencies = [value for run in runs for value in run.timings[op]]
            seconds = sum(run.seconds[op] for run in runs)
            cpu = sum(run.cpu[op] for run in runs)
            found[f"h2load_{op}_p50_ms"] = _ms(latencies, 0.5)
            found[f"h2load_{op}_p99_ms"] = _ms(latencies, 0.99)
            found[f"h2load_{op}_ops_per_s"] = round(len(latencies) / seconds)
            found[f"h2load_{op}_server_cpu_ms"] = round(cpu / len(latencies) * 1000, 3)
        return found


def _h2load_writes(server: apiserver.RunningServer, directory: pathlib.Path) -> H2loadRun:
    """``OBJECTS`` creates, merge-patch updates and deletes from ``CONCURRENCY`` h2load writers,
    one request in flight each, phase after phase.

    Creates come from one h2load of ``CONCURRENCY`` connections (names from ``generateName``);
    updates and deletes from ``CONCURRENCY`` h2load processes of one connection each, every one
    walking its own share of the created names (one h2load's connections would all start at the
    first URI of a list)."""
    auth = ["-H", f"Authorization: Bearer {server.admin_token}"]
    json_body = ["-H", "Content-Type: application/json", *auth]
    collection = server.url + _apiserver.COLLECTION
    warm = _create_body(directory, "warm")  # connections, caches
    _h2load(directory, "warm", 10 * CONCURRENCY, CONCURRENCY,
            ["-d", str(warm), *json_body, collection], 201)  # fmt: skip
    run = H2loadRun(server.process.pid)
    created = _create_body(directory, "measured")
    run.phase("create", lambda: _h2load(directory, "create", OBJECTS, CONCURRENCY,
                                        ["-d", str(created), *json_body, collection], 201))
    with server.client() as client:
        listed = client.get(_apiserver.COLLECTION, params={"labelSelector": "phase=measured"})
        listed.raise_for_status()
    names = sorted(item["metadata"]["name"] for item in listed.json()["items"])
    if len(names) != OBJECTS:
        raise RuntimeError(f"h2load creates: {len(names)} objects listed, {OBJECTS} expected")
    patch = directory / "patch.json"
    patch.write_bytes(b'{"metadata":{"labels":{"step":"updated"}}}')
    shares = [[f"{collection}/{name}" for name in names[i::CONCURRENCY]]
              for i in range(CONCURRENCY)]  # fmt: skip
    merge = ["-d", str(patch), "-H", ":method: PATCH",
             "-H", "Content-Type: application/merge-patch+json", *auth]  # fmt: skip
    run.phase("update", lambda: _h2load_each(directory, "update", shares, merge, 200))
    run.phase("delete", lambda: _h2load_each(directory, "delete", shares,
                                             ["-H", ":method: DELETE", *auth], 200))
    return run


def _create_body(directory: pathlib.Path, phase: str) -> pathlib.Path:
    body = _apiserver.artifact("unused", 1)
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "h-"
    body["metadata"]["labels"]["phase"] = phase
    path = directory / f"create-{phase}.json"
    path.write_bytes(orjson.dumps(body))
    return path


def _h2load_each(directory: pathlib.Path, phase: str, shares: list[list[str]],
                 args: list[str], status: int) -> list[float]:
    """One h2load of one connection per share of URIs, all at once; every latency."""
    processes = []
    for index, uris in enumerate(shares):
        listing = directory / f"{phase}-{index}.uris"
        listing.write_text("".join(f"{uri}\n" for uri in uris))
        processes.append(_start_h2load(directory, f"{phase}-{index}", len(uris), 1,
                                       [*args, "-i", str(listing)]))  # fmt: skip
    latencies: list[float] = []
    for index, (process, uris) in enumerate(zip(processes, shares, strict=True)):
        latencies += _finish_h2load(directory, f"{phase}-{index}", process, len(uris), status)
    return latencies


def _h2load(directory: pathlib.Path, phase: str, count: int, connections: int, args: list[str],
            status: int) -> list[float]:
    process = _start_h2load(directory, phase, count, connections, args)
    return _finish_h2load(directory, phase, process, count, status)


def _start_h2load(directory: pathlib.Path, phase: str, count: int, connections: int,
                  args: list[str]) -> subprocess.Popen[bytes]:
    log = directory / f"{phase}.tsv"
    log.unlink(missing_ok=True)
    return subprocess.Popen(
        ["h2load", "-n", str(count), "-c", str(connections), "-m", "1", "-t", "1",
         "--log-file", str(log), *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip


def _finish_h2load(directory: pathlib.Path, phase: str, process: subprocess.Popen[bytes],
                   count: int, status: int) -> list[float]:
    """The latencies (seconds) of a finished h2load whose every request answered ``status``."""
    out, _ = process.communicate(timeout=300)
    log = directory / f"{phase}.tsv"
    rows = [line.split("\t") for line in log.read_text().splitlines() if line]
    failed = [row for row in rows if row[1] != str(status)]
    if process.returncode or len(rows) != count or failed:
        raise RuntimeError(f"h2load {phase}: {len(rows)} of {count} answered, failures"
                           f" {failed[:3]}\n{out.decode(errors='replace')[-1000:]}")
    return [int(row[2]) / 1e6 for row in rows]  # microseconds


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


def _python_round(storage: str) -> tuple[Timings, float, float]:
    """The Python writers on a fresh server: timings, wall seconds, client CPU seconds."""
    client_cpu = time.process_time()
    with _apiserver.running(storage=storage) as server:
        http, seconds = asyncio.run(_over_http(server))
    return http, seconds, time.process_time() - client_cpu


def _h2load_round(storage: str) -> H2loadRun:
    with _apiserver.running(storage=storage) as server, \
            tempfile.TemporaryDirectory(prefix="bench-h2load-") as tmp:
        return _h2load_writes(server, pathlib.Path(tmp))


def _storage_round(storage: str) -> tuple[Timings, float]:
    with tempfile.TemporaryDirectory(prefix="bench-storage-") as tmp, \
            _apiserver.backend(storage, pathlib.Path(tmp)) as flags:
        store = _apiserver.open_store(storage, pathlib.Path(tmp), flags)
        return asyncio.run(_storage_alone(store))


def _pooled(runs: list[Timings]) -> Timings:
    return {op: [value for run in runs for value in run[op]] for op in runs[0]}


def _one(storage: str) -> None:
    """``ROUNDS`` interleaved rounds of the writers (h2load, or Python without it) and the
    store alone, each on a fresh server and store; the Python writers once more beside them
    when h2load leads."""
    h2load = shutil.which("h2load") is not None
    subject: list[Timings] = []
    base: list[Timings] = []
    base_seconds = 0.0
    c_runs: list[H2loadRun] = []
    python: list[tuple[Timings, float, float]] = []
    for _ in range(ROUNDS):
        if h2load:
            c_runs.append(_h2load_round(storage))
            subject.append(c_runs[-1].timings)
        else:
            python.append(_python_round(storage))
            subject.append(python[-1][0])
        timings, seconds = _storage_round(storage)
        base.append(timings)
        base_seconds += seconds
    if h2load:
        python.append(_python_round(storage))
    http = _pooled([run[0] for run in python])
    http_seconds = sum(run[1] for run in python)
    client_cpu = sum(run[2] for run in python)
    pooled_base = _pooled(base)
    params: dict[str, Any] = {
        "storage": storage, "objects": OBJECTS, "concurrency": CONCURRENCY, "rounds": ROUNDS,
        "target_p99_create_ms": 30,
        "writers": "h2load" if h2load else "python (h2load not installed)",
        **(H2loadRun.pooled(c_runs) if c_runs else {}),
        "round_create_p99_ms": [_ms(run["create"], 0.99) for run in subject],
        "python_ops_per_s": round(3 * OBJECTS * len(python) / http_seconds),
        "python_server_cpu_ms_per_op": round(
            _server_cpu / (3 * OBJECTS * len(python)) * 1000, 3),
        "python_client_cpu_ms_per_op": round(
            client_cpu / (3 * OBJECTS * len(python)) * 1000, 3),
        **{f"python_{op}_p50_ms": _ms(http[op], 0.5) for op in http},
        **{f"python_{op}_p99_ms": _ms(http[op], 0.99) for op in http},
        "storage_ops_per_s": round(3 * OBJECTS * ROUNDS / base_seconds),
        **{f"storage_{op}_p99_ms": _ms(pooled_base[op], 0.99) for op in pooled_base},
    }  # fmt: skip
    result.report(_apiserver.name("write", storage), _ms(_pooled(subject)["create"], 0.99),
                  "ms p99", _ms(pooled_base["create"], 0.99), higher_is_better=False,
                  params=params,
                  rounds=[(_ms(s["create"], 0.99), _ms(b["create"], 0.99))
                          for s, b in zip(subject, base, strict=True)])  # fmt: skip
    if c_runs:
        print(f"  h2load writers: update p99 {params['h2load_update_p99_ms']} ms, delete p99"
              f" {params['h2load_delete_p99_ms']} ms, create p99 per round"
              f" {params['round_create_p99_ms']}; python writers: create p99"
              f" {params['python_create_p99_ms']} ms at {params['python_ops_per_s']} ops/s"
              f" (client {params['python_client_cpu_ms_per_op']} ms of CPU per op)")


if __name__ == "__main__":
    main()
