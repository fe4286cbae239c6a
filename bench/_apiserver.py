"""Shared plumbing of the API server benchmarks: a standalone server, seeding, HTTP/2 clients."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from apiserver.registry import build
from apiserver.storage import sqlite
from tests.support import apiserver  # the same harness the integration tests use

GROUP = "/apis/worker.gpustack.ai/v1"
NAMESPACE = "bench"
COLLECTION = f"{GROUP}/namespaces/{NAMESPACE}/modelartifacts"


def artifact(name: str, index: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelArtifact",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app": "bench", "shard": str(index % 10)},
            "annotations": {"bench.gpustack.ai/note": "a typical small annotation"},
        },
        "spec": {
            "source": {
                "huggingFace": {"repository": f"org-{index % 50}/model-{index}", "revision": "main"}
            },
            "allowPatterns": ["*.safetensors", "*.json", "tokenizer*"],
        },
    }


@contextlib.contextmanager
def running(seed: int = 0, extra_args: Sequence[str] = ()) -> Iterator[apiserver.RunningServer]:
    """A standalone server in a temporary directory, with ``seed`` artifacts stored first."""
    with tempfile.TemporaryDirectory(prefix="bench-apiserver-") as tmp:
        data_dir = pathlib.Path(tmp)
        if seed:
            asyncio.run(_seed(data_dir / "store.db", seed))
        with apiserver.running(
            data_dir, extra_args=["--log-level", "WARNING", *extra_args]
        ) as server:
            yield server


async def _seed(path: pathlib.Path, count: int) -> None:
    """Create ``count`` artifacts in-process through the registry (rules and all), 50 at a time."""
    store = sqlite.Store(path)
    await store.start()
    try:
        registry = build.build(store)
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
