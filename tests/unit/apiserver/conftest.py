"""Fixtures shared by the registry and endpoint tests: a real SQLite store and a registry on it."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator

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
