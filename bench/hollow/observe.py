"""What the scenario watches from outside the fleet: the server process, its metrics, the
artifact writes every watcher receives, the artifacts' node counts as a client reads them, a
tenant, and the touches whose arrival times give watch lag."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from bench import _apiserver
from bench.hollow import node as hollow
from devkit.harness import apiserver
from openapi.kinds import modelartifact

GROUP = _apiserver.GROUP
METRIC = "gpustack_model_manager_apiserver_request_duration_seconds_count"
WRITES = ("create", "update", "patch", "delete")


def rss_mib(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Sampler:
    """RSS of each watched process (the server replicas, etcd), sampled every ``every`` seconds;
    ``rss[pid]`` holds the samples since the scenario last cleared it."""

    def __init__(self, pids: list[int], every: float = 2.0) -> None:
        self.pids = pids
        self.every = every
        self.rss: dict[int, list[float]] = {pid: [] for pid in pids}

    def clear(self) -> None:
        self.rss = {pid: [] for pid in self.pids}

    def peak(self, pid: int) -> float:
        return max(self.rss[pid], default=rss_mib(pid))

    async def run(self) -> None:
        while True:
            for pid in self.pids:
                with contextlib.suppress(OSError):
                    self.rss[pid].append(rss_mib(pid))
            await asyncio.sleep(self.every)


async def writes_by_kind(client: httpx.AsyncClient) -> dict[str, float]:
    """``verb resource`` -> requests so far, for the writing verbs (``/metrics``)."""
    text = (await client.get("/metrics")).text
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(METRIC + "{"):
            continue
        labels, _, value = line[len(METRIC) + 1:].rpartition("} ")
        parts = dict(part.split("=", 1) for part in labels.split(","))
        verb = parts.get("verb", "").strip('"')
        if verb in WRITES:
            key = f"{verb} {parts.get('resource', '').strip(chr(34))}"
            found[key] = found.get(key, 0.0) + float(value)
    return found


async def watch_lines(client: httpx.AsyncClient, path: str, params: dict[str, str]
                      ) -> AsyncIterator[dict[str, Any]]:
    async with client.stream("GET", path, params={**params, "watch": "true"},
                             timeout=httpx.Timeout(60, read=None)) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line:
                yield orjson.loads(line)


class ArtifactEvents:
    """How many artifact writes every watcher of the artifacts received (a watch of them all,
    as ``kubectl get -w`` would keep): the scenario's touches and any other write."""

    def __init__(self) -> None:
        self.events = 0

    async def run(self, client: httpx.AsyncClient) -> None:
        listed = (await client.get(f"{GROUP}/modelartifacts", params={"limit": "1"})).json()
        version = listed["metadata"]["resourceVersion"]
        while True:
            async for event in watch_lines(client, f"{GROUP}/modelartifacts",
                                           {"resourceVersion": version,
                                            "allowWatchBookmarks": "true"}):
                obj = event["object"]
                version = obj.get("metadata", {}).get("resourceVersion", version)
                if event["type"] in ("ADDED", "MODIFIED"):
                    self.events += 1


class Aggregates:
    """Some artifacts' ``status.nodes.ready`` as a client reads it, with when it was seen: the
    counts are computed when read, so no watch event carries their change; one GET every
    ``every / len(keys)`` seconds, the artifacts in turn, so each is read every ``every``
    seconds and a latency measured from these reads is at most that much late."""

    def __init__(self, keys: list[tuple[str, str]], every: float = 1.0) -> None:
        self.seen: dict[str, list[tuple[float, int]]] = {}
        self.reads = 0
        self._keys = keys
        self._every = every

    async def run(self, client: httpx.AsyncClient) -> None:
        pause = self._every / max(1, len(self._keys))
        while True:
            await self._read(client, self._keys[self.reads % len(self._keys)])
            await asyncio.sleep(pause)

    async def read_each(self, client: httpx.AsyncClient) -> None:
        """One read of every artifact: where the counts stand now."""
        for key in self._keys:
            await self._read(client, key)

    async def _read(self, client: httpx.AsyncClient, key: tuple[str, str]) -> None:
        namespace, name = key
        response = await client.get(f"{GROUP}/namespaces/{namespace}/modelartifacts/{name}")
        if response.status_code == 200:
            self._take(response.json())
        self.reads += 1

    def _take(self, obj: dict[str, Any]) -> None:
        digest, _ = modelartifact.hub_digest(obj)
        nodes = (obj.get("status") or {}).get("nodes") or {}
        ready = int(nodes.get("ready", 0))
        history = self.seen.setdefault(digest, [])
        if not history or history[-1][1] != ready:
            history.append((time.time(), ready))

    def ready_now(self, digest: str) -> int:
        history = self.seen.get(digest) or [(0.0, 0)]
        return history[-1][1]

    def latencies(self, published: list[tuple[str, float]], before: dict[str, int]
                  ) -> list[float]:
        """For each digest, the i-th acknowledged publication against the first time the
        aggregate reached ``before + i``."""
        by_digest: dict[str, list[float]] = {}
        for digest, at in published:
            by_digest.setdefault(digest, []).append(at)
        found: list[float] = []
        for digest, times in by_digest.items():
            history = self.seen.get(digest, [])
            for i, at in enumerate(sorted(times), start=1):
                wanted = before.get(digest, 0) + i
                seen = next((t for t, ready in history if ready >= wanted and t >= at - 5),
                            None)
                if seen is not None:
                    found.append(max(0.0, seen - at))
        return found


