"""watch-fanout: 1,000 concurrent watchers on modelartifacts, 200 updates; p99 delivery latency
(from just before the writer sends the PATCH to a watcher reading the event) and watchers dropped.

The watchers are spread over several client processes (``bench._watch_client``), each holding raw
HTTP/1.1 streams, so one client's CPU is not what the figure measures. The writer (this process)
stamps each update with its wall-clock send time in an annotation; clients take the receipt time
before parsing. Updates are paced (10 per second) so the figure is the fan-out cost, not a backlog
built on purpose. No baseline: the target is absolute (p99 <= 200 ms, none dropped).
"""

from __future__ import annotations

import asyncio
import sys
import time
import urllib.parse
from typing import Any

import orjson

from bench import _apiserver, result
from devkit.harness import apiserver

WATCHERS = 1000
CLIENTS = 4
UPDATES = 200
INTERVAL = 0.1
ANNOTATION = "bench.gpustack.ai/sent"
READY_TIMEOUT = 90.0
FINISH_TIMEOUT = 60.0
RESULT_LIMIT = 64 * 1024 * 1024
"""A client reports every latency it measured on one line (about 20 bytes each)."""


async def _client(server: apiserver.RunningServer, target: str,
                  count: int) -> asyncio.subprocess.Process:
    host = urllib.parse.urlsplit(server.url).hostname or "127.0.0.1"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench._watch_client", host, str(server.port),
        str(server.ca_file), "-", target, str(count), str(UPDATES),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        limit=RESULT_LIMIT,
    )
    assert process.stdin is not None
    process.stdin.write(server.admin_token.encode() + b"\n")  # not in argv: ps shows argv
    await process.stdin.drain()
    return process


async def _ready(process: asyncio.subprocess.Process) -> None:
    assert process.stdout is not None
    line = await process.stdout.readline()
    if line.strip() != b"ready":
        raise RuntimeError(f"a watch client failed to start: {line!r}")


async def _outcome(process: asyncio.subprocess.Process) -> dict[str, Any]:
    assert process.stdout is not None
    line = await process.stdout.readline()
    await process.wait()
    found: dict[str, Any] = orjson.loads(line) if line.strip() else {}
    return found


async def _run(server: apiserver.RunningServer, storage: str) -> None:
    server_cpu_before = _apiserver.cpu_seconds(server.process.pid)
    async with _apiserver.client(server) as writer:
        created = await writer.post(_apiserver.COLLECTION, json=_apiserver.artifact("fanout"))
        created.raise_for_status()
        start_rv = created.json()["metadata"]["resourceVersion"]
        query = urllib.parse.urlencode({
            "watch": "1", "resourceVersion": start_rv, "timeoutSeconds": "600",
            "fieldSelector": "metadata.name=fanout"})
        target = f"{_apiserver.COLLECTION}?{query}"
        shares = [WATCHERS // CLIENTS + (1 if i < WATCHERS % CLIENTS else 0)
                  for i in range(CLIENTS)]
        clients = [await _client(server, target, share) for share in shares]
        client_pids = []
        try:
            client_pids = [p.pid for p in clients]
            await asyncio.wait_for(asyncio.gather(*(_ready(p) for p in clients)), READY_TIMEOUT)
            outcomes = asyncio.gather(*(_outcome(p) for p in clients))
            await asyncio.sleep(1)  # let every stream settle before the first update
            started = time.perf_counter()
            for _ in range(UPDATES):
                patch = {"metadata": {"annotations": {ANNOTATION: repr(time.time())}}}
                response = await writer.patch(
                    f"{_apiserver.COLLECTION}/fanout", content=orjson.dumps(patch),
                    headers={"Content-Type": "application/merge-patch+json"},
                )  # fmt: skip
                response.raise_for_status()
                await asyncio.sleep(INTERVAL)
            writing = time.perf_counter() - started
            client_cpu = sum(_children_cpu(pid) for pid in client_pids)
            for process in clients:
                assert process.stdin is not None
                process.stdin.close()  # the writer is done: clients wait a little, then report
            results = await asyncio.wait_for(outcomes, FINISH_TIMEOUT)
        finally:
            for process in clients:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
    latencies = [value for found in results for value in found.get("latencies", [])]
    received = [count for found in results for count in found.get("received", [])]
    received += [0] * (WATCHERS - len(received))  # a client that died dropped all of its own
    dropped = sum(1 for count in received if count < UPDATES)
    server_cpu = _apiserver.cpu_seconds(server.process.pid) - server_cpu_before
    p99 = _apiserver.percentile(latencies, 0.99) * 1000
    result.report(
        _apiserver.name("watch-fanout", storage), p99, "ms p99", None, higher_is_better=False,
        params={"storage": storage, "watchers": WATCHERS, "clients": CLIENTS, "updates": UPDATES,
                "dropped": dropped, "delivered": len(latencies), "expected": WATCHERS * UPDATES,
                "p50_ms": round(_apiserver.percentile(latencies, 0.5) * 1000, 2),
                "max_ms": round(max(latencies, default=float("nan")) * 1000, 2),
                "target_p99_ms": 200, "server_cpu_s": round(server_cpu, 1),
                "server_cpu_us_per_event": round(server_cpu / max(1, len(latencies)) * 1e6, 1),
                "client_cpu_s": round(client_cpu, 1), "writing_s": round(writing, 1)},
    )  # fmt: skip
    print(f"  watchers dropped: {dropped}; events delivered: {len(latencies)}/{WATCHERS * UPDATES}")


def _children_cpu(pid: int) -> float:
    try:
        return _apiserver.cpu_seconds(pid)
    except FileNotFoundError:
        return 0.0


def main() -> None:
    for storage in _apiserver.storages():
        with _apiserver.running(storage=storage) as server:
            asyncio.run(_run(server, storage))


if __name__ == "__main__":
    main()
