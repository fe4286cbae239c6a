"""Fixtures shared by the apiserver unit tests: a real SQLite store and a registry on it, and a
fresh etcd member of the test's own (``etcd_server``)."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Iterator

import pytest

from apiserver.registry import build
from apiserver.storage import sqlite
from tests.support import etcd


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


@pytest.fixture
def etcd_server(tmp_path: pathlib.Path) -> Iterator[etcd.Etcd]:
    with etcd.running(tmp_path / "etcd") as member:
        yield member