class Toucher:
    """Stamps one artifact a second with the wall time (``node.SENT``): every watcher's lag is
    its arrival minus the stamp."""

    def __init__(self, keys: list[tuple[str, str]], every: float = 1.0) -> None:
        self._keys = keys
        self._every = every
        self.touches = 0

    async def run(self, client: httpx.AsyncClient) -> None:
        while True:
            namespace, name = self._keys[self.touches % len(self._keys)]
            body = {"metadata": {"annotations": {hollow.SENT: repr(time.time())}}}
            await client.patch(f"{GROUP}/namespaces/{namespace}/modelartifacts/{name}",
                               content=orjson.dumps(body),
                               headers={"Content-Type": "application/merge-patch+json"})
            self.touches += 1
            await asyncio.sleep(self._every)


class Tenant:
    """A tenant's ``kubectl get modelartifacts -A`` every ``every`` seconds (pages of 500) and
    a watch of them all, with its own lag from the touches."""

    def __init__(self, every: float = 5.0) -> None:
        self._every = every
        self.lists: list[float] = []
        self.lags: list[float] = []

    async def run(self, client: httpx.AsyncClient) -> None:
        watching = asyncio.create_task(self._watch(client))
        try:
            while True:
                began = time.perf_counter()
                token = ""
                while True:
                    params = {"limit": "500", **({"continue": token} if token else {})}
                    page = (await client.get(f"{GROUP}/modelartifacts", params=params)).json()
                    token = page["metadata"].get("continue") or ""
                    if not token:
                        break
                self.lists.append(time.perf_counter() - began)
                await asyncio.sleep(self._every)
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)

    async def _watch(self, client: httpx.AsyncClient) -> None:
        version = (await client.get(f"{GROUP}/modelartifacts", params={"limit": "1"})).json()[
            "metadata"]["resourceVersion"]
        async for event in watch_lines(client, f"{GROUP}/modelartifacts",
                                       {"resourceVersion": version}):
            sent = ((event["object"].get("metadata") or {}).get("annotations") or {}).get(
                hollow.SENT)
            if sent:
                self.lags.append(time.time() - float(sent))


async def list_stores(client: httpx.AsyncClient, times: int) -> tuple[list[float], int]:
    """``times`` LISTs of every NodeModelStore: latencies and the body's size."""
    latencies: list[float] = []
    size = 0
    for _ in range(times):
        began = time.perf_counter()
        response = await client.get(f"{GROUP}/nodemodelstores")
        latencies.append(time.perf_counter() - began)
        response.raise_for_status()
        size = len(response.content)
    return latencies, size


async def progress(client: httpx.AsyncClient, path: str, times: int) -> tuple[list[float], int]:
    """``times`` GETs of an artifact's progress: latencies and how many nodes answered live."""
    latencies: list[float] = []
    live = 0
    for _ in range(times):
        began = time.perf_counter()
        response = await client.get(path)
        latencies.append(time.perf_counter() - began)
        response.raise_for_status()
        live = int(response.json().get("live") or 0)
    return latencies, live


def admin(server: apiserver.RunningServer) -> httpx.AsyncClient:
    return _apiserver.client(server, http2=False)
