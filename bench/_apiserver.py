"""Shared plumbing of the API server benchmarks: a standalone server, seeding, HTTP/2 clients."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import pathlib
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import httpx

from apiserver.registry import build
from apiserver.storage import interface, sqlite
from apiserver.storage.etcd import client as etcd_client
from apiserver.storage.etcd import store as etcd_store
from devkit import admitting  # the same harness the integration tests use
from devkit.harness import apiserver, etcd
from openapi import resources, sources

GROUP = f"/apis/{resources.GROUP_VERSION}"
NAMESPACE = "bench"
COLLECTION = f"{GROUP}/namespaces/{NAMESPACE}/modelartifacts"


def artifact(name: str, index: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": resources.GROUP_VERSION,
        "kind": resources.MODEL_ARTIFACT.kind,
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app": "bench", "shard": str(index % 10)},
            "annotations": {"bench.gpustack.ai/note": "a typical small annotation"},
        },
        "spec": {
            "source": {
                sources.HUGGING_FACE: {"repository": f"org-{index % 50}/model-{index}",
                                       "revision": "main"}
            },
            "allowPatterns": ["*.safetensors", "*.json", "tokenizer*"],
        },
    }


STORAGES = ("sqlite", "etcd")


def storages() -> list[str]:
    """The backends to run the API benchmarks on: ``BENCH_STORAGE=sqlite|etcd|sqlite,etcd``
    (default both)."""
    chosen = [s.strip() for s in os.environ.get("BENCH_STORAGE", ",".join(STORAGES)).split(",")]
    unknown = [s for s in chosen if s not in STORAGES]
    if unknown:
        raise SystemExit(f"BENCH_STORAGE: unknown backend(s) {unknown}; known: {STORAGES}")
    return [s for s in chosen if s]


def name(benchmark: str, storage: str) -> str:
    """Result names: SQLite keeps the plain name (comparable with earlier runs)."""
    return benchmark if storage == "sqlite" else f"{benchmark}-{storage}"


@contextlib.contextmanager
def backend(storage: str, directory: pathlib.Path) -> Iterator[list[str]]:
    """The server flags for ``storage`` (an etcd member of its own for etcd)."""
    if storage == "sqlite":
        yield []
        return
    with etcd.running(directory / "etcd") as member:
        yield apiserver.etcd_args(member.url)


def open_store(storage: str, data_dir: pathlib.Path, flags: Sequence[str]) -> interface.Store:
    """The same backend in-process (seeding, storage-alone baselines)."""
    if storage == "sqlite":
        return sqlite.Store(data_dir / "store.db")
    url = flags[list(flags).index("--etcd-servers") + 1]
    return etcd_store.Store(etcd_client.Config(endpoints=(url,)), compaction_interval=0)


@contextlib.contextmanager
def running(
    seed: int = 0, extra_args: Sequence[str] = (), storage: str = "sqlite"
) -> Iterator[apiserver.RunningServer]:
    """A standalone server in a temporary directory, with ``seed`` artifacts stored first."""
    with tempfile.TemporaryDirectory(prefix="bench-apiserver-") as tmp:
        data_dir = pathlib.Path(tmp)
        with backend(storage, data_dir) as flags:
            if seed:
                asyncio.run(_seed(open_store(storage, data_dir, flags), seed))
            with apiserver.running(
                data_dir, extra_args=["--log-level", "WARNING", *flags, *extra_args]
            ) as server:
                yield server


async def _seed(store: interface.Store, count: int) -> None:
    """Create ``count`` artifacts in-process through the registry (rules and all), 50 at a time."""
    await store.start()
    try:
        registry = build.build(store, admission=admitting.standalone())
        for start in range(0, count, 50):
            await asyncio.gather(
                *(
                    registry.modelartifacts.create(artifact(f"a-{i:05d}", i), namespace=NAMESPACE)
                    for i in range(start, min(start + 50, count))
                )
            )
    finally:
        await store.close()


def client(server: apiserver.RunningServer, *, http2: bool = True) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.url,
        verify=apiserver.ssl_context(server.ca_file),
        http2=http2,
        headers={"Authorization": f"Bearer {server.admin_token}"},
        timeout=60,
        limits=httpx.Limits(max_connections=1000, max_keepalive_connections=1000),
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


Send = Callable[[int], Awaitable[httpx.Response]]
"""One GET on a kept connection (its argument numbers the request, for per-request users)."""


class Totals:
    """What GET rounds measured: requests, wall seconds, server CPU seconds, latencies."""

    def __init__(self) -> None:
        self.requests = 0
        self.seconds = 0.0
        self.server_cpu = 0.0
        self.latencies: list[float] = []
        self.rounds: list[tuple[int, float, float]] = []
        """(requests, wall seconds, server CPU seconds) of each measured round."""

    @property
    def round_capacities(self) -> list[float]:
        return [requests / cpu if cpu else 0.0 for requests, _, cpu in self.rounds]

    @property
    def capacity(self) -> float:
        """Requests per second of server CPU."""
        return self.requests / self.server_cpu if self.server_cpu else 0.0

    @property
    def observed(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def add(self, requests: int, seconds: float, server_cpu: float) -> None:
        """One measured round."""
        self.requests += requests
        self.seconds += seconds
        self.server_cpu += server_cpu
        self.rounds.append((requests, seconds, server_cpu))


async def measure_gets(pid: int, senders: Sequence[Send], seconds: float, into: Totals,
                       what: str) -> None:
    """Every sender GETs back to back for ``seconds`` (after one warm-up each, outside the
    window); adds requests, time, the server's CPU (``pid``) and latencies to ``into``."""
    counter = itertools.count()
    for send in senders:
        (await send(next(counter))).raise_for_status()
    deadline = time.perf_counter() + seconds
    count = 0

    async def worker(send: Send) -> None:
        nonlocal count
        while (now := time.perf_counter()) < deadline:
            response = await send(next(counter))
            into.latencies.append(time.perf_counter() - now)
            if response.status_code != 200:
                raise RuntimeError(f"GET {what}: {response.status_code} {response.text[:200]}")
            count += 1

    cpu_before = cpu_seconds(pid)
    started = time.perf_counter()
    await asyncio.gather(*(worker(send) for send in senders))
    into.add(count, time.perf_counter() - started, cpu_seconds(pid) - cpu_before)
