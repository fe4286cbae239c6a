"""Fixtures for the registry tests: a real SQLite store in tmp_path and a registry over it."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apiserver.registry import build
from apiserver.storage import sqlite


@pytest.fixture
async def storage(tmp_path: pathlib.Path) -> AsyncIterator[sqlite.Store]:
    store = sqlite.Store(tmp_path / "store.db")
    await store.start()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def registry(storage: sqlite.Store) -> build.Registry:
    return build.build(storage)


def artifact(name: str = "qwen", **metadata: Any) -> dict[str, Any]:
    """A valid ModelArtifact body."""
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelArtifact",
        "metadata": {"name": name, **metadata},
        "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2-0.5B"}}},
    }
