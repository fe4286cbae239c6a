"""list: LIST 10,000 ModelArtifacts over HTTP/2, in pages of 500 and in one unpaged request;
baseline: encoding the same objects with orjson in-process (the cost no server can avoid).

On etcd, the unpaged list is measured twice: consistent (no resourceVersion: read from etcd)
and with resourceVersion=0 (served by the watch cache, ``list-cache-etcd``). The objects are
seeded in-process through the registry before the server starts. Each of the seven rounds runs
the requests and then the baseline's encoding (interleaved), and the per-round ratios show the
spread.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import httpx
import orjson

from bench import _apiserver, result
from devkit.harness import apiserver

OBJECTS = 10_000
PAGE = 500
RUNS = 7


async def _paged(client: httpx.AsyncClient) -> tuple[float, list[dict[str, Any]]]:
    started = time.perf_counter()
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        params = {"limit": str(PAGE), **({"continue": token} if token else {})}
        response = await client.get(_apiserver.COLLECTION, params=params)
        response.raise_for_status()
        page = orjson.loads(response.content)
        items += page["items"]
        token = page["metadata"].get("continue", "")
        if not token:
            return time.perf_counter() - started, items


async def _unpaged(client: httpx.AsyncClient, *, cached: bool = False) -> tuple[float, bytes]:
    started = time.perf_counter()
    params = {"resourceVersion": "0"} if cached else {}
    response = await client.get(_apiserver.COLLECTION, params=params)
    response.raise_for_status()
    return time.perf_counter() - started, response.content


def _encode_seconds(listed: dict[str, Any]) -> float:
    started = time.perf_counter()
    orjson.dumps(listed)
    return time.perf_counter() - started


async def _run(server: apiserver.RunningServer, storage: str) -> None:
    async with _apiserver.client(server) as client:
        _, warm = await _unpaged(client)  # warm caches on both sides
        listed = orjson.loads(warm)
        if len(listed["items"]) != OBJECTS:
            raise RuntimeError(f"unpaged list returned {len(listed['items'])} of {OBJECTS}")
        unpaged: list[float] = []
        cached: list[float] = []
        paged: list[float] = []
        encode: list[float] = []
        body = b""
        for _ in range(RUNS):  # interleaved: server, baseline, server ...
            seconds, body = await _unpaged(client)
            unpaged.append(seconds)
            encode.append(_encode_seconds(listed))
            if storage != "sqlite":
                seconds, from_cache = await _unpaged(client, cached=True)
                if len(orjson.loads(from_cache)["items"]) != OBJECTS:
                    raise RuntimeError("the cached list is incomplete")
                cached.append(seconds)
            seconds, items = await _paged(client)
            paged.append(seconds)
            if len(items) != OBJECTS:
                raise RuntimeError(f"paged list returned {len(items)} of {OBJECTS}")
    if len(orjson.loads(body)["items"]) != OBJECTS:
        raise RuntimeError("the last unpaged list is incomplete")
    baseline = statistics.median(encode) * 1000
    params = {"storage": storage, "objects": OBJECTS, "runs": RUNS, "bytes": len(body),
              "target_p50_ms": 250}  # fmt: skip

    def rounds(values: list[float]) -> list[tuple[float, float]]:
        return [(v * 1000, e * 1000) for v, e in zip(values, encode, strict=True)]

    result.report(_apiserver.name("list-unpaged", storage), statistics.median(unpaged) * 1000,
                  "ms p50", baseline, higher_is_better=False, params=params,
                  rounds=rounds(unpaged))  # fmt: skip
    if cached:
        result.report(_apiserver.name("list-cache", storage), statistics.median(cached) * 1000,
                      "ms p50", baseline, higher_is_better=False,
                      params={**params, "resourceVersion": "0"}, rounds=rounds(cached))
    result.report(_apiserver.name("list-paged", storage), statistics.median(paged) * 1000,
                  "ms p50", baseline, higher_is_better=False,
                  params={**params, "page": PAGE}, rounds=rounds(paged))  # fmt: skip


def main() -> None:
    for storage in _apiserver.storages():
        with _apiserver.running(seed=OBJECTS, storage=storage) as server:
            asyncio.run(_run(server, storage))


if __name__ == "__main__":
    main()
