"""watch-fanout: 1,000 concurrent watchers on modelartifacts, 200 updates; p99 delivery latency
(from just before the PATCH is sent to the watcher reading the event) and watchers dropped.

Watchers share HTTP/2 connections 50 to a connection (hypercorn allows 100 streams each).
Updates are paced (10 per second) so the figure is the fan-out cost, not a backlog built on
purpose. No baseline: the target is absolute (p99 <= 200 ms, none dropped).
"""

from __future__ import annotations

import asyncio
import time

import orjson

from bench import _apiserver, result
from tests.support import apiserver

WATCHERS = 1000
PER_CONNECTION = 50
UPDATES = 200
INTERVAL = 0.1
ANNOTATION = "bench.gpustack.ai/sent"


async def _run(server: apiserver.RunningServer) -> None:
    server_cpu_before = _apiserver.cpu_seconds(server.process.pid)
    client_cpu_before = time.process_time()
    async with _apiserver.client(server) as writer:
        created = await writer.post(_apiserver.COLLECTION, json=_apiserver.artifact("fanout"))
        created.raise_for_status()
        start_rv = created.json()["metadata"]["resourceVersion"]
        connections = [_apiserver.client(server) for _ in range(WATCHERS // PER_CONNECTION)]
        latencies: list[float] = []
        received = [0] * WATCHERS
        ready = asyncio.Semaphore(0)

        async def watch(index: int) -> None:
            client = connections[index // PER_CONNECTION]
            params = {"watch": "1", "resourceVersion": start_rv, "timeoutSeconds": "600",
                      "fieldSelector": "metadata.name=fanout"}  # fmt: skip
            async with client.stream("GET", _apiserver.COLLECTION, params=params) as response:
                response.raise_for_status()
                ready.release()
                async for line in response.aiter_lines():
                    if not line:
                        continue
                    event = orjson.loads(line)
                    sent = event["object"]["metadata"].get("annotations", {}).get(ANNOTATION)
                    if event["type"] == "MODIFIED" and sent:
                        latencies.append(time.time() - float(sent))
                        received[index] += 1
                        if received[index] == UPDATES:
                            return

        tasks = [asyncio.create_task(watch(i)) for i in range(WATCHERS)]
        try:
            for _ in range(WATCHERS):
                await asyncio.wait_for(ready.acquire(), 60)
            await asyncio.sleep(1)  # let every stream settle before the first update
            for _ in range(UPDATES):
                patch = {"metadata": {"annotations": {ANNOTATION: repr(time.time())}}}
                response = await writer.patch(
                    f"{_apiserver.COLLECTION}/fanout", content=orjson.dumps(patch),
                    headers={"Content-Type": "application/merge-patch+json"},
                )  # fmt: skip
                response.raise_for_status()
                await asyncio.sleep(INTERVAL)
            await asyncio.wait(tasks, timeout=60)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for client in connections:
                await client.aclose()
    dropped = sum(1 for count in received if count < UPDATES)
    server_cpu = _apiserver.cpu_seconds(server.process.pid) - server_cpu_before
    p99 = _apiserver.percentile(latencies, 0.99) * 1000
    result.report(
        "watch-fanout", p99, "ms p99", None, higher_is_better=False,
        params={"watchers": WATCHERS, "updates": UPDATES, "dropped": dropped,
                "delivered": len(latencies), "expected": WATCHERS * UPDATES,
                "p50_ms": round(_apiserver.percentile(latencies, 0.5) * 1000, 2),
                "target_p99_ms": 200, "server_cpu_s": round(server_cpu, 1),
                "client_cpu_s": round(time.process_time() - client_cpu_before, 1)},
    )  # fmt: skip
    print(f"  watchers dropped: {dropped}; events delivered: {len(latencies)}/{WATCHERS * UPDATES}")


def main() -> None:
    with _apiserver.running() as server:
        asyncio.run(_run(server))


if __name__ == "__main__":
    main()
